/**
 * Issue 39 at the edge (docs/api.md "Admission"): slow uploads are cut by the body pace instead of
 * holding `ingest.maxBufferedBytes` until the request timeout, a stranger's badly signed requests
 * spend none of a tenant's rate, and a test event is admitted as any hook of its tenant. Real HTTP
 * on 127.0.0.1 and RocksDB in a temp dir; in each, one client misbehaves and another must not notice.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import * as http from "node:http"
import * as Signature from "../src/domain/signature.js"
import { adminCall, GLOBAL } from "./admin-fixture.js"
import { configOf, type Edge, metricValue, read, startEdge } from "./edge-harness.js"

const KiB = 1024
const secret = `whsec_${randomBytes(32).toString("base64")}`
const key = Signature.parseSecret(secret)!

const configWith = (extra: Record<string, unknown>) =>
  configOf({
    sinks: [{ name: "a", url: "http://127.0.0.1:9/a" }],
    sources: [
      { id: "shop", tenant: { header: "x-tenant" }, routes: ["a"] },
      { id: "signed", tenant: { header: "x-tenant" }, verification: { type: "standard-webhooks", secret }, routes: ["a"] }
    ],
    adminTokens: [{ name: "ops", token: GLOBAL, tenants: "*" }],
    ...extra
  })

const sleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))
const metrics = (edge: Edge) => Effect.promise(() => edge.fetch("/metrics").then((r) => r.text()))
const outcome = (text: string, o: string) => metricValue(text, `ankusa_ingest_requests_total{outcome="${o}"}`)

const post = (edge: Edge, source: string, tenant: string, body: string, headers: Record<string, string> = {}) =>
  Effect.promise(() =>
    edge.fetch(`/v1/hooks/${source}`, { method: "POST", headers: { "x-tenant": tenant, "content-type": "application/json", ...headers }, body }).then(read)
  )

const signed = (edge: Edge, tenant: string, i: number) => {
  const body = JSON.stringify({ i })
  return post(edge, "signed", tenant, body, { ...Signature.headers(key, `msg_${tenant}_${i}`, Math.floor(Date.now() / 1000), body) })
}

/**
 * An upload that declares `contentLength`, sends `first` bytes, then one byte every `tickMs` (none
 * with 0): `answer` settles with the status, or "closed" when the server closed without one.
 */
const trickle = (url: string, tenant: string, contentLength: number, first: number, tickMs: number) => {
  const u = new URL(url)
  const req = http.request({
    host: u.hostname,
    port: u.port,
    path: u.pathname,
    method: "POST",
    agent: false,
    headers: { "x-tenant": tenant, "content-length": String(contentLength) }
  })
  let timer: ReturnType<typeof setInterval> | undefined
  const answer = new Promise<{ readonly status: number; readonly body: string } | "closed">((resolve) => {
    req.on("response", (res) => {
      let body = ""
      res.on("data", (c: Buffer) => (body += c.toString("utf8")))
      res.on("end", () => resolve({ status: res.statusCode!, body }))
      res.on("error", () => resolve("closed"))
    })
    req.on("error", () => resolve("closed"))
    req.on("close", () => resolve("closed"))
  }).finally(() => clearInterval(timer))
  req.flushHeaders()
  req.write(Buffer.alloc(first, 0x62))
  if (tickMs > 0) timer = setInterval(() => req.write(Buffer.alloc(1, 0x62)), tickMs)
  return { answer, destroy: () => (clearInterval(timer), req.destroy()) }
}

