/**
 * Admission (TEN-2, issue 24): the one place the ingest listener asks,
 * once it knows the tenant and before it reads a byte of the body, whether
 * to take the request. In order, and with one answer shape (errors.ts):
 * the disk reserve (503 `disk_reserve`), the body bytes being read across
 * requests (503 `busy` once they are at `ingest.maxBufferedBytes`: the bytes
 * that arrived, not those declared, so a slow upload holds only what it sent;
 * past the bound the bodies being read pause until one is done), the tenant's queued bytes (429 `tenant_quota`,
 * when the Writer's cache knows its ordinal; the Writer checks again in its
 * commit, before anything is written) and the tenant's ingest rate (429
 * `tenant_rate`: looked at here, spent once the hook is verified, so a
 * request whose signature fails spends nothing). No store read: each figure
 * is in memory. A quota check is also told to `OperationalEvents` (its
 * `tenant.quota_reached` event). A test event is admitted by the same rules.
 */
import { Context, Option } from "effect"
import * as A from "../domain/admission.js"
import { OperationalEvents } from "../delivery/operations.js"
import { DiskReserve } from "../lifecycle/disk-reserve.js"
import { Limits } from "../queue/limits.js"
import { QueuedBytes } from "../queue/queued-bytes.js"
import { Writer } from "../queue/writer.js"
import { type ApiServices, perServices } from "./gate.js"

export interface AdmissionOptions {
  /** `ingest.maxBufferedBytes`. */
  readonly maxBufferedBytes: number
}

/** A body being read, as admission pauses and resumes it while the bytes being read are at the bound. */
export interface Flow {
  readonly pause: () => void
  readonly resume: () => void
}

export interface Admission {
  /**
   * A refusal, or undefined: the body may be read (`charge` each chunk, `release` what it charged
   * once, when the body has been read or the request has ended). The tenant's rate is looked at, not spent.
   */
  readonly admit: (services: Context.Context<ApiServices>, tenant: string) => A.AdmissionRefusal | undefined
  /** `bytes` of `flow`'s body arrived: past `maxBufferedBytes`, the flow is paused until a release leaves room. */
  readonly charge: (flow: Flow, bytes: number) => void
  readonly release: (flow: Flow, bytes: number) => void
  /** The verified hook spends its tenant's token: its refusal when another request took the last one since `admit`. */
  readonly spend: (services: Context.Context<ApiServices>, tenant: string) => A.TenantRate | undefined
  /** Bytes being read now (tests). */
  readonly buffered: () => number
}

/** The services admission uses. */
const partsIn = (services: Context.Context<ApiServices>) => ({
  disk: Option.getOrUndefined(Context.getOption(services, DiskReserve)),
  limits: Context.get(services, Limits),
  writer: Context.get(services, Writer),
  bytes: Option.getOrUndefined(Context.getOption(services, QueuedBytes)),
  events: Option.getOrUndefined(Context.getOption(services, OperationalEvents))
})
type Parts = ReturnType<typeof partsIn>

const quotaOf = (s: Parts, tenant: string): A.TenantQuota | undefined => {
  const limits = s.limits.ingestOf(tenant)
  if (limits.maxQueuedBytes === 0) return undefined
  const ord = s.writer.ordOf(tenant)
  if (ord === undefined || s.bytes === undefined) return undefined
  const queued = s.bytes.of(ord)
  const over = A.overQuota(queued, limits.maxQueuedBytes)
  // The `tenant.quota_reached` event, once per crossing (src/delivery/operations.ts).
  s.events?.quota(tenant, queued, limits.maxQueuedBytes, over)
  return over ? new A.TenantQuota({ max: limits.maxQueuedBytes }) : undefined
}

/**
 * A hook the node makes for a tenant itself (a test event: no body to read) is admitted as any
 * hook of the tenant: the disk reserve, the tenant's queued bytes and its rate, spent at once.
 */
export const admitMade = (services: Context.Context<ApiServices>, tenant: string): A.AdmissionRefusal | undefined => {
  const s = partsIn(services)
  return s.disk?.refusal() ?? quotaOf(s, tenant) ?? s.limits.ingestRate(tenant, Date.now(), true)
}

export const make = (options: AdmissionOptions): Admission => {
  /** Body bytes arrived and not yet handed on or dropped: what the bodies being read hold, not what they declare. */
  let buffered = 0
  /** Flows paused at the bound, first paused first. */
  const paused = new Set<Flow>()
  // The services admission uses, looked up once per services context.
  const servicesOf = perServices(partsIn)

  const admit: Admission["admit"] = (services, tenant) => {
    const s = servicesOf(services)
    return s.disk?.refusal() ?? (buffered >= options.maxBufferedBytes ? new A.Busy({ max: options.maxBufferedBytes }) : undefined) ??
      quotaOf(s, tenant) ?? s.limits.ingestRate(tenant, Date.now(), false)
  }

  const charge = (flow: Flow, bytes: number) => {
    buffered += bytes
    if (buffered > options.maxBufferedBytes && !paused.has(flow)) {
      paused.add(flow)
      flow.pause()
    }
  }

  const release = (flow: Flow, bytes: number) => {
    buffered -= bytes
    paused.delete(flow)
    for (const f of paused) {
      if (buffered >= options.maxBufferedBytes) break
      paused.delete(f)
      f.resume()
    }
  }

  return {
    admit,
    charge,
    release,
    spend: (services, tenant) => servicesOf(services).limits.ingestRate(tenant, Date.now(), true),
    buffered: () => buffered
  }
}
