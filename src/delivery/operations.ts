/**
 * The gateway's operational events (docs/api.md "Operational events"): ordinary hooks of the
 * reserved tenant `ankusa.system`, submitted to the Writer for the sink `operations.sink` names,
 * so they are synced, signed, retried and fairly dispatched like any hook, and survive a restart.
 * No sink configured: nothing is sent. Breaker events are at most one per destination and kind
 * per BREAKER_EVENT_GAP_MS; `tenant.quota_reached` once per crossing (QUOTA_REARM_FRACTION);
 * `store.disk_reserve` when the disk reserve stops ingest and when it resumes.
 */
import { Context, Effect, Layer } from "effect"
import { LiveConfig } from "../config/live.js"
import { SYSTEM_TENANT } from "../domain/tenants.js"
import { DiskReserve } from "../lifecycle/disk-reserve.js"
import { type IngestRequest, Writer } from "../queue/writer.js"

export { SYSTEM_TENANT }
/** The source id their envelopes name (no configured source can: ids cannot hold a colon). */
export const OPERATIONS_SOURCE = "ankusa:operations"
/** A destination's breaker events of one kind: at most one in this long. */
export const BREAKER_EVENT_GAP_MS = 60_000
/** After `tenant.quota_reached`, the next one waits until the tenant's queued bytes were seen under this share of its quota. */
export const QUOTA_REARM_FRACTION = 0.9
/** Tenants remembered at their quota; past it the memory is cleared whole (a tenant still there may be told again). */
export const QUOTA_TENANTS_MAX = 100_000

export type EventType =
  | "endpoint.disabled"
  | "endpoint.breaker_opened"
  | "endpoint.breaker_closed"
  | "sink.breaker_opened"
  | "sink.breaker_closed"
  | "tenant.quota_reached"
  | "store.disk_reserve"

export interface OperationalEvent {
  readonly type: EventType
  /** The tenant concerned; null for a shared sink or the store. */
  readonly tenant: string | null
  /** A sink's name, or `endpoint:<id>`; null where no destination is concerned. */
  readonly destination: string | null
  readonly reason: string
  /** Epoch ms. */
  readonly at: number
  /** `store.disk_reserve` only: whether ingest stopped or resumed. */
  readonly ingest?: "stopped" | "resumed"
}

export const makeOperations = (deps: {
  readonly sink: () => string | undefined
  readonly submit: ((req: IngestRequest) => Effect.Effect<unknown, unknown>) | undefined
}) => {
  const last = new Map<string, number>()
  const emit = (e: OperationalEvent): Effect.Effect<void> => {
    const sink = deps.sink()
    if (sink === undefined || deps.submit === undefined) return Effect.void
    if (e.type.includes(".breaker_")) {
      const key = `${e.type} ${e.destination}`
      const was = last.get(key)
      if (was !== undefined && e.at - was < BREAKER_EVENT_GAP_MS) return Effect.void
      if (last.size >= 100_000) last.clear()
      last.set(key, e.at)
    }
    const fields = { type: e.type, tenant: e.tenant, destination: e.destination, reason: e.reason, at: new Date(e.at).toISOString() }
    const body = Buffer.from(JSON.stringify(e.ingest === undefined ? fields : { ...fields, ingest: e.ingest }), "utf8")
    return deps
      .submit({ tenantId: SYSTEM_TENANT, sourceId: OPERATIONS_SOURCE, sinks: [sink], body, contentType: "application/json", headers: {}, idempotencyKey: null, archive: false, eventType: e.type })
      .pipe(Effect.catchCause((cause) => Effect.logWarning("operations: event not submitted", { type: e.type, destination: e.destination, cause: String(cause) })), Effect.asVoid)
  }
  return { emit }
}

export type Operations = ReturnType<typeof makeOperations>

/**
 * Whether a tenant's admission is a quota crossing to tell: `refused` at its quota for the first
 * time since it was last seen under QUOTA_REARM_FRACTION of it. Pure over the set it updates.
 */
export const quotaCrossed = (atQuota: Set<string>, tenant: string, queued: number, max: number, refused: boolean): boolean => {
  if (!refused) {
    if (atQuota.size > 0 && queued < max * QUOTA_REARM_FRACTION) atQuota.delete(tenant)
    return false
  }
  if (atQuota.has(tenant)) return false
  if (atQuota.size >= QUOTA_TENANTS_MAX) atQuota.clear()
  atQuota.add(tenant)
  return true
}

export interface OperationalEventsShape {
  readonly emit: (e: OperationalEvent) => Effect.Effect<void>
  /** The ingest edge's quota check of a tenant, refused or not (synchronous: the ingest listener calls it). */
  readonly quota: (tenant: string, queued: number, max: number, refused: boolean) => void
}

export class OperationalEvents extends Context.Service<OperationalEvents, OperationalEventsShape>()("ankusa/OperationalEvents") {}

/** The node's events: through its Writer to the sink its live `operations.sink` names; the disk reserve's changes told as they happen. */
export const make = Effect.gen(function* () {
  const live = yield* Effect.serviceOption(LiveConfig)
  const writer = yield* Effect.serviceOption(Writer)
  const disk = yield* Effect.serviceOption(DiskReserve)
  const runFork = Effect.runForkWith(yield* Effect.context<never>())
  const { emit } = makeOperations({
    sink: () => (live._tag === "Some" ? live.value.get().config.operations.sink : undefined),
    submit: writer._tag === "Some" ? writer.value.submit : undefined
  })
  const atQuota = new Set<string>()
  const quota: OperationalEventsShape["quota"] = (tenant, queued, max, refused) => {
    if (!quotaCrossed(atQuota, tenant, queued, max, refused)) return
    runFork(emit({ type: "tenant.quota_reached", tenant, destination: null, reason: `queued bytes ${queued} reached tenants.limits.maxQueuedBytes ${max}: ingest answers 429 tenant_quota`, at: Date.now() }))
  }
  if (disk._tag === "Some") {
    const told = (low: { readonly free: number; readonly min: number } | undefined, free: number, min: number) =>
      runFork(
        emit({
          type: "store.disk_reserve",
          tenant: null,
          destination: null,
          ingest: low === undefined ? "resumed" : "stopped",
          reason:
            low === undefined
              ? `free space ${free} bytes is back above store.minFreeBytes ${min}: ingest resumes`
              : `free space ${free} bytes is under store.minFreeBytes ${min}: ingest answers 503 disk_reserve`,
          at: Date.now()
        })
      )
    disk.value.onChange((low, free, min) => told(low, free, min))
    // Under the reserve already at boot: ingest starts stopped, and that is told too.
    const now = disk.value.refusal()
    if (now !== undefined) told(now, now.free, now.min)
  }
  return { emit, quota } satisfies OperationalEventsShape
})

export const layer: Layer.Layer<OperationalEvents> = Layer.effect(OperationalEvents, make)
