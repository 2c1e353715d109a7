/**
 * The admin endpoints of the API (api.ts; product.md "Admin"; docs/api.md):
 * the DLQ, replay, per-tenant counters and purge, quarantine, audit, and the
 * effective configuration. A scoped token sees and touches only its tenants
 * (auth.ts). Actions that change data (and config reads) leave an audit row
 * first.
 */
import { Effect, Schema } from "effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import type * as AuditLog from "../domain/audit.js"
import { currentOf, type Generation, LiveConfig } from "../config/live.js"
import { type Config, redact } from "../domain/config.js"
import * as HookId from "../domain/hook-id.js"
import type * as K from "../domain/keys.js"
import { Audit, audited } from "../lifecycle/audit.js"
import { Quarantine } from "../lifecycle/quarantine.js"
import { Limits } from "../queue/limits.js"
import { type DeadItem, type DeliveryRow, Queue } from "../queue/queue.js"
import { Replay } from "../queue/replay.js"
import { Tenants } from "../queue/tenants.js"
import {
  Admin,
  Api,
  AUDIT_PAGE_DEFAULT,
  encodeDeadCursor,
  QUARANTINE_PAGE_DEFAULT,
  REPLAY_BODY_MAX_BYTES,
  ReplayBody
} from "./api.js"
import { type AdminError, ConfigInvalidError, issueMessage, toApi } from "./api-errors.js"
import { requireGlobal, requireTenant, tenantsFor } from "./auth.js"
import { readJson } from "./body.js"
import { BadRequest } from "./errors.js"
import { limitsFields } from "./limits.js"

/** Every failure of a handler leaves it as its wire error (api-errors.ts). */
const answer = <A, E extends AdminError, R>(effect: Effect.Effect<A, E, R>) => Effect.mapError(effect, toApi)

/** Ordinals of the tenants that exist; a tenant with no ordinal has no rows (TEN-1 §2). */
const ordsOf = (tenants: ReadonlyArray<string>) =>
  Effect.flatMap(Tenants, (t) =>
    Effect.forEach(tenants, (name) =>
      t.ord(name).pipe(
        Effect.map((ord) => [[name, ord] as const]),
        Effect.catchTag("TenantNotFound", () => Effect.succeed([]))
      )
    ).pipe(Effect.map((xs) => new Map(xs.flat())))
  )

const ordOf = (tenant: string) => Effect.flatMap(Tenants, (t) => t.ord(tenant))

/** The replay body, read under its bound (413 past it) and decoded strictly (an unknown field is `bad_body`). */
const replayBody = Effect.flatMap(readJson(REPLAY_BODY_MAX_BYTES, "expected a JSON body"), (doc) =>
  Schema.decodeUnknownEffect(ReplayBody, { onExcessProperty: "error" })(doc).pipe(
    Effect.mapError((e) => new BadRequest({ code: "bad_body", message: issueMessage(e.issue, "body") }))
  )
)