describe("edge isolation (issue 39)", () => {
  it.live("slow uploads do not keep another client's request from being read", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const graceMs = 1_000
        const edge = yield* startEdge(
          configWith({
            ingest: { maxBodyBytes: 64 * KiB, maxBufferedBytes: 256 * KiB },
            http: { minBodyBytesPerSec: 8 * KiB, bodyGraceMs: graceMs, headersTimeoutMs: 30_000, requestTimeoutMs: 60_000 }
          })
        )
        const url = `${edge.url}/v1/hooks/shop`
        // Twelve uploads declare 64 KiB each, 768 KiB against a 256 KiB budget; half stall, half send a byte every 200 ms.
        const slow = Array.from({ length: 12 }, (_, i) => trickle(url, "slowpoke", 64 * KiB, KiB, i % 2 === 0 ? 0 : 200))
        yield* sleep(300)
        // Another tenant's hook: the slow uploads hold only the bytes they sent, so it is read and taken at once.
        const sent = Date.now()
        const r = yield* post(edge, "shop", "quiet", JSON.stringify({ hello: "world" }))
        const waited = Date.now() - sent
        expect(r.status, JSON.stringify(r.body)).toBe(202)
        // Read within the grace, far from the 60 s request timeout.
        expect(waited).toBeLessThan(graceMs)
        // Every slow upload was cut: 408 body_too_slow with the connection closed, none taken.
        const ends = yield* Effect.promise(() => Promise.all(slow.map((s) => s.answer)))
        for (const e of ends) {
          expect(e).not.toBe("closed")
          const a = e as { status: number; body: string }
          expect(a.status).toBe(408)
          expect(JSON.parse(a.body).error).toBe("body_too_slow")
        }
        const text = yield* metrics(edge)
        expect(outcome(text, "too_slow")).toBe(12)
        expect(outcome(text, "busy")).toBe(0)
        // Their reservations went with them: another full-size upload is taken at once.
        expect((yield* post(edge, "shop", "quiet", JSON.stringify({ pad: "x".repeat(60 * KiB) }))).status).toBe(202)
        for (const s of slow) s.destroy()
      })
    ), { timeout: 60_000 })

  it.live("a request whose signature fails does not spend its tenant's rate", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(configWith({ tenants: { limits: { ingestPerSec: 3 } } }))
        // A stranger who knows the source and the tenant id sends unsigned and badly signed requests.
        for (let i = 0; i < 20; i++) {
          const bad = i % 2 === 0 ? {} : { ...Signature.headers(Signature.parseSecret(`whsec_${randomBytes(32).toString("base64")}`)!, `x_${i}`, Math.floor(Date.now() / 1000), "{}") }
          const r = yield* post(edge, "signed", "acme", "{}", bad)
          expect(r.status).toBe(401)
        }
        // The tenant's real sender still has its whole burst (ingestPerSec 3, a second of tokens).
        for (let i = 0; i < 3; i++) {
          const r = yield* signed(edge, "acme", i)
          expect(r.status, JSON.stringify(r.body)).toBe(202)
        }
        // And its rate still holds for itself.
        expect((yield* signed(edge, "acme", 3)).status).toBe(429)
      })
    ), { timeout: 60_000 })

  it.live("a test event obeys its tenant's admission", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(
          configWith({
            sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["tenant-endpoints"] }],
            sinks: [],
            endpoints: { allowNetworks: ["127.0.0.0/8"] },
            tenants: { limits: { ingestPerSec: 2 } }
          })
        )
        const created = yield* adminCall(edge, GLOBAL, "/v1/tenants/acme/endpoints", { method: "POST", body: JSON.stringify({ url: "http://127.0.0.1:9/hook" }) })
        expect(created.status, JSON.stringify(created.body)).toBe(201)
        const id = (created.body as { id: string }).id
        const other = yield* adminCall(edge, GLOBAL, "/v1/tenants/globex/endpoints", { method: "POST", body: JSON.stringify({ url: "http://127.0.0.1:9/hook" }) })
        const otherId = (other.body as { id: string }).id
        const test = (tenant: string, endpoint: string) => adminCall(edge, GLOBAL, `/v1/tenants/${tenant}/endpoints/${endpoint}/test`, { method: "POST" })
        // ingestPerSec 2: two test events in a row, then 429 tenant_rate with Retry-After, as ingest answers.
        const statuses = []
        for (let i = 0; i < 6; i++) statuses.push(yield* test("acme", id))
        expect(statuses.map((s) => s.status)).toEqual([202, 202, 429, 429, 429, 429])
        expect((statuses[2]!.body as { error: string }).error).toBe("tenant_rate")
        expect(statuses[2]!.headers.get("retry-after")).toBe("1")
        // The same bucket as its hooks: ingest is refused too, and another tenant is not.
        expect((yield* post(edge, "shop", "acme", "{}")).status).toBe(429)
        expect((yield* test("globex", otherId)).status).toBe(202)
      })
    ), { timeout: 60_000 })
})
