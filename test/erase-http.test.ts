/**
 * Erasing a tenant over real HTTP on RocksDB (TEN-5; docs/api.md "Erasing a
 * tenant"): the job's routes, 410 `tenant_erased` from the answer to the
 * DELETE on (step 1 is done by then), until an operator lifts it; and the id
 * then gets a new ordinal while the old one stays a tombstone.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import * as K from "../src/domain/keys.js"
import { Tenants } from "../src/queue/tenants.js"
import { layerRocksDb } from "../src/store/rocksdb.js"
import { Store, type StoreShape } from "../src/store/store.js"
import { configOf, type Edge, metricValue, read, startEdge, tempDir } from "./edge-harness.js"

const GLOBAL = "global-token-0123456789"
const ACME = "acme-token-0123456789ab"

const config = configOf({
  sinks: [{ name: "a", url: "http://127.0.0.1:9/a" }],
  sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["a"] }],
  adminTokens: [
    { name: "ops", token: GLOBAL, tenants: "*" },
    { name: "acme-admin", token: ACME, tenants: ["acme"] }
  ]
})

const ingest = (edge: Edge, tenant: string) =>
  Effect.promise(() => edge.fetch("/v1/hooks/shop", { method: "POST", body: `{"t":"${tenant}"}`, headers: { "x-tenant": tenant } }).then(read))

const call = (edge: Edge, token: string, path: string, method = "GET") =>
  Effect.promise(() => edge.fetch(path, { method, headers: { authorization: `Bearer ${token}` } }).then(read))

const send = (edge: Edge, token: string, method: string, path: string, body: unknown) =>
  Effect.promise(() =>
    edge.fetch(path, { method, body: JSON.stringify(body), headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } }).then(read)
  )

/** A scan of one tenant's endpoint rows that is held once armed: it tells `reached`, then waits for `release`. */
interface Hold {
  readonly ord: number
  readonly reached: Deferred.Deferred<void>
  readonly release: Deferred.Deferred<void>
}

/** RocksDB in a temp dir, whose next scan of `hold`'s endpoint rows waits (`hold` read at each scan). */
const holdingStore = (armed: () => Hold | undefined, disarm: () => void) =>
  Layer.unwrap(
    Effect.map(tempDir, (dir) =>
      Layer.effect(
        Store,
        Effect.map(Store, (inner): StoreShape => ({
          ...inner,
          scan: (cf, range, opts) => {
            const h = armed()
            if (h === undefined || cf !== "tenants" || !K.asBuffer(range.lo).equals(K.asBuffer(K.range(K.endpointPrefix(h.ord)).lo))) return inner.scan(cf, range, opts)
            disarm()
            return Effect.andThen(Deferred.succeed(h.reached, undefined), Effect.andThen(Deferred.await(h.release), inner.scan(cf, range, opts)))
          }
        }))
      ).pipe(Layer.provide(layerRocksDb(dir)))
    )
  )

const ordOf = (edge: Edge, tenant: string) => Effect.promise(() => edge.run(Effect.flatMap(Tenants, (t) => t.ord(tenant))))

const erasedOutcomes = (edge: Edge) =>
  Effect.promise(() => edge.fetch("/metrics").then((r) => r.text())).pipe(
    Effect.map((text) => metricValue(text, `ankusa_ingest_requests_total{outcome="tenant_erased"}`))
  )

