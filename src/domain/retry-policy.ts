/**
 * A sink's `retry` as the configuration writes it (docs/configuration.md
 * "Retry policies"): the explicit `delaysMs`, or the exponential keys
 * `maxAttempts`, `initialDelayMs`, `factor`, `maxDelayMs` (each defaulting to
 * `DEFAULT_EXPONENTIAL`), not both. Either decodes to the one `RetrySchedule`
 * the pipeline knows (src/domain/retry-schedule.ts), explicit delays.
 */
import { Schema, SchemaTransformation } from "effect"
import * as Retry from "./retry-schedule.js"
import { int, withDefault } from "./schema-parts.js"

const WEEK_MS = 7 * 24 * 3_600_000
const EXPONENTIAL_KEYS = ["maxAttempts", "initialDelayMs", "factor", "maxDelayMs"] as const

/** The keys as written. */
const SinkRetryInput = Schema.Struct({
  /** Wait after each failed attempt (ms); attempts = length + 1, then the row is dead-lettered. */
  delaysMs: Schema.optionalKey(Schema.Array(int(0, WEEK_MS)).check(Schema.isMaxLength(100))),
  /** Attempts in total, the first included; waits grow by `factor` from `initialDelayMs`, at most `maxDelayMs`. */
  maxAttempts: Schema.optionalKey(int(1, 101)),
  initialDelayMs: Schema.optionalKey(int(0, WEEK_MS)),
  factor: Schema.optionalKey(Schema.Number.check(Schema.isBetween({ minimum: 1, maximum: 10 }))),
  maxDelayMs: Schema.optionalKey(int(0, WEEK_MS)),
  /** Uniform jitter as a fraction of each delay (0.2 = ±20%). */
  jitter: withDefault(Schema.Number.check(Schema.isGreaterThanOrEqualTo(0), Schema.isLessThan(1)), () => Retry.DEFAULT_JITTER),
  /** Upper bound on a sink's `Retry-After`. */
  maxRetryAfterMs: withDefault(int(0, WEEK_MS), () => Retry.DEFAULT_MAX_RETRY_AFTER_MS)
}).check(
  Schema.makeFilter((r) =>
    r.delaysMs !== undefined && EXPONENTIAL_KEYS.some((k) => r[k] !== undefined)
      ? { path: ["delaysMs"], issue: "either delaysMs or maxAttempts/initialDelayMs/factor/maxDelayMs, not both" }
      : undefined
  )
)

const delaysOf = (r: typeof SinkRetryInput.Type): ReadonlyArray<number> =>
  EXPONENTIAL_KEYS.some((k) => r[k] !== undefined)
    ? Retry.exponentialDelays({
        maxAttempts: r.maxAttempts ?? Retry.DEFAULT_EXPONENTIAL.maxAttempts,
        initialDelayMs: r.initialDelayMs ?? Retry.DEFAULT_EXPONENTIAL.initialDelayMs,
        factor: r.factor ?? Retry.DEFAULT_EXPONENTIAL.factor,
        maxDelayMs: r.maxDelayMs ?? Retry.DEFAULT_EXPONENTIAL.maxDelayMs
      })
    : (r.delaysMs ?? Retry.DEFAULT_DELAYS_MS)

/** The effective policy: `RetrySchedule` (src/domain/retry-schedule.ts), explicit delays either way; docs/delivery.md explains it. */
export const SinkRetry = SinkRetryInput.pipe(
  Schema.decodeTo(
    Schema.Struct({ delaysMs: Schema.Array(Schema.Number), jitter: Schema.Number, maxRetryAfterMs: Schema.Number }),
    SchemaTransformation.transform({
      decode: (r) => ({ delaysMs: delaysOf(r), jitter: r.jitter, maxRetryAfterMs: r.maxRetryAfterMs }),
      encode: (s) => s
    })
  )
)
