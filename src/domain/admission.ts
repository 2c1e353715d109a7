/**
 * Admission (TEN-2, issue 24): the refusals the edge gives before it reads
 * a body, and the pure rules behind them. The state they read (buckets, the
 * bytes being read, the queued bytes, the free space) is kept by
 * src/http/admission.ts, src/queue/queued-bytes.ts and
 * src/lifecycle/disk-reserve.ts; docs/api.md "Admission" lists the answers.
 */
import { Data } from "effect"

/** The tenant is past `ingestPerSec`: 429 `tenant_rate`, `Retry-After` until its next token. */
export class TenantRate extends Data.TaggedError("TenantRate")<{ readonly perSec: number; readonly retryAfterS: number }> {}

/** The tenant's queued bytes are at `maxQueuedBytes`: 429 `tenant_quota`. */
export class TenantQuota extends Data.TaggedError("TenantQuota")<{ readonly max: number }> {}

/** The store's filesystem has less free space than `store.minFreeBytes`: 503 `disk_reserve`. */
export class DiskReserve extends Data.TaggedError("DiskReserve")<{ readonly free: number; readonly min: number }> {}

/** Request bytes being read are at `ingest.maxBufferedBytes`: 503 `busy`, before the body is read. */
export class Busy extends Data.TaggedError("Busy")<{ readonly max: number }> {}

export type AdmissionRefusal = TenantRate | TenantQuota | DiskReserve | Busy

/** A tenant is refused once its queued bytes reach its quota (the request that crosses it was taken). */
export const overQuota = (queued: number, max: number): boolean => max > 0 && queued >= max

/** A bucket holds this many seconds of tokens (at least one token). */
export const INGEST_BURST_SECONDS = 1

export interface Bucket {
  tokens: number
  at: number
  /** The rate it was last taken at. */
  perSec: number
}

export const capacityOf = (perSec: number): number => Math.max(1, perSec * INGEST_BURST_SECONDS)

/** The bucket refilled to `now` (ms); a bucket is full, and may be dropped, once `tokens` reaches `capacityOf`. */
export const refill = (b: Bucket, perSec: number, now: number): Bucket => {
  const tokens = Math.min(capacityOf(perSec), b.tokens + (Math.max(0, now - b.at) * perSec) / 1000)
  b.tokens = tokens
  b.at = now
  return b
}

/** Whether one token is there (true), else the whole seconds until one is (at least 1). */
export const available = (b: Bucket, perSec: number, now: number): true | number => {
  refill(b, perSec, now)
  return b.tokens >= 1 ? true : Math.max(1, Math.ceil((1 - b.tokens) / perSec))
}

/** Take one token (true), or the whole seconds until one is there (at least 1). */
export const take = (b: Bucket, perSec: number, now: number): true | number => {
  const there = available(b, perSec, now)
  if (there === true) b.tokens -= 1
  return there
}
