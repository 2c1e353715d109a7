/**
 * The handlers of `ConsoleApi` (api.ts; docs/api.md "The console's reads"): the token's own
 * scope, tenants by pending, a dead hook's detail, the node's recent history (history.ts) and
 * per-sink figures (sink-stats.ts). Reads go through Queue and Tenants; a scoped token sees only
 * its tenants, and node-wide figures need a global token.
 */
import { Effect, Layer } from "effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { currentOf } from "../config/live.js"
import { ATTEMPT_LOG_PER_DESTINATION, AttemptLog } from "../delivery/attempt-log.js"
import type { Config } from "../domain/config.js"
import { type Envelope, tenantOf } from "../domain/envelope.js"
import * as HookId from "../domain/hook-id.js"
import * as History from "../observability/history.js"
import { Pipeline } from "../delivery/pipeline.js"
import { sinkStats } from "../observability/sink-stats.js"
import * as TopTenants from "../observability/top-tenants-metric.js"
import { Queue } from "../queue/queue.js"
import { Tenants } from "../queue/tenants.js"
import { Admin, Api } from "./api.js"
import { type AdminError, toApi } from "./api-errors.js"
import { canSee, requireGlobal } from "./auth.js"
import { PREVIEW_MAX_BYTES, UnknownHookError } from "./console-schemas.js"
import { breakersNow, breakerView } from "./endpoints.js"

const answer = <A, E extends AdminError, R>(effect: Effect.Effect<A, E, R>) => Effect.mapError(effect, toApi)

const iso = (ms: number) => new Date(ms).toISOString()

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** The body's first bytes as text when they are UTF-8 (a character cut at the end is dropped), else base64. */
export const preview = (body: Uint8Array) => {
  const head = body.subarray(0, PREVIEW_MAX_BYTES)
  const truncated = body.length > head.length
  for (let cut = 0; cut <= (truncated ? 3 : 0); cut++) {
    try {
      return { text: utf8.decode(head.subarray(0, head.length - cut)), encoding: "utf8" as const, truncated }
    } catch {
      // not UTF-8 (yet): try a shorter cut, then base64
    }
  }
  return { text: Buffer.from(head).toString("base64"), encoding: "base64" as const, truncated }
}

const sampleOut = (s: History.Sample) => ({
  at: iso(s.at),
  pending: s.pending,
  scheduled: s.scheduled,
  inflight: s.inflight,
  dead: s.dead,
  bytes: s.bytes,
  archive_pending: s.archivePending,
  oldest_due_age_seconds: s.oldestDueAgeSeconds,
  tenants: s.tenants,
  ingested: s.ingested,
  delivered: s.delivered,
  failed: s.failed,
  ingest_per_second: s.ingestPerSecond,
  delivered_per_second: s.deliveredPerSecond,
  failed_per_second: s.failedPerSecond
})

// GET /v1/tenants: a global token gets the gauge tick's top (no read); a scoped one its own tenants' counters.
const tenants = Effect.gen(function* () {
  const p = yield* Admin
  if (p.tenants === null) return { items: TopTenants.current().map((t) => ({ tenant: t.tenant, pending: t.pending })) }
  const names = yield* Tenants
  const queue = yield* Queue
  const items: Array<{ tenant: string; pending: number }> = []
  for (const tenant of p.tenants) {
    const ord = yield* names.ord(tenant).pipe(Effect.catchTag("TenantNotFound", () => Effect.succeed(undefined)))
    if (ord !== undefined) items.push({ tenant, pending: (yield* queue.counters(ord)).pending })
  }
  return { items: items.sort((a, b) => b.pending - a.pending || (a.tenant < b.tenant ? -1 : 1)) }
})

