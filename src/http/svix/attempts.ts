/**
 * `GET …/attempt/msg/:msg` and `…/attempt/endpoint/:ep` (docs/svix-compat.md "Attempts"): the
 * attempts the pipeline's attempt log holds (src/delivery/attempt-log.ts: memory only, the last
 * 100 of each destination, a restart starts empty) in Svix's form, newest first.
 */
import { Effect } from "effect"
import { AttemptLog, type AttemptEntry } from "../../delivery/attempt-log.js"
import type { Endpoint } from "../../domain/endpoints.js"
import { endpointDestination, endpointIdOf } from "../../domain/fanout.js"
import { Endpoints } from "../../queue/endpoints.js"
import { Tenants } from "../../queue/tenants.js"
import { ATTEMPT_LOG_PER_DESTINATION } from "../../delivery/attempt-log.js"
import { page, SvixNotFound } from "./answers.js"
import { attemptIdOf } from "./ids.js"
import { envelopeOf } from "./messages.js"

export const attemptOut = (e: Pick<Endpoint, "id" | "url">, a: AttemptEntry) => ({
  id: attemptIdOf(a.hookId, e.id, a.at),
  msgId: a.hookId,
  endpointId: e.id,
  url: e.url,
  response: a.body ?? a.error ?? "",
  responseStatusCode: a.status,
  responseDurationMs: a.latencyMs,
  status: a.outcome === "delivered" ? (0 as const) : (2 as const),
  statusText: a.outcome === "delivered" ? ("success" as const) : ("fail" as const),
  triggerType: 0 as const,
  timestamp: new Date(a.at).toISOString()
})

const recent = (destination: string) =>
  Effect.map(Effect.serviceOption(AttemptLog), (log) => (log._tag === "None" ? [] : log.value.recent(destination, ATTEMPT_LOG_PER_DESTINATION)))

/** Newest first, after the iterator (an attempt id of the previous page), `limit` at most. */
const paged = (items: ReadonlyArray<ReturnType<typeof attemptOut>>, limit: number, iterator: string | undefined) => {
  const sorted = [...items].sort((a, b) => b.timestamp.localeCompare(a.timestamp) || (a.id < b.id ? -1 : 1))
  const from = iterator === undefined ? 0 : sorted.findIndex((a) => a.id === iterator) + 1
  const data = sorted.slice(from, from + limit)
  return page(data, from + limit < sorted.length ? data[data.length - 1]!.id : null)
}

export const byEndpoint = (tenant: string, endpointId: string, limit: number, iterator: string | undefined) =>
  Effect.gen(function* () {
    const ord = yield* Effect.flatMap(Tenants, (t) => t.ord(tenant))
    const endpoint = yield* Effect.flatMap(Endpoints, (s) => s.get(ord, endpointId))
    return paged((yield* recent(endpointDestination(endpoint.id))).map((a) => attemptOut(endpoint, a)), limit, iterator)
  })

/** The message's destinations that are endpoints still there, and each one's attempts of it. */
export const byMessage = (tenant: string, msgId: string, limit: number, iterator: string | undefined) =>
  Effect.gen(function* () {
    const env = yield* envelopeOf(tenant, msgId)
    if (env === undefined) return yield* new SvixNotFound({ message: "no such message of this application" })
    const ord = yield* Effect.flatMap(Tenants, (t) => t.ord(tenant))
    const endpoints = new Map((yield* Effect.flatMap(Endpoints, (s) => s.list(ord))).map((e) => [e.id, e]))
    const out: Array<ReturnType<typeof attemptOut>> = []
    for (const destination of env.sinks) {
      const e = endpoints.get(endpointIdOf(destination) ?? "")
      if (e === undefined) continue
      for (const a of yield* recent(destination)) if (a.hookId === msgId) out.push(attemptOut(e, a))
    }
    return paged(out, limit, iterator)
  })