export const layer = (boot: Config) => {
  // The generation in force at each request (a reload changes sources and admin.* live).
  let current: (() => Generation) | undefined
  const settings = Effect.map(currentOf(boot), (get) => {
    current ??= get
    return get().config
  })
  let routesOf: { readonly of: Config; readonly map: ReadonlyMap<string, ReadonlyArray<string>> } | undefined
  const sourceRoutesOf = (config: Config) => {
    if (routesOf === undefined || routesOf.of !== config) routesOf = { of: config, map: new Map(config.sources.map((s) => [s.id, s.routes])) }
    return routesOf.map
  }

  const dlqItem = (sourceRoutes: ReadonlyMap<string, ReadonlyArray<string>>, item: DeadItem, tenant: string | null, row: DeliveryRow | undefined) => ({
    id: item.id,
    tenant,
    source: item.sourceId,
    // The hook names its sinks; reading it would cost a hook read per row, so the name
    // comes from the source's current routes (null if the source or position is gone).
    sink: sourceRoutes.get(item.sourceId)?.[item.sink] ?? null,
    sink_index: item.sink,
    seq: item.seq,
    dead_at: new Date(item.at).toISOString(),
    attempts: row?.attempts ?? null,
    last_status: row?.lastStatus ?? null,
    ...(item.lane === undefined ? {} : { lane: item.lane })
  })

  // GET /v1/dlq: newest first; one reverse `?X` range per tenant when filtered, the global `?x` otherwise.
  const dlq = (query: { readonly tenant?: ReadonlyArray<string>; readonly limit?: number; readonly cursor?: K.DeadRef | undefined }) =>
    Effect.gen(function* () {
      const config = yield* settings
      const limit = query.limit ?? config.admin.dlqPageDefault
      if (limit > config.admin.dlqPageMax) {
        return yield* new BadRequest({ code: "bad_query", message: `limit: expected an integer from 1 to ${config.admin.dlqPageMax}` })
      }
      const tenants = yield* tenantsFor(yield* Admin, query.tenant ?? [])
      const cursor = query.cursor
      const queue = yield* Queue
      const names = new Map<number, string>()
      let page
      if (tenants === undefined) {
        page = yield* queue.deadPage({ limit, cursor })
      } else {
        const ords = yield* ordsOf(tenants)
        for (const [name, ord] of ords) names.set(ord, name)
        page = ords.size === 0 ? { items: [], cursor: undefined } : yield* queue.dead({ ords: [...ords.values()], limit, before: cursor })
      }
      const tenantsApi = yield* Tenants
      for (const item of page.items) {
        if (names.has(item.ord)) continue
        const name = yield* tenantsApi.name(item.ord).pipe(Effect.catchTag("TenantNotFound", () => Effect.succeed(null)))
        if (name !== null) names.set(item.ord, name)
      }
      const rows = yield* queue.deliveryRows(page.items)
      return {
        items: page.items.map((item, i) => dlqItem(sourceRoutesOf(config), item, names.get(item.ord) ?? null, rows[i])),
        next_cursor: page.cursor === undefined ? null : encodeDeadCursor(page.cursor)
      }
    })

  // POST /v1/dlq/replay
  const replay = Effect.gen(function* () {
    const config = yield* settings
    const p = yield* Admin
    const body = yield* replayBody
    const requested = body.tenant === undefined ? [] : typeof body.tenant === "string" ? [body.tenant] : body.tenant
    if (requested.length === 0 && body.source === undefined && body.from === undefined && body.to === undefined && body.ids === undefined && body.destination === undefined) {
      return yield* new BadRequest({ code: "missing_filter", message: "name at least one of tenant, source, from, to, ids, destination" })
    }
    if (body.from !== undefined && body.to !== undefined && body.from > body.to) {
      return yield* new BadRequest({ code: "bad_body", message: "from: later than to" })
    }
    let tenants = yield* tenantsFor(p, requested)
    let seqs: Set<number> | undefined
    if (body.ids !== undefined) {
      seqs = new Set()
      for (const id of body.ids) {
        const parsed = HookId.parse(id)
        if (parsed === undefined) return yield* new BadRequest({ code: "bad_body", message: `ids: ${JSON.stringify(id)} is not a hook id` })
        seqs.add(parsed.seq)
      }
      if (requested.length === 0) {
        // Ids without tenants: the hooks name their tenants; only those in scope count.
        const owners = yield* Effect.flatMap(Queue, (q) => q.tenantsOfHooks([...seqs!]))
        tenants = [...owners].filter((t) => p.tenants === null || p.tenants.includes(t))
      }
    }
    const ords = tenants === undefined ? undefined : [...(yield* ordsOf(tenants)).values()]
    const params = {
      tenants: tenants ?? null,
      source: body.source ?? null,
      from: body.from ?? null,
      to: body.to ?? null,
      ids: body.ids ?? null,
      destination: body.destination ?? null
    }
    // Audited even when the filter names no tenant it may touch: the attempt is what an auditor wants.
    return yield* audited(
      { actor: p.name, tenants: tenants ?? null, action: "replay", params },
      ords !== undefined && ords.length === 0
        ? Effect.succeed({ revived: 0, scanned: 0, done: true })
        : Effect.flatMap(Replay, (r) =>
            r.replay(
              { ords, sourceId: body.source, fromAt: body.from, toAt: body.to, seqs, destination: body.destination },
              { chunk: config.admin.replayChunk, maxRevived: config.admin.replayMax, maxScanned: config.admin.replayScanMax }
            )
          )
    )
  })

  // GET /v1/tenants/:tenant: the counters and the limits.
  const tenant = (name: string) =>
    Effect.gen(function* () {
      yield* requireTenant(yield* Admin, name)
      const ord = yield* ordOf(name)
      const c = yield* Effect.flatMap(Queue, (q) => q.counters(ord))
      return { tenant: name, ...c, ...limitsFields(yield* Effect.flatMap(Limits, (l) => l.get(ord))) }
    })

  // GET /v1/tenants/:tenant/ordering/held: each held lane's dead head, with its hook's key and destination.
  const heldLanes = (name: string, limit = 100) =>
    Effect.gen(function* () {
      yield* requireTenant(yield* Admin, name)
      const ord = yield* ordOf(name)
      const queue = yield* Queue
      const held = yield* queue.heldLanes(ord, limit)
      const envs = yield* queue.envelopes(held.map((h) => h.seq))
      const items = held.map((h) => {
        const env = envs.get(h.seq)
        return { destination: env?.sinks[h.sink] ?? null, ordering_key: env?.orderingKey ?? null, id: env?.id ?? null, seq: h.seq, sink_index: h.sink }
      })
      return { tenant: name, items }
    })

  // DELETE /v1/tenants/:tenant/queue?kinds=pending,dead
  const purge = (name: string, kinds: ReadonlyArray<"pending" | "dead">) =>
    Effect.gen(function* () {
      const config = yield* settings
      const p = yield* Admin
      yield* requireTenant(p, name)
      const ord = yield* ordOf(name)
      const r = yield* audited(
        { actor: p.name, tenants: [name], action: "purge", params: { kinds } },
        Effect.flatMap(Queue, (q) => q.purgeTenant(ord, kinds, { maxChunks: config.admin.purgeMaxChunks }))
      )
      return { tenant: name, purged: { pending: r.pending, dead: r.dead }, done: r.done }
    })

  // GET /v1/quarantine?tenant=&limit=&cursor=
  const quarantineList = (query: { readonly tenant?: string; readonly limit?: number; readonly cursor?: string }) =>
    Effect.gen(function* () {
      const p = yield* Admin
      if (query.tenant !== undefined) yield* requireTenant(p, query.tenant)
      const page = yield* Effect.flatMap(Quarantine, (q) =>
        q.list({ ...query, scope: p.tenants, limit: query.limit ?? QUARANTINE_PAGE_DEFAULT })
      )
      return {
        items: page.records.map((r) => ({
          at: new Date(r.at).toISOString(),
          tenant: r.tenant,
          source: r.source,
          reason: r.reason,
          headers: r.headers,
          body_base64: Buffer.from(r.body).toString("base64")
        })),
        next_cursor: page.cursor
      }
    })

  // DELETE /v1/quarantine?tenant=
  const quarantineDelete = (tenant: string) =>
    Effect.gen(function* () {
      const p = yield* Admin
      yield* requireTenant(p, tenant)
      const deleted = yield* audited(
        { actor: p.name, tenants: [tenant], action: "quarantine.delete", params: {} },
        Effect.flatMap(Quarantine, (q) => q.deleteTenant(tenant))
      )
      return { tenant, deleted }
    })

  // GET /v1/audit?tenant=&limit=&cursor=
  const auditList = (query: { readonly tenant?: string; readonly limit?: number; readonly cursor?: string }) =>
    Effect.gen(function* () {
      const p = yield* Admin
      if (query.tenant !== undefined) yield* requireTenant(p, query.tenant)
      const page = yield* Effect.flatMap(Audit, (a) => a.list({ ...query, scope: p.tenants, limit: query.limit ?? AUDIT_PAGE_DEFAULT }))
      return {
        items: page.rows.map((r: AuditLog.AuditRow) => ({ ...r, at: new Date(r.at).toISOString() })),
        next_cursor: page.cursor
      }
    })

  // GET /v1/config: global tokens only (it names every source's tenant).
  const configRead = Effect.gen(function* () {
    yield* settings
    const p = yield* Admin
    yield* requireGlobal(p)
    yield* audited({ actor: p.name, tenants: null, action: "config.read", params: {} }, Effect.void)
    const g = current!()
    return { ...(redact(g.config) as Record<string, unknown>), generation: g.generation, loadedAt: new Date(g.loadedAt).toISOString() } as Readonly<Record<string, unknown>>
  })

  // POST /v1/config/reload: global tokens only; audited whatever the outcome.
  const configReload = Effect.gen(function* () {
    const p = yield* Admin
    yield* requireGlobal(p)
    const live = yield* Effect.serviceOption(LiveConfig)
    if (live._tag === "None") return yield* Effect.fail(new ConfigInvalidError({ error: "config_invalid", message: "this node has no configuration file to reload", issues: [] }))
    return yield* audited(
      { actor: p.name, tenants: null, action: "config.reload", params: {} },
      live.value.reload("api").pipe(
        Effect.map((r) => ({
          generation: r.generation,
          loadedAt: new Date(r.loadedAt).toISOString(),
          applied: r.applied,
          needsRestart: r.needsRestart.map((key) => ({ key, message: `${key} needs a restart` }))
        })),
        Effect.mapError((e) => new ConfigInvalidError({ error: "config_invalid", message: e.issues.join("; "), issues: e.issues }))
      )
    )
  })

  return HttpApiBuilder.group(Api, "admin", (handlers) =>
    handlers
      .handle("dlq", ({ query }) => answer(dlq(query)))
      // Raw: the body is read by body.ts under its bound, not buffered whole by the builder.
      .handleRaw("replay", () => answer(replay))
      .handle("tenant", ({ params }) => answer(tenant(params.tenant)))
      .handle("heldLanes", ({ params, query }) => answer(heldLanes(params.tenant, query.limit)))
      .handle("purge", ({ params, query }) => answer(purge(params.tenant, query.kinds)))
      .handle("quarantineList", ({ query }) => answer(quarantineList(query)))
      .handle("quarantineDelete", ({ query }) => answer(quarantineDelete(query.tenant)))
      .handle("audit", ({ query }) => answer(auditList(query)))
      .handle("config", () => answer(configRead))
      .handle("configReload", () => Effect.mapError(configReload, (e) => (e instanceof ConfigInvalidError ? e : toApi(e))))
  )
}