// GET /v1/dlq/:id: one envelope read and one multi-get of its rows.
const hook = (id: string) =>
  Effect.gen(function* () {
    const p = yield* Admin
    const unknown = new UnknownHookError({ error: "unknown_hook", message: `no hook ${JSON.stringify(id)}` })
    const parsed = HookId.parse(id)
    if (parsed === undefined) return yield* Effect.fail(unknown)
    const queue = yield* Queue
    const env: Envelope | undefined = (yield* answer(queue.envelopes([parsed.seq]))).get(parsed.seq)
    // Out of scope answers as not found: a hook id must not tell a scoped token that another tenant's hook exists.
    if (env === undefined || env.id !== id || !canSee(p, tenantOf(env))) return yield* Effect.fail(unknown)
    const rows = yield* answer(queue.deliveryRows(env.sinks.map((_, sink) => ({ seq: parsed.seq, sink }))))
    const body = preview(env.body)
    return {
      id,
      tenant: tenantOf(env),
      source: env.sourceId,
      received_at: iso(env.receivedAt),
      event_type: env.eventType ?? null,
      content_type: env.contentType,
      headers: env.headers,
      body_bytes: env.body.length,
      body_preview: body.text,
      body_preview_encoding: body.encoding,
      body_truncated: body.truncated,
      deliveries: env.sinks.map((sink, i) => {
        const r = rows[i]
        return {
          sink,
          sink_index: i,
          exists: r !== undefined,
          attempts: r?.attempts ?? null,
          last_status: r?.lastStatus ?? null,
          last_attempt_at: r === undefined || r.lastAt === 0 ? null : iso(r.lastAt),
          size: r?.size ?? null
        }
      })
    }
  })

export const layer = (config: Config) =>
  HttpApiBuilder.group(Api, "console", (handlers) =>
    Effect.gen(function* () {
      const history = yield* History.History
      // The sinks and generation in force at each read (a reload changes them).
      const current = yield* currentOf(config)
      const started = Date.now() - process.uptime() * 1000
      return handlers
        .handle("whoami", () => Effect.gen(function* () {
          const p = yield* Admin
          return p.portal === undefined
            ? { name: p.name, tenants: p.tenants }
            : { name: p.name, tenants: p.tenants, expires_at: new Date(p.portal.expiresAt).toISOString() }
        }))
        .handle("tenants", () => answer(tenants))
        .handle("hook", ({ params }) => hook(params.id))
        .handle("history", () =>
          answer(
            Effect.gen(function* () {
              yield* requireGlobal(yield* Admin)
              const samples = yield* history.samples
              const g = current()
              return {
                interval_ms: history.intervalMs,
                max_samples: history.capacity,
                samples: samples.map(sampleOut),
                config: { generation: g.generation, loaded_at: iso(g.loadedAt), trigger: g.trigger }
              }
            })
          )
        )
        .handle("sinks", () =>
          answer(
            Effect.gen(function* () {
              yield* requireGlobal(yield* Admin)
              const items = yield* sinkStats(current().config.sinks.map((s) => s.name))
              const log = yield* Effect.serviceOption(AttemptLog)
              const lastFailure = (sink: string) => {
                const a = log._tag === "None" ? undefined : log.value.recent(sink, ATTEMPT_LOG_PER_DESTINATION).find((x) => x.outcome === "failed")
                return a === undefined ? null : { at: iso(a.at), status: a.status, error: a.error, body: a.body }
              }
              const pipeline = yield* Effect.serviceOption(Pipeline)
              const breakers = yield* breakersNow
              return {
                since: iso(started),
                items: items.map((s) => ({
                  sink: s.sink,
                  delivered: s.delivered,
                  retried: s.retried,
                  dead: s.dead,
                  dropped: s.dropped,
                  calls: s.calls,
                  p50_seconds: s.p50Seconds,
                  p99_seconds: s.p99Seconds,
                  mean_seconds: s.meanSeconds,
                  last_failure: lastFailure(s.sink),
                  breaker: pipeline._tag === "None" ? null : breakerView(breakers.get(s.sink))
                }))
              }
            })
          )
        )
    })
  ).pipe(Layer.provide(History.layer({ intervalMs: config.gauges.intervalMs })))
