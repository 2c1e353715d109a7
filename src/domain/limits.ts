/**
 * Per-tenant limits: dispatch (TEN-3, issue 14: weight, max inflight and
 * deliveries per second) and admission (TEN-2, issue 24: hooks taken per
 * second and queued bytes). `tenants.limits` in the configuration gives every
 * tenant's defaults; a tenant's override (stored in the tenants column family
 * under its ordinal, `<<?l, ord::32>>`) replaces them field by field.
 * Pure: the ranges, the override's Schema, the stored value's codec and
 * `effective`.
 */
import { Schema } from "effect"
import { asBuffer, zeroed } from "./bytes.js"

export interface TenantLimits {
  /** The tenant's share of the claim budget, relative to the other tenants' weights. */
  readonly weight: number
  /** Rows of the tenant claimed and not yet settled at most; 0: no cap of its own (`pipeline.maxInflight` still applies). */
  readonly maxInflight: number
  /** Deliveries a second (a token bucket in the pipeline); 0: unlimited. */
  readonly ratePerSec: number
  /** Ingest requests a second (a token bucket at the edge); past it 429 `tenant_rate`; 0: unlimited. */
  readonly ingestPerSec: number
  /** Queued bytes (the tenant's `bytes` counter) at which ingest answers 429 `tenant_quota`; 0: unlimited. */
  readonly maxQueuedBytes: number
}

/** The admission fields of a tenant's limits. */
export type IngestLimits = Pick<TenantLimits, "ingestPerSec" | "maxQueuedBytes">

/** What a tenant overrides; an empty override is no override (its row is deleted). */
export type LimitsOverride = Partial<TenantLimits>

export const WEIGHT_MIN = 1
export const WEIGHT_MAX = 1_000
export const MAX_INFLIGHT_MAX = 100_000
export const RATE_MAX = 1_000_000
/** 2^53 - 1: any byte count the counters can hold exactly. */
export const MAX_QUEUED_BYTES_MAX = Number.MAX_SAFE_INTEGER

export const DEFAULT_LIMITS: TenantLimits = { weight: 1, maxInflight: 0, ratePerSec: 0, ingestPerSec: 0, maxQueuedBytes: 0 }

export const validWeight = (n: number): boolean => Number.isInteger(n) && n >= WEIGHT_MIN && n <= WEIGHT_MAX
export const validMaxInflight = (n: number): boolean => Number.isInteger(n) && n >= 0 && n <= MAX_INFLIGHT_MAX
export const validRate = (n: number): boolean => Number.isFinite(n) && n >= 0 && n <= RATE_MAX
export const validMaxQueuedBytes = (n: number): boolean => Number.isSafeInteger(n) && n >= 0

// One message per field, also for a value of the wrong type, so a refusal names the accepted range.
const field = (valid: (n: number) => boolean, message: string) =>
  Schema.Number.annotate({ message }).check(Schema.makeFilter((n: number) => valid(n) || message))

export const Weight = field(validWeight, `expected an integer from ${WEIGHT_MIN} to ${WEIGHT_MAX}`)
export const MaxInflight = field(validMaxInflight, `expected an integer from 0 to ${MAX_INFLIGHT_MAX} (0: no cap of its own)`)
export const RatePerSec = field(validRate, `expected a number from 0 to ${RATE_MAX} (0: unlimited)`)
export const IngestPerSec = RatePerSec
export const MaxQueuedBytes = field(validMaxQueuedBytes, "expected an integer from 0 to 9007199254740991 (0: unlimited)")

/** The override as the API takes it; decode it with `onExcessProperty: "error"` (an unknown field is refused). */
export const LimitsOverride = Schema.Struct({
  weight: Schema.optionalKey(Weight),
  maxInflight: Schema.optionalKey(MaxInflight),
  ratePerSec: Schema.optionalKey(RatePerSec),
  ingestPerSec: Schema.optionalKey(IngestPerSec),
  maxQueuedBytes: Schema.optionalKey(MaxQueuedBytes)
}).annotate({
  identifier: "LimitsOverride",
  message: "expected a JSON object with any of weight, maxInflight, ratePerSec, ingestPerSec, maxQueuedBytes"
})

/** Strict decode of an unknown input (an unknown field is an issue). */
export const decodeOverrideInput = Schema.decodeUnknownResult(LimitsOverride, { onExcessProperty: "error" })

export const isEmpty = (o: LimitsOverride): boolean =>
  o.weight === undefined && o.maxInflight === undefined && o.ratePerSec === undefined && o.ingestPerSec === undefined &&
  o.maxQueuedBytes === undefined

