/**
 * Ingest over real HTTP (127.0.0.1, port 0) on a RocksDB store in a temp dir:
 * every answer of `POST /v1/hooks/:source` with its status and JSON body, and
 * the outcome counters of /metrics.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import * as Counters from "../src/domain/counters.js"
import { decodeEnvelope } from "../src/domain/envelope.js"
import * as K from "../src/domain/keys.js"
import * as Signature from "../src/domain/signature.js"
import { refusalOf } from "../src/http/errors.js"
import { sourceOf } from "../src/http/ingest.js"
import { Queue } from "../src/queue/queue.js"
import { MemoryDb, layerMemory } from "../src/store/memory.js"
import { StoreError } from "../src/store/store.js"
import { Tenants } from "../src/queue/tenants.js"
import { Overloaded, WriterClosed } from "../src/queue/writer.js"
import { configOf, type Edge, metricValue, read, startEdge } from "./edge-harness.js"

const secret = `whsec_${randomBytes(32).toString("base64")}`
const key = Signature.parseSecret(secret)!

const config = configOf({
  sinks: [
    { name: "a", url: "http://127.0.0.1:9/a" },
    { name: "b", url: "http://127.0.0.1:9/b" }
  ],
  sources: [
    { id: "fixed", tenant: "acme", routes: ["a", "b"] },
    { id: "shared", tenant: { header: "X-Tenant" }, routes: ["a"] },
    { id: "signed", tenant: "signed-co", verification: { type: "standard-webhooks", secret }, routes: ["a"] }
  ],
  tenants: { max: 3 },
  ingest: { maxBodyBytes: 1024 }
})

const post = (edge: Edge, source: string, body: string | Uint8Array, headers: Record<string, string> = {}) =>
  Effect.promise(() =>
    edge.fetch(`/v1/hooks/${source}`, { method: "POST", body, headers: { "content-type": "application/json", ...headers } }).then(read)
  )

const scrape = (edge: Edge) => Effect.promise(() => edge.fetch("/metrics").then((r) => r.text()))
const outcome = (text: string, o: string) => metricValue(text, `ankusa_ingest_requests_total{outcome="${o}"}`)

const countersOf = (edge: Edge, tenant: string) =>
  Effect.promise(() =>
    edge.run(Effect.flatMap(Tenants, (t) => t.ord(tenant)).pipe(Effect.flatMap((ord) => Effect.flatMap(Queue, (q) => q.counters(ord)))))
  )

describe("http ingest", () => {
  it.live("a hook is accepted with 202 {id, seq} after its synced commit, one due row per sink", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        const before = yield* scrape(edge)
        const r = yield* post(edge, "fixed", '{"hello":"world"}')
        expect(r.status).toBe(202)
        expect(Object.keys(r.body).sort()).toEqual(["id", "seq"])
        expect(typeof r.body.id).toBe("string")
        const c = yield* countersOf(edge, "acme")
        expect(c).toEqual({ ...Counters.zero, pending: 2, bytes: c.bytes })
        expect(c.bytes).toBeGreaterThan(0)
        const after = yield* scrape(edge)
        expect(outcome(after, "accepted") - outcome(before, "accepted")).toBe(1)
      })
    )
  )

  it.live("tenant_limit answers 503 with Retry-After", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        // tenants.max = 3: acme, t1, t2 take the three ordinals.
        expect((yield* post(edge, "fixed", "{}")).status).toBe(202)
        for (const t of ["t1", "t2"]) expect((yield* post(edge, "shared", "{}", { "x-tenant": t })).status).toBe(202)
        const before = yield* scrape(edge)
        const refused = yield* post(edge, "shared", "{}", { "x-tenant": "t3" })
        expect(refused.status).toBe(503)
        expect(refused.body).toEqual({ error: "tenant_limit", message: expect.any(String) })
        expect(refused.headers.get("retry-after")).toBe("300")
        // An existing tenant is never refused at the cap.
        expect((yield* post(edge, "shared", "{}", { "x-tenant": "t1" })).status).toBe(202)
        const after = yield* scrape(edge)
        expect(outcome(after, "tenant_limit") - outcome(before, "tenant_limit")).toBe(1)
        // The refused tenant got no ordinal.
        const t3 = yield* Effect.promise(() => edge.run(Effect.result(Effect.flatMap(Tenants, (t) => t.ord("t3")))))
        expect(t3._tag).toBe("Failure")
      })
    )
  )

  it.live("a body past ingest.maxBodyBytes answers 413 too_large, declared or streamed", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        const before = yield* scrape(edge)
        const declared = yield* post(edge, "fixed", Buffer.alloc(1025, 97))
        expect(declared.status).toBe(413)
        expect(declared.body).toEqual({ error: "too_large", message: expect.any(String) })
        // No Content-Length: the body is cut at the limit and the rest drained.
        const streamed = yield* Effect.promise(() =>
          edge
            .fetch("/v1/hooks/fixed", {
              method: "POST",
              body: new ReadableStream({
                start(c) {
                  for (let i = 0; i < 8; i++) c.enqueue(new Uint8Array(512).fill(98))
                  c.close()
                }
              }),
              duplex: "half"
            } as RequestInit)
            .then(read)
        )
        expect(streamed.status).toBe(413)
        expect(streamed.body.error).toBe("too_large")
        // Exactly the limit is accepted.
        expect((yield* post(edge, "fixed", Buffer.alloc(1024, 97))).status).toBe(202)
        const after = yield* scrape(edge)
        expect(outcome(after, "too_large") - outcome(before, "too_large")).toBe(2)
      })
    )
  )

  it.live("an unknown source answers 404 unknown_source", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        const before = yield* scrape(edge)
        const r = yield* post(edge, "nope", "{}")
        expect(r.status).toBe(404)
        expect(r.body).toEqual({ error: "unknown_source", message: expect.any(String) })
        const after = yield* scrape(edge)
        expect(outcome(after, "unknown_source") - outcome(before, "unknown_source")).toBe(1)
      })
    )
  )

  it.live("the ingest route takes a query string and a percent-encoded source; other paths and methods go to the router", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        const query = yield* post(edge, "fixed?trace=1", "{}")
        expect(query.status).toBe(202)
        const encoded = yield* post(edge, "%66ixed", "{}")
        expect(encoded.status).toBe(202)
        const nested = yield* post(edge, "fixed/extra", "{}")
        expect(nested.status).toBe(404)
        expect(nested.body).toEqual({ error: "not_found", message: expect.any(String) })
        const get = yield* Effect.promise(() => edge.fetch("/v1/hooks/fixed").then(read))
        expect(get.status).toBe(404)
        expect(get.body).toEqual({ error: "not_found", message: expect.any(String) })
        const counters = yield* countersOf(edge, "acme")
        expect(counters.pending).toBe(4)
      })
    )
  )

  it.live("the Writer's metrics count the requests of each commit and time it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        const before = yield* scrape(edge)
        const rs = yield* Effect.all([post(edge, "fixed", "{}"), post(edge, "fixed", "{}"), post(edge, "fixed", "{}")], { concurrency: "unbounded" })
        expect(rs.map((r) => r.status)).toEqual([202, 202, 202])
        const after = yield* scrape(edge)
        const delta = (series: string) => (metricValue(after, series) ?? 0) - (metricValue(before, series) ?? 0)
        expect(delta("ankusa_writer_batch_requests_sum")).toBe(3)
        const commits = delta("ankusa_writer_batch_requests_count")
        expect(commits).toBeGreaterThanOrEqual(1)
        expect(commits).toBeLessThanOrEqual(3)
        expect(delta("ankusa_writer_commit_seconds_count")).toBe(commits)
        expect(delta("ankusa_writer_commit_seconds_sum")).toBeGreaterThan(0)
      })
    )
  )

  it("sourceOf picks the ingest route and nothing else", () => {
    expect(sourceOf("POST", "/v1/hooks/github")).toBe("github")
    expect(sourceOf("POST", "/v1/hooks/git%20hub?x=1")).toBe("git hub")
    expect(sourceOf("POST", "/v1/hooks/")).toBeUndefined()
    expect(sourceOf("POST", "/v1/hooks/a/b")).toBeUndefined()
    expect(sourceOf("POST", "/v1/hooks/%E0%A4")).toBeUndefined()
    expect(sourceOf("PUT", "/v1/hooks/github")).toBeUndefined()
    expect(sourceOf("POST", "/v1/hooksgithub")).toBeUndefined()
  })

  it.live("a shared source without or with a bad tenant header answers 400", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        const missing = yield* post(edge, "shared", "{}")
        expect(missing.status).toBe(400)
        expect(missing.body.error).toBe("missing_tenant")
        const bad = yield* post(edge, "shared", "{}", { "x-tenant": "x".repeat(300) })
        expect(bad.status).toBe(400)
        expect(bad.body.error).toBe("invalid_tenant")
        const key = yield* post(edge, "fixed", "{}", { "idempotency-key": "k".repeat(300) })
        expect(key.status).toBe(400)
        expect(key.body.error).toBe("invalid_idempotency_key")
      })
    )
  )

  it.live("a failed Standard Webhooks verification answers 401 and is quarantined; a valid one is accepted", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        const before = yield* scrape(edge)
        const body = '{"event":"paid"}'
        const now = Math.floor(Date.now() / 1000)
        const good = Signature.headers(key, "msg_1", now, body)
        expect((yield* post(edge, "signed", body, { ...good })).status).toBe(202)

        const tampered = yield* post(edge, "signed", '{"event":"refunded"}', { ...Signature.headers(key, "msg_2", now, body) })
        expect(tampered.status).toBe(401)
        expect(tampered.body).toEqual({ error: "verification_failed", message: "bad_signature" })
        const stale = yield* post(edge, "signed", body, { ...Signature.headers(key, "msg_3", now - 3600, body) })
        expect(stale.status).toBe(401)
        expect(stale.body.message).toBe("stale_timestamp")
        const unsigned = yield* post(edge, "signed", body)
        expect(unsigned.status).toBe(401)
        expect(unsigned.body.message).toBe("missing_headers")

        const after = yield* scrape(edge)
        expect(outcome(after, "quarantined") - outcome(before, "quarantined")).toBe(3)
        // Refused requests created no ordinal and queued nothing beyond the valid hook.
        const c = yield* countersOf(edge, "signed-co")
        expect(c.pending).toBe(1)
      })
    )
  )

  it.live("a repeated webhook-id or Idempotency-Key answers 200 with the first id and queues nothing", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        const first = yield* post(edge, "fixed", "{}", { "webhook-id": "evt_1" })
        expect(first.status).toBe(202)
        const again = yield* post(edge, "fixed", '{"changed":true}', { "webhook-id": "evt_1" })
        expect(again.status).toBe(200)
        expect(again.body).toEqual({ id: first.body.id, seq: first.body.seq, duplicate: true })
        const k1 = yield* post(edge, "fixed", "{}", { "idempotency-key": "order-7" })
        const k2 = yield* post(edge, "fixed", "{}", { "idempotency-key": "order-7" })
        expect(k1.status).toBe(202)
        expect(k2.status).toBe(200)
        expect(k2.body.id).toBe(k1.body.id)
        const c = yield* countersOf(edge, "acme")
        // Two hooks, two sinks each.
        expect(c.pending).toBe(4)
      })
    )
  )

  it.live("a store that cannot take the write answers 503 unavailable with Retry-After", () =>
    Effect.scoped(
      Effect.gen(function* () {
        // The memory store can fail its next write on demand; RocksDB cannot be made to.
        const db = new MemoryDb()
        const edge = yield* startEdge(config, { store: layerMemory({ db }) })
        const before = yield* scrape(edge)
        db.failNextWrite = 1
        const r = yield* post(edge, "fixed", "{}")
        expect(r.status).toBe(503)
        expect(r.body.error).toBe("unavailable")
        expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0)
        const after = yield* scrape(edge)
        expect(outcome(after, "unavailable") - outcome(before, "unavailable")).toBe(1)
        // Nothing was acknowledged, and the next request goes through.
        expect((yield* post(edge, "fixed", "{}")).status).toBe(202)
      })
    )
  )

  it.live("a node that is still starting answers 503 unavailable; /healthz answers, /readyz does not", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config, { closed: true })
        const r = yield* post(edge, "fixed", "{}")
        expect(r.status).toBe(503)
        expect(r.body.error).toBe("unavailable")
        expect(r.headers.get("retry-after")).not.toBeNull()
        expect((yield* Effect.promise(() => edge.fetch("/healthz").then(read))).status).toBe(200)
        const ready = yield* Effect.promise(() => edge.fetch("/readyz").then(read))
        expect(ready.status).toBe(503)
        expect(ready.body).toEqual({ ready: false, phase: "starting" })
      })
    )
  )

  it.live("the hook keeps its body bytes, content type and event headers, not credentials or proxy headers", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        const body = Buffer.from([0, 1, 2, 255, 254])
        const r = yield* Effect.promise(() =>
          edge
            .fetch("/v1/hooks/shared", {
              method: "POST",
              body,
              headers: {
                "content-type": "application/x-thing",
                "x-tenant": "t1",
                "x-github-event": "push",
                "x-api-key": "gateway-credential",
                "x-auth-token": "gateway-credential",
                "x-forwarded-for": "10.0.0.1",
                authorization: "Bearer gateway-credential"
              }
            })
            .then(read)
        )
        expect(r.status).toBe(202)
        const stored = yield* edge.store.get("hooks", K.hookKey(r.body.seq))
        const env = decodeEnvelope(stored)!
        expect(Buffer.from(env.body)).toEqual(body)
        expect(env.contentType).toBe("application/x-thing")
        expect(env.tenantId).toBe("t1")
        expect(env.sinks).toEqual(["a"])
        expect(env.headers["x-github-event"]).toBe("push")
        expect(Object.keys(env.headers).filter((h) => h !== "user-agent").sort()).toEqual(["x-github-event"])
      })
    )
  )

  it("every Writer refusal maps to 503 unavailable with Retry-After in one place", () => {
    for (const e of [new Overloaded({ reason: "requests" }), new WriterClosed(), new StoreError({ op: "write", message: "x" })]) {
      const r = refusalOf(e)
      expect(r.status).toBe(503)
      expect(r.body.error).toBe("unavailable")
      expect(r.outcome).toBe("unavailable")
      expect(Number(r.headers["retry-after"])).toBeGreaterThan(0)
    }
  })
})
