/**
 * A destination's circuit breaker (docs/delivery.md "Failing destinations"): closed, it counts
 * calls and failures over a sliding window of `windowMs` (this window and the one before, the
 * older weighted by what of it is left); at `minCalls` calls or more with `failureRatio` of them
 * failed it opens. Open, no call starts and no row is admitted until `openUntil`; then one probe
 * is admitted (half-open): its 2xx closes the breaker, its failure opens it again for twice as
 * long (at most `maxOpenMs`). It also keeps the failed calls since the last 2xx and that 2xx's
 * time (the console and the gauge show them). Memory only: a restart starts every breaker closed.
 * Pure state.
 */

export interface BreakerSettings {
  readonly minCalls: number
  readonly failureRatio: number
  readonly windowMs: number
  readonly openMs: number
  readonly maxOpenMs: number
}

export const DEFAULT_BREAKER: BreakerSettings = { minCalls: 10, failureRatio: 0.7, windowMs: 60_000, openMs: 30_000, maxOpenMs: 600_000 }

export interface Breaker {
  state: "closed" | "open" | "half"
  openUntil: number
  /** The next opening's length (doubles on each failed probe). */
  openMs: number
  /** A probe admitted and not finished. */
  probing: boolean
  trips: number
  since: number
  cur: { calls: number; fails: number }
  prev: { calls: number; fails: number }
  /** Failed calls since the last 2xx (the rank of `ankusa_breaker_state`'s endpoints), and that 2xx's time. */
  failures: number
  lastOk: number | undefined
}

export const makeBreaker = (s: BreakerSettings): Breaker => ({
  state: "closed",
  openUntil: 0,
  openMs: s.openMs,
  probing: false,
  trips: 0,
  since: 0,
  cur: { calls: 0, fails: 0 },
  prev: { calls: 0, fails: 0 },
  failures: 0,
  lastOk: undefined
})

const roll = (b: Breaker, s: BreakerSettings, now: number) => {
  if (now - b.since >= 2 * s.windowMs) {
    b.prev = { calls: 0, fails: 0 }
    b.cur = { calls: 0, fails: 0 }
    b.since = now
  } else if (now - b.since >= s.windowMs) {
    b.prev = b.cur
    b.cur = { calls: 0, fails: 0 }
    b.since += s.windowMs
  }
}

/** Whether a row may be admitted (a call started) now; a half-open breaker admits its one probe. */
export const allows = (b: Breaker, now: number): boolean => {
  if (b.state === "closed") return true
  if (b.state === "open" && now >= b.openUntil) b.state = "half"
  return b.state === "half" && !b.probing
}

/** A row was admitted: in half-open, it is the probe. */
export const admitted = (b: Breaker): void => {
  if (b.state === "half") b.probing = true
}

/** Whether the breaker would admit its probe now (parked tenants come back for it). */
export const probeDue = (b: Breaker, now: number): boolean => b.state !== "closed" && !b.probing && now >= b.openUntil

/** A call ended; true when this call opened the breaker (a trip). */
export const record = (b: Breaker, s: BreakerSettings, ok: boolean, now: number): boolean => {
  if (ok) {
    b.failures = 0
    b.lastOk = now
  } else b.failures++
  if (b.state === "half" || b.state === "open") {
    if (!b.probing) return false
    b.probing = false
    if (ok) {
      b.state = "closed"
      b.openMs = s.openMs
      b.cur = { calls: 0, fails: 0 }
      b.prev = { calls: 0, fails: 0 }
      b.since = now
      return false
    }
    b.openMs = Math.min(b.openMs * 2, s.maxOpenMs)
    b.state = "open"
    b.openUntil = now + b.openMs
    b.trips++
    return true
  }
  roll(b, s, now)
  b.cur.calls++
  if (!ok) b.cur.fails++
  const w = 1 - (now - b.since) / s.windowMs
  const calls = b.cur.calls + b.prev.calls * w
  const fails = b.cur.fails + b.prev.fails * w
  if (calls < s.minCalls || fails / calls < s.failureRatio) return false
  b.state = "open"
  b.openUntil = now + b.openMs
  b.trips++
  return true
}

/** A destination's breaker as the console and the gauge show it. */
export interface BreakerView {
  readonly destination: string
  readonly state: "closed" | "open" | "half-open"
  /** While open: when its probe is due (epoch ms). */
  readonly openUntil: number | null
  readonly failures: number
  readonly lastSuccessAt: number | null
  readonly trips: number
}

export const viewOf = (destination: string, b: Breaker): BreakerView => ({
  destination,
  state: b.state === "half" ? "half-open" : b.state,
  openUntil: b.state === "closed" ? null : b.openUntil,
  failures: b.failures,
  lastSuccessAt: b.lastOk ?? null,
  trips: b.trips
})
