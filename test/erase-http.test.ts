/**
 * Erasing a tenant over real HTTP on RocksDB (TEN-5; docs/api.md "Erasing a
 * tenant"): the job's routes, 410 `tenant_erased` from the answer to the
 * DELETE on (step 1 is done by then), until an operator lifts it; and the id
 * then gets a new ordinal while the old one stays a tombstone.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as K from "../src/domain/keys.js"
import { Tenants } from "../src/queue/tenants.js"
import { configOf, type Edge, metricValue, read, startEdge } from "./edge-harness.js"

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

const ordOf = (edge: Edge, tenant: string) => Effect.promise(() => edge.run(Effect.flatMap(Tenants, (t) => t.ord(tenant))))

const erasedOutcomes = (edge: Edge) =>
  Effect.promise(() => edge.fetch("/metrics").then((r) => r.text())).pipe(
    Effect.map((text) => metricValue(text, `ankusa_ingest_requests_total{outcome="tenant_erased"}`))
  )

describe("erase over HTTP", () => {
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
