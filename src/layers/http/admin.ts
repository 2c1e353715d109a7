/**
 * The admin API (product.md "Admin"; docs/api.md): bearer tokens, global or
 * scoped to tenants; a scoped token sees and touches only its tenants. The
 * DLQ, replay, per-tenant counters and purge, quarantine, audit, and the
 * effective configuration. Actions that change data (and config reads) leave
 * an audit row first.
 */
import { Effect, Result, Schema, SchemaIssue, SchemaTransformation } from "effect"
import { HttpRouter, HttpServerRequest } from "effect/http"
import * as AuditLog from "../../domain/audit.js"
import { type Config, redact } from "../../domain/config.js"
import { decodeEnvelope, tenantOf } from "../../domain/envelope.js"
import * as HookId from "../../domain/hook-id.js"
import * as K from "../../domain/keys.js"
import * as Deliveries from "../../domain/deliveries.js"
import { Audit, audited } from "../audit.js"
import { Quarantine } from "../quarantine.js"
import { type DeadItem, Queue, type PurgeKind } from "../queue.js"
import { Replay } from "../replay.js"
import { Store } from "../store.js"
import { Tenants } from "../tenants.js"
import { authenticate, type Principal, requireGlobal, requireTenant, tenantsFor, tokenTable } from "./auth.js"
import { readBody } from "./body.js"
import { BadRequest, json } from "./errors.js"
import { Gate } from "./gate.js"

/** Largest replay request body. */
export const REPLAY_BODY_MAX_BYTES = 64 * 1024
/** Most hook ids one replay request names. */
export const REPLAY_MAX_IDS = 1_000
/** Quarantine records per page: default (the service caps at its own maximum). */
export const QUARANTINE_PAGE_DEFAULT = 50
/** Audit rows per page: default (the service caps at its own maximum). */
export const AUDIT_PAGE_DEFAULT = 100

// ---------------------------------------------------------------------------
// Query helpers

const searchParams = HttpServerRequest.ParsedSearchParams

/** Repeated (`?tenant=a&tenant=b`) or comma-separated (`?tenant=a,b`) values. */
const listParam = (name: string) =>
  Effect.map(searchParams, (p) => {
    const raw = p[name]
    const values = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw]
    return values.flatMap((v) => v.split(",")).map((v) => v.trim()).filter((v) => v !== "")
  })

const oneParam = (name: string) =>
  Effect.map(searchParams, (p) => {
    const raw = p[name]
    return Array.isArray(raw) ? raw[0] : raw
  })

const limitParam = (dflt: number, max: number) =>
  Effect.flatMap(oneParam("limit"), (raw) => {
    if (raw === undefined) return Effect.succeed(dflt)
    const n = Number(raw)
    return /^\d+$/.test(raw) && n >= 1 && n <= max
      ? Effect.succeed(n)
      : Effect.fail(new BadRequest({ code: "bad_query", message: `limit: expected an integer from 1 to ${max}` }))
  })

/** DLQ cursors are `<at>.<seq>.<sink>` of the last row returned. */
export const encodeDeadCursor = (r: K.DeadRef): string => `${r.at}.${r.seq}.${r.sink}`
const decodeDeadCursor = (raw: string | undefined): Effect.Effect<K.DeadRef | undefined, BadRequest> => {
  if (raw === undefined || raw === "") return Effect.succeed(undefined)
  const m = /^(\d{1,16})\.(\d{1,16})\.(\d{1,5})$/.exec(raw)
  return m === null || Number(m[3]) > 0xffff
    ? Effect.fail(new BadRequest({ code: "bad_query", message: "cursor: not a cursor this API returned" }))
    : Effect.succeed({ at: Number(m[1]), seq: Number(m[2]), sink: Number(m[3]) })
}

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

// ---------------------------------------------------------------------------
// Bodies

const Instant = Schema.Union([
  Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
  Schema.String.check(Schema.makeFilter((s) => !Number.isNaN(Date.parse(s)) || "expected an ISO 8601 time")).pipe(
    Schema.decodeTo(
      Schema.Number,
      SchemaTransformation.transform({ decode: (s) => Date.parse(s), encode: (n) => new Date(n).toISOString() })
    )
  )
])

const ReplayBody = Schema.Struct({
  tenant: Schema.optional(Schema.Union([Schema.String, Schema.Array(Schema.String)])),
  source: Schema.optional(Schema.String),
  /** Dead-letter time bounds, inclusive: ms since the epoch or ISO 8601. */
  from: Schema.optional(Instant),
  to: Schema.optional(Instant),
  ids: Schema.optional(Schema.Array(Schema.String).check(Schema.isMaxLength(REPLAY_MAX_IDS)))
})

const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()

