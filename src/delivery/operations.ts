/**
 * The gateway's operational events (docs/api.md "Operational events"): ordinary hooks of the
 * reserved tenant `ankusa.system`, submitted to the Writer for the sink `operations.sink` names,
 * so they are synced, signed, retried and fairly dispatched like any hook, and survive a restart.
 * No sink configured: nothing is sent. Breaker events are at most one per destination and kind
 * per BREAKER_EVENT_GAP_MS.
 */
import { Effect } from "effect"
import { SYSTEM_TENANT } from "../domain/tenants.js"
import type { IngestRequest } from "../queue/writer.js"

export { SYSTEM_TENANT }
/** The source id their envelopes name (no configured source can: ids cannot hold a colon). */
export const OPERATIONS_SOURCE = "ankusa:operations"
/** A destination's breaker events of one kind: at most one in this long. */
export const BREAKER_EVENT_GAP_MS = 60_000

export type EventType = "endpoint.disabled" | "endpoint.breaker_opened" | "endpoint.breaker_closed" | "sink.breaker_opened" | "sink.breaker_closed"

export interface OperationalEvent {
  readonly type: EventType
  /** The tenant the destination belongs to; null for a shared sink. */
  readonly tenant: string | null
  /** A sink's name, or `endpoint:<id>`. */
  readonly destination: string
  readonly reason: string
  /** Epoch ms. */
  readonly at: number
}

export const makeOperations = (deps: {
  readonly sink: () => string | undefined
  readonly submit: ((req: IngestRequest) => Effect.Effect<unknown, unknown>) | undefined
}) => {
  const last = new Map<string, number>()
  const emit = (e: OperationalEvent): Effect.Effect<void> => {
    const sink = deps.sink()
    if (sink === undefined || deps.submit === undefined) return Effect.void
    if (e.type !== "endpoint.disabled") {
      const key = `${e.type} ${e.destination}`
      const was = last.get(key)
      if (was !== undefined && e.at - was < BREAKER_EVENT_GAP_MS) return Effect.void
      if (last.size >= 100_000) last.clear()
      last.set(key, e.at)
    }
    const body = Buffer.from(JSON.stringify({ type: e.type, tenant: e.tenant, destination: e.destination, reason: e.reason, at: new Date(e.at).toISOString() }), "utf8")
    return deps
      .submit({ tenantId: SYSTEM_TENANT, sourceId: OPERATIONS_SOURCE, sinks: [sink], body, contentType: "application/json", headers: {}, idempotencyKey: null, archive: false, eventType: e.type })
      .pipe(Effect.catchCause((cause) => Effect.logWarning("operations: event not submitted", { type: e.type, destination: e.destination, cause: String(cause) })), Effect.asVoid)
  }
  return { emit }
}

export type Operations = ReturnType<typeof makeOperations>
