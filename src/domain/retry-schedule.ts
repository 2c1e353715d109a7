/**
 * The sink retry schedule as a pure function (product.md "Delivery"; docs/delivery.md
 * "Retry schedule"): after a failed attempt, when to try again, or give up.
 *
 * - Attempt n (1-based, the attempt that just failed) waits `delaysMs[n - 1]`,
 *   jittered uniformly by ±`jitter`; past the last delay the row is dead-lettered.
 * - `Retry-After` (delta seconds or an HTTP date) is a "not before": the wait is
 *   the larger of the jittered delay and the header, the header clamped to
 *   `maxRetryAfterMs`. It never adds attempts.
 * - `410 Gone` dead-letters at once.
 */

export interface RetrySchedule {
  /** Wait after each failed attempt; its length is the number of retries (attempts = length + 1). */
  readonly delaysMs: ReadonlyArray<number>
  /** Uniform jitter as a fraction of the delay, 0 ≤ jitter < 1 (0.2 = ±20%). */
  readonly jitter: number
  /** Upper bound on a sink's `Retry-After`. */
  readonly maxRetryAfterMs: number
}

const S = 1000
const M = 60 * S
const H = 60 * M

/** 5 s, 30 s, 2 m, 10 m, 30 m, 1 h, 3 h, 6 h, 12 h: ten attempts over about 22.7 h (±20%). */
export const DEFAULT_DELAYS_MS: ReadonlyArray<number> = [5 * S, 30 * S, 2 * M, 10 * M, 30 * M, 1 * H, 3 * H, 6 * H, 12 * H]
export const DEFAULT_JITTER = 0.2
export const DEFAULT_MAX_RETRY_AFTER_MS = 1 * H

export const defaultSchedule: RetrySchedule = {
  delaysMs: DEFAULT_DELAYS_MS,
  jitter: DEFAULT_JITTER,
  maxRetryAfterMs: DEFAULT_MAX_RETRY_AFTER_MS
}

/**
 * The exponential form of a sink's `retry` (docs/configuration.md "Retry
 * policies"): the wait after attempt n (1-based) is
 * `min(maxDelayMs, initialDelayMs × factor^(n − 1))`, for n = 1 .. maxAttempts − 1.
 * It is turned into `delaysMs` when the configuration is read, so the pipeline
 * knows one form.
 */
export interface ExponentialPolicy {
  /** Attempts in total, the first included (1: no retry). */
  readonly maxAttempts: number
  readonly initialDelayMs: number
  readonly factor: number
  readonly maxDelayMs: number
}

/** The defaults of the exponential keys: doubling from 5 s, at most 1 h apart, 10 attempts. */
export const DEFAULT_EXPONENTIAL: ExponentialPolicy = { maxAttempts: 10, initialDelayMs: 5 * S, factor: 2, maxDelayMs: 1 * H }

export const exponentialDelays = (p: ExponentialPolicy): ReadonlyArray<number> =>
  Array.from({ length: Math.max(0, p.maxAttempts - 1) }, (_, i) => Math.min(p.maxDelayMs, Math.round(p.initialDelayMs * p.factor ** i)))

/** Attempts a row gets in total under `s`. */
export const maxAttempts = (s: RetrySchedule): number => s.delaysMs.length + 1

export type Decision =
  | { readonly _tag: "Retry"; readonly delayMs: number; readonly at: number }
  | { readonly _tag: "GiveUp"; readonly reason: "gone" | "exhausted" }

export interface Failure {
  /** The attempt that just failed, 1-based (the delivery row's attempts after this one). */
  readonly attempt: number
  /** HTTP status; 0 for a timeout or a transport error. */
  readonly status: number
  /** The sink's `Retry-After` header, if any. */
  readonly retryAfter: string | undefined
  /** When the attempt ended (ms since the epoch). */
  readonly now: number
  /** A uniform draw in [0, 1): the jitter source. */
  readonly random: number
}

/** `Retry-After` as milliseconds from `now`: delta seconds or an HTTP date; undefined when unreadable. */
export const parseRetryAfter = (value: string | undefined, now: number): number | undefined => {
  if (value === undefined) return undefined
  const v = value.trim()
  if (v === "") return undefined
  if (/^\d+$/.test(v)) return Number(v) * S
  // An HTTP date needs letters (a weekday or month); a bare number or junk is not one.
  if (!/[a-z]/i.test(v)) return undefined
  const t = Date.parse(v)
  return Number.isNaN(t) ? undefined : Math.max(0, t - now)
}

export const jittered = (delayMs: number, jitter: number, random: number): number =>
  Math.max(0, Math.round(delayMs * (1 + jitter * (2 * random - 1))))

export const next = (s: RetrySchedule, f: Failure): Decision => {
  if (f.status === 410) return { _tag: "GiveUp", reason: "gone" }
  const base = s.delaysMs[f.attempt - 1]
  if (base === undefined) return { _tag: "GiveUp", reason: "exhausted" }
  const scheduled = jittered(base, s.jitter, f.random)
  const ra = parseRetryAfter(f.retryAfter, f.now)
  const delayMs = ra === undefined ? scheduled : Math.max(scheduled, Math.min(ra, s.maxRetryAfterMs))
  return { _tag: "Retry", delayMs, at: f.now + delayMs }
}
