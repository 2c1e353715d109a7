/**
 * The admin API over real HTTP on a RocksDB store: bearer tokens, tenant
 * scoping of the DLQ, replay, purge, quarantine and counters (TEN-1 §12
 * "Isolation"), and what a tenant-filtered DLQ read costs the store.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { randomBytes } from "node:crypto"
import * as Deliveries from "../src/domain/deliveries.js"
import { decodeEnvelope } from "../src/domain/envelope.js"
import * as K from "../src/domain/keys.js"
import * as Signature from "../src/domain/signature.js"
import { Queue } from "../src/queue/queue.js"
import { Store } from "../src/store/store.js"
import { Tenants } from "../src/queue/tenants.js"
import { configOf, type Edge, read, startEdge } from "./edge-harness.js"

const GLOBAL = "global-token-0123456789"
const ACME = "acme-token-0123456789ab"
const GLOBEX = "globex-token-0123456789"
const secret = `whsec_${randomBytes(32).toString("base64")}`

const config = configOf({
  sinks: [
    { name: "a", url: "http://127.0.0.1:9/a" },
    { name: "b", url: "http://127.0.0.1:9/b" }
  ],
  sources: [
    { id: "shop", tenant: { header: "x-tenant" }, routes: ["a", "b"] },
    { id: "billing", tenant: { header: "x-tenant" }, routes: ["a"] },
    { id: "signed", tenant: { header: "x-tenant" }, verification: { type: "standard-webhooks", secret }, routes: ["a"] }
  ],
  adminTokens: [
    { name: "ops", token: GLOBAL, tenants: "*" },
    { name: "acme-admin", token: ACME, tenants: ["acme"] },
    { name: "globex-admin", token: GLOBEX, tenants: ["globex"] }
  ]
})

const ingest = (edge: Edge, source: string, tenant: string, headers: Record<string, string> = {}) =>
  Effect.promise(() =>
    edge
      .fetch(`/v1/hooks/${source}`, { method: "POST", body: `{"t":"${tenant}"}`, headers: { "x-tenant": tenant, ...headers } })
      .then(read)
  )

const call = (edge: Edge, token: string | undefined, path: string, init: RequestInit = {}) =>
  Effect.promise(() =>
    edge
      .fetch(path, {
        ...init,
        headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), "content-type": "application/json" }
      })
      .then(read)
  )

/** Dead-letter every due row of `tenant` at `at` (claim and dead-letter in one batch, through Deliveries). */
const deadLetterAll = (edge: Edge, tenant: string, at: number) =>
  Effect.promise(() =>
    edge.run(
      Effect.gen(function* () {
        const ord = yield* Effect.flatMap(Tenants, (t) => t.ord(tenant))
        const queue = yield* Queue
        const store = yield* Store
        const now = yield* Clock.currentTimeMillis
        const due = yield* queue.dueForTenant(ord, now, 0, 1000, Number.MAX_SAFE_INTEGER)
        const hooks = yield* store.multiGet("hooks", due.map((d) => K.hookKey(d.ref.seq)))
        const ts = due.flatMap((d, i) => {
          const env = decodeEnvelope(hooks[i])!
          const ref = { ord, seq: d.ref.seq, sink: d.ref.sink }
          return [
            Deliveries.claim(d.ref, d.value),
            Deliveries.deadLetter(ref, { attempts: 10, lastStatus: 500, size: d.value.size, lastAt: at }, at, {
              sourceId: env.sourceId,
              id: env.id
            })
          ]
        })
        yield* store.write(Deliveries.batch(ts), { sync: true })
        return due.length
      })
    )
  )

const countersOf = (edge: Edge, tenant: string) =>
  Effect.promise(() =>
    edge.run(Effect.flatMap(Tenants, (t) => t.ord(tenant)).pipe(Effect.flatMap((ord) => Effect.flatMap(Queue, (q) => q.counters(ord)))))
  )

/** acme: 2 shop hooks dead at T+1, 1 billing hook dead at T+3; globex: 1 shop hook dead at T+2. */
const T = Date.UTC(2026, 0, 1)
const seedDead = (edge: Edge) =>
  Effect.gen(function* () {
    for (let i = 0; i < 2; i++) expect((yield* ingest(edge, "shop", "acme")).status).toBe(202)
    expect(yield* deadLetterAll(edge, "acme", T + 1000)).toBe(4)
    expect((yield* ingest(edge, "shop", "globex")).status).toBe(202)
    expect(yield* deadLetterAll(edge, "globex", T + 2000)).toBe(2)
    expect((yield* ingest(edge, "billing", "acme")).status).toBe(202)
    expect(yield* deadLetterAll(edge, "acme", T + 3000)).toBe(1)
  })

const deadAts = (items: ReadonlyArray<{ dead_at: string }>) => items.map((i) => Date.parse(i.dead_at))
const isNewestFirst = (xs: ReadonlyArray<number>) => xs.every((x, i) => i === 0 || xs[i - 1]! >= x)