/** The override laid over the defaults; the defaults object itself when nothing is overridden. */
export const effective = (defaults: TenantLimits, override: LimitsOverride | undefined): TenantLimits =>
  override === undefined || isEmpty(override)
    ? defaults
    : {
      weight: override.weight ?? defaults.weight,
      maxInflight: override.maxInflight ?? defaults.maxInflight,
      ratePerSec: override.ratePerSec ?? defaults.ratePerSec,
      ingestPerSec: override.ingestPerSec ?? defaults.ingestPerSec,
      maxQueuedBytes: override.maxQueuedBytes ?? defaults.maxQueuedBytes
    }

/** Whether an override sets an admission field (the Limits service keeps those in memory). */
export const hasIngest = (o: LimitsOverride | undefined): boolean =>
  o !== undefined && (o.ingestPerSec !== undefined || o.maxQueuedBytes !== undefined)

// ---------------------------------------------------------------------------
// The stored value: <<1::8, mask::8, weight::16?, maxInflight::32?, ratePerSec::float64?,
// ingestPerSec::float64?, maxQueuedBytes::float64?>>, big-endian, each field present only if its
// mask bit is set (1 weight, 2 maxInflight, 4 ratePerSec, 8 ingestPerSec, 16 maxQueuedBytes).

const VERSION = 1
const W = 1
const M = 2
const R = 4
const I = 8
const Q = 16

const sizeOf = (mask: number): number =>
  2 + (mask & W ? 2 : 0) + (mask & M ? 4 : 0) + (mask & R ? 8 : 0) + (mask & I ? 8 : 0) + (mask & Q ? 8 : 0)

/** Throws on an empty or out-of-range override: callers pass a decoded one. */
export const encode = (o: LimitsOverride): Uint8Array => {
  if (isEmpty(o)) throw new RangeError("an empty limits override is not stored (its row is deleted)")
  if (o.weight !== undefined && !validWeight(o.weight)) throw new RangeError(`limits weight out of range: ${o.weight}`)
  if (o.maxInflight !== undefined && !validMaxInflight(o.maxInflight)) throw new RangeError(`limits maxInflight out of range: ${o.maxInflight}`)
  if (o.ratePerSec !== undefined && !validRate(o.ratePerSec)) throw new RangeError(`limits ratePerSec out of range: ${o.ratePerSec}`)
  if (o.ingestPerSec !== undefined && !validRate(o.ingestPerSec)) throw new RangeError(`limits ingestPerSec out of range: ${o.ingestPerSec}`)
  if (o.maxQueuedBytes !== undefined && !validMaxQueuedBytes(o.maxQueuedBytes)) {
    throw new RangeError(`limits maxQueuedBytes out of range: ${o.maxQueuedBytes}`)
  }
  const mask = (o.weight === undefined ? 0 : W) | (o.maxInflight === undefined ? 0 : M) | (o.ratePerSec === undefined ? 0 : R) |
    (o.ingestPerSec === undefined ? 0 : I) | (o.maxQueuedBytes === undefined ? 0 : Q)
  const b = zeroed(sizeOf(mask))
  b[0] = VERSION
  b[1] = mask
  let off = 2
  if (o.weight !== undefined) off = b.writeUInt16BE(o.weight, off)
  if (o.maxInflight !== undefined) off = b.writeUInt32BE(o.maxInflight, off)
  if (o.ratePerSec !== undefined) off = b.writeDoubleBE(o.ratePerSec, off)
  if (o.ingestPerSec !== undefined) off = b.writeDoubleBE(o.ingestPerSec, off)
  if (o.maxQueuedBytes !== undefined) b.writeDoubleBE(o.maxQueuedBytes, off)
  return b
}

/** undefined for bytes this build does not write: another version, an unknown or empty mask, a bad length or range. */
export const decode = (v: Uint8Array): LimitsOverride | undefined => {
  if (v.length < 2 || v[0] !== VERSION) return undefined
  const mask = v[1]!
  if (mask === 0 || (mask & ~(W | M | R | I | Q)) !== 0 || v.length !== sizeOf(mask)) return undefined
  const b = asBuffer(v)
  let off = 2
  const out: { -readonly [K in keyof TenantLimits]?: number } = {}
  if (mask & W) {
    out.weight = b.readUInt16BE(off)
    off += 2
    if (!validWeight(out.weight)) return undefined
  }
  if (mask & M) {
    out.maxInflight = b.readUInt32BE(off)
    off += 4
    if (!validMaxInflight(out.maxInflight)) return undefined
  }
  if (mask & R) {
    out.ratePerSec = b.readDoubleBE(off)
    off += 8
    if (!validRate(out.ratePerSec)) return undefined
  }
  if (mask & I) {
    out.ingestPerSec = b.readDoubleBE(off)
    off += 8
    if (!validRate(out.ingestPerSec)) return undefined
  }
  if (mask & Q) {
    out.maxQueuedBytes = b.readDoubleBE(off)
    if (!validMaxQueuedBytes(out.maxQueuedBytes)) return undefined
  }
  return out
}
