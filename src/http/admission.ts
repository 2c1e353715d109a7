/**
 * Admission (TEN-2, issue 24): the one place the ingest listener asks,
 * once it knows the tenant and before it reads a byte of the body, whether
 * to take the request. In order, and with one answer shape (errors.ts):
 * the disk reserve (503 `disk_reserve`), the bytes being read across
 * requests (503 `busy`), the tenant's queued bytes (429 `tenant_quota`,
 * when the Writer's cache knows its ordinal; the Writer checks again in its
 * commit, before anything is written) and the tenant's ingest rate (429
 * `tenant_rate`). No store read: each figure is in memory. A quota check is
 * also told to `OperationalEvents` (its `tenant.quota_reached` event).
 */
import { Context, Option } from "effect"
import * as A from "../domain/admission.js"
import { OperationalEvents } from "../delivery/operations.js"
import { DiskReserve } from "../lifecycle/disk-reserve.js"
import { Limits } from "../queue/limits.js"
import { QueuedBytes } from "../queue/queued-bytes.js"
import { Writer } from "../queue/writer.js"
import { type ApiServices, perServices } from "./gate.js"

/** Rate buckets kept before the full ones are swept (at most once a second); a bucket not yet refilled is never dropped. */
export const INGEST_BUCKETS_SWEEP = 65_536

export interface AdmissionOptions {
  /** `ingest.maxBufferedBytes`. */
  readonly maxBufferedBytes: number
}

export interface Admission {
  /**
   * A refusal, or the bytes reserved of `maxBufferedBytes` until `release(bytes)` (called once,
   * when the body has been read or the request has ended).
   */
  readonly admit: (
    services: Context.Context<ApiServices>,
    tenant: string,
    contentLength: string | undefined,
    maxBodyBytes: number
  ) => A.AdmissionRefusal | number
  readonly release: (bytes: number) => void
  /** Bytes reserved now (tests). */
  readonly buffered: () => number
}

export const make = (options: AdmissionOptions): Admission => {
  let buffered = 0
  const buckets = new Map<string, A.Bucket>()
  let swept = 0

  const sweep = (now: number) => {
    swept = now
    for (const [tenant, b] of buckets) {
      const perSec = b.perSec
      if (A.refill(b, perSec, now).tokens >= A.capacityOf(perSec)) buckets.delete(tenant)
    }
  }

  const rate = (tenant: string, perSec: number, now: number): A.TenantRate | undefined => {
    if (perSec === 0) return undefined
    let b = buckets.get(tenant)
    if (b === undefined) {
      // Once a second at most: a sweep that finds little to drop is not repeated on every new tenant.
      if (buckets.size >= INGEST_BUCKETS_SWEEP && now - swept >= 1_000) sweep(now)
      b = { tokens: A.capacityOf(perSec), at: now, perSec }
      buckets.set(tenant, b)
    }
    // A limit changed by an override applies from the next request on.
    b.perSec = perSec
    const taken = A.take(b, perSec, now)
    return taken === true ? undefined : new A.TenantRate({ perSec, retryAfterS: taken })
  }

  // The services admission uses, looked up once per services context.
  const servicesOf = perServices((services) => ({
    disk: Option.getOrUndefined(Context.getOption(services, DiskReserve)),
    limits: Context.get(services, Limits),
    writer: Context.get(services, Writer),
    bytes: Option.getOrUndefined(Context.getOption(services, QueuedBytes)),
    events: Option.getOrUndefined(Context.getOption(services, OperationalEvents))
  }))

  const admit: Admission["admit"] = (services, tenant, contentLength, maxBodyBytes) => {
    const s = servicesOf(services)
    const low = s.disk?.refusal()
    if (low !== undefined) return low
    const reserve = A.reservationOf(contentLength, maxBodyBytes)
    // An empty budget still takes one request, however large.
    if (buffered > 0 && buffered + reserve > options.maxBufferedBytes) return new A.Busy({ max: options.maxBufferedBytes })
    const limits = s.limits.ingestOf(tenant)
    if (limits.maxQueuedBytes > 0) {
      const ord = s.writer.ordOf(tenant)
      if (ord !== undefined && s.bytes !== undefined) {
        const queued = s.bytes.of(ord)
        const over = A.overQuota(queued, limits.maxQueuedBytes)
        // The `tenant.quota_reached` event, once per crossing (src/delivery/operations.ts).
        s.events?.quota(tenant, queued, limits.maxQueuedBytes, over)
        if (over) return new A.TenantQuota({ max: limits.maxQueuedBytes })
      }
    }
    const limited = rate(tenant, limits.ingestPerSec, Date.now())
    if (limited !== undefined) return limited
    buffered += reserve
    return reserve
  }

  return { admit, release: (bytes) => void (buffered -= bytes), buffered: () => buffered }
}
