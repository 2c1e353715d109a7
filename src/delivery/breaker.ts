/**
 * A destination's circuit breaker (docs/delivery.md "Failing destinations"). It counts health,
 * not verdicts: a failure is a 5xx, a 408, a timeout or a transport error (`failedOf`); another
 * answer is a call that did not fail (the receiver is up and gave its verdict on one hook); a 429
 * is the pace's (sink-pace.ts) and no call at all. Closed, it counts calls and failures over a
 * sliding window of `windowMs` (this window and the one before, the older weighted by what of it
 * is left); at `minCalls` calls or more with `failureRatio` of them failed it opens. Open, no call
 * starts and no row is admitted until `openUntil`; then one probe is admitted (half-open): an
 * answer that is no failure closes the breaker, a failure opens it again for twice as long (at
 * most `maxOpenMs`), a 429 or a probe never called gives the probe back (`released`). It also
 * keeps the calls not answered 2xx since the last 2xx and that 2xx's time (the console and the
 * gauge show them). Memory only: a restart starts every breaker closed. Pure state.
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
  /** A probe admitted and not finished: held by its claim's reservation, then by its job (released if never called). */
  probing: boolean
  trips: number
  since: number
  cur: { calls: number; fails: number }
  prev: { calls: number; fails: number }
  /** Calls not answered 2xx since the last 2xx (the rank of `ankusa_breaker_state`'s endpoints), and that 2xx's time. */
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

/** A row was admitted: true when it is the probe (half-open), which its reservation or job then holds. */
export const admitted = (b: Breaker): boolean => {
  if (b.state !== "half" || b.probing) return false
  b.probing = true
  return true
}

/** The probe was never called (its claim failed, its destination went away): the next row admitted is the probe. */
export const released = (b: Breaker): void => {
  if (b.state === "half") b.probing = false
}

/** Whether the breaker would admit its probe now (parked tenants come back for it). */
export const probeDue = (b: Breaker, now: number): boolean => b.state !== "closed" && !b.probing && now >= b.openUntil

/** Whether an answer's status counts against its destination's health: a 5xx, a 408, or 0 (a timeout or a transport error). */
export const failedOf = (status: number): boolean => status === 0 || status === 408 || status >= 500

/**
 * A call answered `status` ended (`probe`: the call was the probe its breaker admitted); true when
 * this call opened the breaker (a trip). Calls that started before a trip change no state while
 * it is open: only the probe decides.
 */
export const record = (b: Breaker, s: BreakerSettings, status: number, probe: boolean, now: number): boolean => {
  if (status >= 200 && status < 300) {
    b.failures = 0
    b.lastOk = now
  } else b.failures++
  if (b.state !== "closed") {
    if (!probe || b.state !== "half") return false
    b.probing = false
    if (status === 429) return false
    if (!failedOf(status)) {
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
  if (status === 429) return false
  roll(b, s, now)
  b.cur.calls++
  if (failedOf(status)) b.cur.fails++
  else return false
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