describe("http admin", () => {
  it.live("tenant scoped dlq", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        yield* seedDead(edge)

        const acme = yield* call(edge, ACME, "/v1/dlq")
        expect(acme.status).toBe(200)
        expect(acme.body.items).toHaveLength(5)
        expect(new Set(acme.body.items.map((i: any) => i.tenant))).toEqual(new Set(["acme"]))
        expect(isNewestFirst(deadAts(acme.body.items))).toBe(true)
        expect(acme.body.items[0]).toMatchObject({ tenant: "acme", source: "billing", sink: "a", sink_index: 0, attempts: 10, last_status: 500 })

        // A scoped token cannot ask for another tenant, alone or alongside its own.
        expect((yield* call(edge, ACME, "/v1/dlq?tenant=globex")).status).toBe(403)
        expect((yield* call(edge, ACME, "/v1/dlq?tenant=acme,globex")).status).toBe(403)
        const globex = yield* call(edge, GLOBEX, "/v1/dlq")
        expect(globex.body.items.map((i: any) => i.tenant)).toEqual(["globex", "globex"])

        // Global: every tenant, newest first across the node; a filter narrows it.
        const all = yield* call(edge, GLOBAL, "/v1/dlq")
        expect(all.body.items).toHaveLength(7)
        expect(isNewestFirst(deadAts(all.body.items))).toBe(true)
        expect(all.body.items.map((i: any) => i.tenant)).toEqual(["acme", "globex", "globex", "acme", "acme", "acme", "acme"])
        expect(all.body.next_cursor).toBeNull()
        const onlyGlobex = yield* call(edge, GLOBAL, "/v1/dlq?tenant=globex")
        expect(onlyGlobex.body.items).toHaveLength(2)

        // Cursor paging: pages are disjoint and together are the whole list.
        const seen: Array<string> = []
        let cursor: string | null = null
        do {
          const page: any = yield* call(edge, ACME, `/v1/dlq?limit=2${cursor === null ? "" : `&cursor=${cursor}`}`)
          expect(page.status).toBe(200)
          for (const i of page.body.items) seen.push(`${i.seq}.${i.sink_index}`)
          cursor = page.body.next_cursor
        } while (cursor !== null)
        expect(seen).toEqual(acme.body.items.map((i: any) => `${i.seq}.${i.sink_index}`))

        expect((yield* call(edge, ACME, "/v1/dlq?limit=0")).body.error).toBe("bad_query")
        expect((yield* call(edge, ACME, "/v1/dlq?cursor=zzz")).body.error).toBe("bad_query")
      })
    )
  )

  it.live("tenant scoped dlq reads one range", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        yield* seedDead(edge)
        yield* edge.store.resetStats
        const r = yield* call(edge, ACME, "/v1/dlq?tenant=acme")
        expect(r.status).toBe(200)
        expect(r.body.items).toHaveLength(5)
        const stats = yield* edge.store.stats
        // One reverse scan of acme's ?X range; the ?x values by point read; no hook read.
        expect(stats.scans).toEqual({ dead_by_tenant: 1 })
        expect(stats.pointReads["hooks"] ?? 0).toBe(0)
        expect(stats.pointReads["dead"]).toBe(5)
      })
    )
  )

  it.live("tenant scoped replay", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        yield* seedDead(edge)
        const replay = (token: string, body: unknown) => call(edge, token, "/v1/dlq/replay", { method: "POST", body: JSON.stringify(body) })

        expect((yield* replay(ACME, {})).body.error).toBe("missing_filter")
        expect((yield* replay(ACME, { tenant: "globex" })).status).toBe(403)
        expect((yield* replay(ACME, { bogus: 1 })).body.error).toBe("bad_body")

        // Ids of another tenant's hook revive nothing for a scoped token.
        const globexIds = (yield* call(edge, GLOBAL, "/v1/dlq?tenant=globex")).body.items.map((i: any) => i.id)
        const byIds = yield* replay(ACME, { ids: globexIds })
        expect(byIds.body).toEqual({ revived: 0, scanned: 0, done: true })

        // A source filter on a scoped token touches only its tenants.
        const shop = yield* replay(ACME, { source: "shop" })
        expect(shop.status).toBe(200)
        expect(shop.body.revived).toBe(4)
        expect(shop.body.done).toBe(true)
        const acme = yield* countersOf(edge, "acme")
        expect([acme.dead, acme.pending]).toEqual([1, 4])
        const globex = yield* countersOf(edge, "globex")
        expect([globex.dead, globex.pending]).toEqual([2, 0])

        // Global, by time range: only globex's rows died within [T+1500, T+2500].
        const ranged = yield* replay(GLOBAL, { from: T + 1500, to: new Date(T + 2500).toISOString() })
        expect(ranged.body.revived).toBe(2)
        expect((yield* countersOf(edge, "globex")).dead).toBe(0)
        expect((yield* countersOf(edge, "acme")).dead).toBe(1)

        // Global, by id: the billing hook.
        const left = (yield* call(edge, GLOBAL, "/v1/dlq")).body.items
        expect(left).toHaveLength(1)
        expect((yield* replay(GLOBAL, { ids: [left[0].id] })).body.revived).toBe(1)
        expect((yield* call(edge, GLOBAL, "/v1/dlq")).body.items).toHaveLength(0)

        // Every replay left an audit row; a scoped token sees only its own tenants' rows.
        const auditAcme = yield* call(edge, ACME, "/v1/audit")
        expect(auditAcme.body.items.map((r: any) => r.action)).toEqual(["replay", "replay"])
        expect(auditAcme.body.items.every((r: any) => r.tenants.every((t: string) => t === "acme"))).toBe(true)
        const auditAll = yield* call(edge, GLOBAL, "/v1/audit")
        expect(auditAll.body.items.filter((r: any) => r.action === "replay")).toHaveLength(4)
      })
    )
  )

  it.live("tenant scoped quarantine purge", () =>
    Effect.scoped(
      Effect.gen(function* () {
        // Covers the quarantine of requests that failed verification (the lifecycle's
        // quarantine service) and the queue purge, both through scoped tokens.
        const edge = yield* startEdge(config)
        const badSig = { "webhook-id": "m1", "webhook-timestamp": String(Math.floor(Date.now() / 1000)), "webhook-signature": "v1,AAAA" }
        for (const t of ["acme", "acme", "globex"]) expect((yield* ingest(edge, "signed", t, badSig)).status).toBe(401)
        for (const t of ["acme", "globex"]) expect((yield* ingest(edge, "shop", t)).status).toBe(202)
        yield* deadLetterAll(edge, "globex", T)
        expect((yield* ingest(edge, "shop", "globex")).status).toBe(202)

        // Each scoped token sees only its own quarantined requests.
        const qa = yield* call(edge, ACME, "/v1/quarantine")
        expect(qa.body.items.map((r: any) => r.tenant)).toEqual(["acme", "acme"])
        expect(qa.body.items[0]).toMatchObject({ source: "signed", reason: "bad_signature" })
        const qg = yield* call(edge, GLOBEX, "/v1/quarantine")
        expect(qg.body.items.map((r: any) => r.tenant)).toEqual(["globex"])
        expect((yield* call(edge, ACME, "/v1/quarantine?tenant=globex")).status).toBe(403)

        // A scoped token cannot delete or purge another tenant's data, nor read its counters.
        expect((yield* call(edge, ACME, "/v1/quarantine?tenant=globex", { method: "DELETE" })).status).toBe(403)
        expect((yield* call(edge, ACME, "/v1/tenants/globex/queue?kinds=pending,dead", { method: "DELETE" })).status).toBe(403)
        expect((yield* call(edge, ACME, "/v1/tenants/globex")).status).toBe(403)
        expect((yield* call(edge, GLOBAL, "/v1/quarantine")).body.items).toHaveLength(3)
        const globexBefore = yield* countersOf(edge, "globex")
        expect([globexBefore.pending, globexBefore.dead]).toEqual([2, 2])

        // Its own: deleted and purged, and the other tenant's data is untouched.
        const del = yield* call(edge, ACME, "/v1/quarantine?tenant=acme", { method: "DELETE" })
        expect(del.body).toEqual({ tenant: "acme", deleted: 2 })
        const purge = yield* call(edge, ACME, "/v1/tenants/acme/queue?kinds=pending,dead", { method: "DELETE" })
        expect(purge.body).toEqual({ tenant: "acme", purged: { pending: 2, dead: 0 }, done: true })
        expect(yield* countersOf(edge, "acme")).toMatchObject({ pending: 0, dead: 0, bytes: 0 })
        expect(yield* countersOf(edge, "globex")).toEqual(globexBefore)
        expect((yield* call(edge, GLOBAL, "/v1/quarantine")).body.items.map((r: any) => r.tenant)).toEqual(["globex"])
        const t = yield* call(edge, GLOBEX, "/v1/tenants/globex")
        expect(t.body).toEqual({ tenant: "globex", ...globexBefore, limits: config.tenants.limits, limits_override: {} })

        expect((yield* call(edge, ACME, "/v1/tenants/acme/queue", { method: "DELETE" })).body.error).toBe("bad_query")
        expect((yield* call(edge, GLOBAL, "/v1/tenants/nobody")).body.error).toBe("unknown_tenant")
      })
    )
  )

  it.live("admin requests need a valid bearer token; config is global-only and redacted", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        const none = yield* call(edge, undefined, "/v1/dlq")
        expect(none.status).toBe(401)
        expect(none.body.error).toBe("unauthorized")
        expect(none.headers.get("www-authenticate")).toBe("Bearer")
        expect((yield* call(edge, "wrong-token-0123456789", "/v1/dlq")).status).toBe(401)
        expect((yield* call(edge, ACME, "/v1/config")).status).toBe(403)
        const cfg = yield* call(edge, GLOBAL, "/v1/config")
        expect(cfg.status).toBe(200)
        const text = JSON.stringify(cfg.body)
        for (const s of [secret, GLOBAL, ACME, GLOBEX]) expect(text.includes(s)).toBe(false)
        expect(cfg.body.adminTokens.map((t: any) => t.name)).toEqual(["ops", "acme-admin", "globex-admin"])
        expect((yield* call(edge, GLOBAL, "/v1/nothing")).body.error).toBe("not_found")
      })
    )
  )
})
