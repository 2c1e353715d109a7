/**
 * A sink's pace (TEN-3 "limits per sink"; docs/delivery.md "Fair dispatch"): a token bucket of
 * `ratePerSec` calls (one second of burst) shared by every tenant routed to the sink, and the pause
 * a `429` with `Retry-After` asks for, which holds this sink's next calls, not the tenant's other sinks.
 */

/** Pause after a 429 without a readable `Retry-After`. */
export const DEFAULT_429_PAUSE_MS = 1_000

export interface SinkPace {
  /** 0 when a call may start at `now` (and takes its token), else the ms to wait. */
  readonly take: (now: number) => number
  /** A 429 ended at `now`: hold new calls for `pauseMs` (never shortening a longer pause). */
  readonly pause: (now: number, pauseMs: number) => void
  /** Why the last refused `take` waited. */
  readonly reason: () => "rate" | "retry_after"
}

export const makeSinkPace = (ratePerSec: number): SinkPace => {
  let tokens = ratePerSec
  let at = 0
  let pausedUntil = 0
  let reason: "rate" | "retry_after" = "rate"
  return {
    take: (now) => {
      if (now < pausedUntil) {
        reason = "retry_after"
        return pausedUntil - now
      }
      if (ratePerSec <= 0) return 0
      tokens = Math.min(ratePerSec, tokens + ((now - at) / 1000) * ratePerSec)
      at = now
      if (tokens >= 1) {
        tokens -= 1
        return 0
      }
      reason = "rate"
      return Math.max(1, Math.ceil(((1 - tokens) / ratePerSec) * 1000))
    },
    pause: (now, pauseMs) => {
      pausedUntil = Math.max(pausedUntil, now + pauseMs)
    },
    reason: () => reason
  }
}