describe("erase over HTTP", () => {
  it.live(
    "an endpoint created while its tenant is being erased is refused and erase leaves no endpoint row",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          let hold: Hold | undefined
          const edge = yield* startEdge(config, {
            store: holdingStore(() => hold, () => (hold = undefined)),
            erase: { inflightTimeoutMs: 200, pollMs: 20 }
          })
          expect((yield* ingest(edge, "acme")).status).toBe(202)
          expect((yield* ingest(edge, "globex")).status).toBe(202)
          const ord = yield* ordOf(edge, "acme")
          expect((yield* send(edge, GLOBAL, "POST", "/v1/tenants/acme/endpoints", { url: "https://acme.example/a" })).status).toBe(201)
          expect((yield* send(edge, GLOBAL, "PUT", "/v1/tenants/acme/limits", { weight: 3 })).status).toBe(200)
          const theirs = yield* send(edge, GLOBAL, "POST", "/v1/tenants/globex/endpoints", { url: "https://globex.example/a" })
          expect(theirs.status).toBe(201)

          // The create passes the edge's check and is held inside the commit, under the tenant's lock…
          hold = { ord, reached: yield* Deferred.make<void>(), release: yield* Deferred.make<void>() }
          const { reached, release } = hold
          const creating = yield* Effect.forkChild(send(edge, GLOBAL, "POST", "/v1/tenants/acme/endpoints", { url: "https://acme.example/late" }))
          yield* Deferred.await(reached)
          // …while the erase refuses the tenant (step 1 is committed by its 202).
          expect((yield* call(edge, GLOBAL, "/v1/tenants/acme?confirm=acme", "DELETE")).status).toBe(202)
          yield* Deferred.succeed(release, undefined)
          const late = yield* Fiber.join(creating)
          expect([late.status, late.body.error]).toEqual([422, "invalid_endpoint"])
          expect(late.body.message).toMatch(/^tenant: acme was erased/)

          let job = { done: false }
          for (let i = 0; i < 1_000 && !job.done; i++) {
            job = (yield* call(edge, GLOBAL, "/v1/tenants/acme/erase")).body
            if (!job.done) yield* Effect.sleep(20)
          }
          expect(job).toMatchObject({ done: true, step: 8 })
          // Nothing of the erased ordinal is left in the tenants family: no endpoint row, no limits row.
          expect(yield* edge.store.scan("tenants", K.range(K.endpointPrefix(ord)), { limit: 10 })).toEqual([])
          expect(yield* edge.store.get("tenants", K.tenantLimitsKey(ord))).toBeUndefined()
          // The other tenant's endpoint is untouched.
          expect((yield* call(edge, GLOBAL, "/v1/tenants/globex/endpoints")).body.items.map((e: { id: string }) => e.id)).toEqual([theirs.body.id])
        })
      ),
    30_000
  )

  it.live(
    "an erased tenant is refused with 410 and its ordinal is never reused",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const edge = yield* startEdge(config, { erase: { inflightTimeoutMs: 200, pollMs: 20 } })
          for (const t of ["acme", "globex", "acme"]) expect((yield* ingest(edge, t)).status).toBe(202)
          const oldOrd = yield* ordOf(edge, "acme")

          // Refused before anything runs: a scoped token, a confirm that does not repeat the id, an unknown tenant.
          expect((yield* call(edge, ACME, "/v1/tenants/acme?confirm=acme", "DELETE")).status).toBe(403)
          expect((yield* call(edge, GLOBAL, "/v1/tenants/acme?confirm=acm", "DELETE")).body.error).toBe("bad_query")
          expect((yield* call(edge, GLOBAL, "/v1/tenants/nobody?confirm=nobody", "DELETE")).status).toBe(404)
          expect((yield* call(edge, GLOBAL, "/v1/tenants/acme/erase")).body.error).toBe("unknown_erase")
          expect((yield* ingest(edge, "acme")).status).toBe(202)

          const started = yield* call(edge, GLOBAL, "/v1/tenants/acme?confirm=acme", "DELETE")
          expect(started.status).toBe(202)
          expect(started.body).toMatchObject({ id: `e_${oldOrd.toString(16).padStart(8, "0")}`, tenant: "acme", actor: "ops", done: false })
          // From the 202 on, the tenant is refused; another tenant is not.
          const before = yield* erasedOutcomes(edge)
          const refused = yield* ingest(edge, "acme")
          expect(refused.status).toBe(410)
          expect(refused.body).toEqual({ error: "tenant_erased", message: expect.any(String) })
          expect((yield* erasedOutcomes(edge)) - before).toBe(1)
          expect((yield* ingest(edge, "globex")).status).toBe(202)
          // Asking again answers the same job; the lift waits for it to finish.
          expect((yield* call(edge, GLOBAL, "/v1/tenants/acme?confirm=acme", "DELETE")).body.id).toBe(started.body.id)

          // A lift while the job runs is refused; one that lands as the job finishes (between the read
          // and the lift) is the lift of a done job, so the job is gone after it.
          let job = started.body
          let liftedAtEnd = false
          for (let i = 0; i < 1_000 && !job.done; i++) {
            job = (yield* call(edge, GLOBAL, "/v1/tenants/acme/erase")).body
            if (job.done) break
            const lifted = yield* call(edge, GLOBAL, "/v1/tenants/acme/erase?confirm=acme", "DELETE")
            if (lifted.status === 200) {
              expect((yield* call(edge, GLOBAL, "/v1/tenants/acme/erase")).status).toBe(404)
              liftedAtEnd = true
              break
            }
            expect(lifted.body.error).toBe("erase_running")
            yield* Effect.sleep(20)
          }
          if (liftedAtEnd) return
          expect(job).toMatchObject({ done: true, step: 8, step_name: "done" })
          expect(job.counts.due).toBe(3)

          // Done, and still refused until an operator lifts it; the tenant reads as unknown, its `?t` is a tombstone.
          expect((yield* ingest(edge, "acme")).status).toBe(410)
          expect((yield* call(edge, GLOBAL, "/v1/tenants/acme")).status).toBe(404)
          expect(yield* Effect.promise(() => edge.run(Effect.flatMap(Tenants, (t) => Effect.flip(t.name(oldOrd)))))).toMatchObject({ _tag: "TenantNotFound" })
          const tomb = yield* edge.store.get("tenants", K.tenantKey(oldOrd))
          expect(tomb?.length).toBe(0)

          const lifted = yield* call(edge, GLOBAL, "/v1/tenants/acme/erase?confirm=acme", "DELETE")
          expect(lifted.status).toBe(200)
          const audit = yield* call(edge, GLOBAL, "/v1/audit?tenant=acme")
          expect(audit.body.items.map((r: { action: string; actor: string }) => `${r.action}:${r.actor}`).slice(0, 2)).toEqual(["tenant.lift:ops", "tenant.erase:ops"])
          expect((yield* call(edge, GLOBAL, "/v1/tenants/acme/erase")).status).toBe(404)

          // Accepted again, under a new ordinal past every one given before; the old one is never given again.
          expect((yield* ingest(edge, "acme")).status).toBe(202)
          const newOrd = yield* ordOf(edge, "acme")
          expect(newOrd).toBeGreaterThan(oldOrd)
          expect(newOrd).toBeGreaterThan(yield* ordOf(edge, "globex"))
          expect((yield* ingest(edge, "initech")).status).toBe(202)
          expect(yield* ordOf(edge, "initech")).toBe(newOrd + 1)
          const counters = (yield* call(edge, GLOBAL, "/v1/tenants/acme")).body
          expect(counters).toMatchObject({ tenant: "acme", pending: 1, dead: 0 })
        })
      ),
    30_000
  )
})