const decodeJson = <S extends Schema.ConstraintDecoder<unknown>>(schema: S, bytes: Uint8Array): Effect.Effect<S["Type"], BadRequest> => {
  let doc: unknown
  try {
    doc = JSON.parse(Buffer.from(bytes).toString("utf8"))
  } catch {
    return Effect.fail(new BadRequest({ code: "bad_body", message: "expected a JSON body" }))
  }
  const r = Schema.decodeUnknownResult(schema, { onExcessProperty: "error" })(doc)
  if (Result.isSuccess(r)) return Effect.succeed(r.success)
  const first = formatIssue(r.failure.issue).issues[0]
  const at = first === undefined || first.path === undefined || first.path.length === 0 ? "body" : first.path.map(String).join(".")
  return Effect.fail(new BadRequest({ code: "bad_body", message: `${at}: ${first?.message ?? "invalid"}` }))
}

// ---------------------------------------------------------------------------

/** The admin routes (the server adds them to its router). */
export const router = (config: Config) => {
  const tokens = tokenTable(config.adminTokens)
  const sourceRoutes = new Map(config.sources.map((s) => [s.id, s.routes]))

  /** Authenticate, then run with the services behind the gate (503 while starting or stopping). */
  const admin = <A, E, R>(f: (p: Principal) => Effect.Effect<A, E, R>) =>
    Effect.gen(function* () {
      const p = yield* authenticate(tokens)
      const services = yield* Effect.flatMap(Gate, (g) => g.services)
      return yield* Effect.provide(f(p), services)
    })

  const dlqItem = (item: DeadItem, tenant: string | null, row: Deliveries.DeliveryRow | undefined) => ({
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
    last_status: row?.lastStatus ?? null
  })

  // GET /v1/dlq: newest first; one reverse `?X` range per tenant when filtered, the global `?x` otherwise.
  const dlq = admin((p) =>
    Effect.gen(function* () {
      const tenants = yield* Effect.flatMap(listParam("tenant"), (r) => tenantsFor(p, r))
      const limit = yield* limitParam(config.admin.dlqPageDefault, config.admin.dlqPageMax)
      const cursor = yield* Effect.flatMap(oneParam("cursor"), decodeDeadCursor)
      const queue = yield* Queue
      const store = yield* Store
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
      const rows =
        page.items.length === 0 ? [] : yield* store.multiGet("deliveries", page.items.map((i) => K.deliveryKey(i.seq, i.sink)))
      return json(200, {
        items: page.items.map((item, i) => dlqItem(item, names.get(item.ord) ?? null, Deliveries.decodeRow(rows[i]))),
        next_cursor: page.cursor === undefined ? null : encodeDeadCursor(page.cursor)
      })
    })
  )

  // POST /v1/dlq/replay
  const replay = admin((p) =>
    Effect.gen(function* () {
      const body = yield* Effect.flatMap(readBody(REPLAY_BODY_MAX_BYTES), (b) => decodeJson(ReplayBody, b))
      const requested = body.tenant === undefined ? [] : typeof body.tenant === "string" ? [body.tenant] : body.tenant
      if (requested.length === 0 && body.source === undefined && body.from === undefined && body.to === undefined && body.ids === undefined) {
        return yield* Effect.fail(
          new BadRequest({ code: "missing_filter", message: "name at least one of tenant, source, from, to, ids" })
        )
      }
      if (body.from !== undefined && body.to !== undefined && body.from > body.to) {
        return yield* Effect.fail(new BadRequest({ code: "bad_body", message: "from: later than to" }))
      }
      let tenants = yield* tenantsFor(p, requested)
      let seqs: Set<number> | undefined
      if (body.ids !== undefined) {
        seqs = new Set()
        for (const id of body.ids) {
          const parsed = HookId.parse(id)
          if (parsed === undefined) return yield* Effect.fail(new BadRequest({ code: "bad_body", message: `ids: ${JSON.stringify(id)} is not a hook id` }))
          seqs.add(parsed.seq)
        }
        if (requested.length === 0) {
          // Ids without tenants: the hooks name their tenants; only those in scope count.
          const store = yield* Store
          const hooks = yield* store.multiGet("hooks", [...seqs].map(K.hookKey))
          const owners = new Set(hooks.flatMap((h) => (h === undefined ? [] : [tenantOf(decodeEnvelope(h))])))
          tenants = [...owners].filter((t) => p.tenants === null || p.tenants.includes(t))
        }
      }
      const ords = tenants === undefined ? undefined : [...(yield* ordsOf(tenants)).values()]
      const params = {
        tenants: tenants ?? null,
        source: body.source ?? null,
        from: body.from ?? null,
        to: body.to ?? null,
        ids: body.ids ?? null
      }
      // Audited even when the filter names no tenant it may touch: the attempt is what an auditor wants.
      const result = yield* audited(
        { actor: p.name, tenants: tenants ?? null, action: "replay", params },
        ords !== undefined && ords.length === 0
          ? Effect.succeed({ revived: 0, scanned: 0, done: true })
          : Effect.flatMap(Replay, (r) =>
              r.replay(
                { ords, sourceId: body.source, fromAt: body.from, toAt: body.to, seqs },
                { chunk: config.admin.replayChunk, maxRevived: config.admin.replayMax, maxScanned: config.admin.replayScanMax }
              )
            )
      )
      return json(200, result)
    })
  )

  const tenantParam = Effect.map(HttpRouter.params, (ps) => ps["tenant"] ?? "")

  // GET /v1/tenants/:tenant: the six counters.
  const tenant = admin((p) =>
    Effect.gen(function* () {
      const name = yield* tenantParam
      yield* requireTenant(p, name)
      const ord = yield* ordOf(name)
      const c = yield* Effect.flatMap(Queue, (q) => q.counters(ord))
      return json(200, { tenant: name, ...c })
    })
  )

  // DELETE /v1/tenants/:tenant/queue?kinds=pending,dead
  const purge = admin((p) =>
    Effect.gen(function* () {
      const name = yield* tenantParam
      yield* requireTenant(p, name)
      const kinds = yield* listParam("kinds")
      if (kinds.length === 0 || kinds.some((k) => k !== "pending" && k !== "dead")) {
        return yield* Effect.fail(new BadRequest({ code: "bad_query", message: "kinds: expected pending, dead or both (comma-separated)" }))
      }
      const ord = yield* ordOf(name)
      const r = yield* audited(
        { actor: p.name, tenants: [name], action: "purge", params: { kinds } },
        Effect.flatMap(Queue, (q) => q.purgeTenant(ord, kinds as ReadonlyArray<PurgeKind>, { maxChunks: config.admin.purgeMaxChunks }))
      )
      return json(200, { tenant: name, purged: { pending: r.pending, dead: r.dead }, done: r.done })
    })
  )

  // GET /v1/quarantine?tenant=&limit=&cursor=
  const quarantineList = admin((p) =>
    Effect.gen(function* () {
      const tenant = yield* oneParam("tenant")
      if (tenant !== undefined) yield* requireTenant(p, tenant)
      const limit = yield* limitParam(QUARANTINE_PAGE_DEFAULT, 500)
      const cursor = yield* oneParam("cursor")
      const page = yield* Effect.flatMap(Quarantine, (q) =>
        q.list({ scope: p.tenants, limit, ...(tenant === undefined ? {} : { tenant }), ...(cursor === undefined ? {} : { cursor }) })
      )
      return json(200, {
        items: page.records.map((r) => ({
          at: new Date(r.at).toISOString(),
          tenant: r.tenant,
          source: r.source,
          reason: r.reason,
          headers: r.headers,
          body_base64: Buffer.from(r.body).toString("base64")
        })),
        next_cursor: page.cursor
      })
    })
  )

  // DELETE /v1/quarantine?tenant=
  const quarantineDelete = admin((p) =>
    Effect.gen(function* () {
      const tenant = yield* oneParam("tenant")
      if (tenant === undefined || tenant === "") {
        return yield* Effect.fail(new BadRequest({ code: "bad_query", message: "tenant: required" }))
      }
      yield* requireTenant(p, tenant)
      const deleted = yield* audited(
        { actor: p.name, tenants: [tenant], action: "quarantine.delete", params: {} },
        Effect.flatMap(Quarantine, (q) => q.deleteTenant(tenant))
      )
      return json(200, { tenant, deleted })
    })
  )

  // GET /v1/audit?tenant=&limit=&cursor=
  const auditList = admin((p) =>
    Effect.gen(function* () {
      const tenant = yield* oneParam("tenant")
      if (tenant !== undefined) yield* requireTenant(p, tenant)
      const limit = yield* limitParam(AUDIT_PAGE_DEFAULT, 1_000)
      const cursor = yield* oneParam("cursor")
      const page = yield* Effect.flatMap(Audit, (a) =>
        a.list({ scope: p.tenants, limit, ...(tenant === undefined ? {} : { tenant }), ...(cursor === undefined ? {} : { cursor }) })
      )
      return json(200, {
        items: page.rows.map((r: AuditLog.AuditRow) => ({ ...r, at: new Date(r.at).toISOString() })),
        next_cursor: page.cursor
      })
    })
  )

  // GET /v1/config: global tokens only (it names every source's tenant).
  const configRoute = admin((p) =>
    Effect.gen(function* () {
      yield* requireGlobal(p)
      yield* audited({ actor: p.name, tenants: null, action: "config.read", params: {} }, Effect.void)
      return json(200, redact(config))
    })
  )

  return [
    HttpRouter.route("GET", "/v1/dlq", dlq),
    HttpRouter.route("POST", "/v1/dlq/replay", replay),
    HttpRouter.route("GET", "/v1/tenants/:tenant", tenant),
    HttpRouter.route("DELETE", "/v1/tenants/:tenant/queue", purge),
    HttpRouter.route("GET", "/v1/quarantine", quarantineList),
    HttpRouter.route("DELETE", "/v1/quarantine", quarantineDelete),
    HttpRouter.route("GET", "/v1/audit", auditList),
    HttpRouter.route("GET", "/v1/config", configRoute)
  ]
}


