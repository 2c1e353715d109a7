/**
 * Admission at the edge (issue 24, TEN-2; docs/api.md "Admission"): a
 * tenant's ingest rate and queued-bytes quota, the bytes being read across
 * requests, and the demo sink served only when asked for. Real HTTP on
 * 127.0.0.1 and RocksDB in a temp dir. Each shows one tenant (or client)
 * misbehaving and another not noticing, where that applies.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Result } from "effect"
import * as http from "node:http"
import * as net from "node:net"
import * as Cfg from "../src/domain/config.js"
import { Queue } from "../src/queue/queue.js"
import { adminCall, adminConfig, GLOBAL } from "./admin-fixture.js"
import { configOf, type Edge, metricValue, read, startEdge } from "./edge-harness.js"

const ingest = (edge: Edge, tenant: string, body = "{}") =>
  Effect.promise(() =>
    edge.fetch("/v1/hooks/shop", { method: "POST", headers: { "x-tenant": tenant, "content-type": "application/json" }, body }).then(read)
  )

const putLimits = (edge: Edge, tenant: string, body: unknown) =>
  adminCall(edge, GLOBAL, `/v1/tenants/${tenant}/limits`, { method: "PUT", body: JSON.stringify(body) })

interface Early {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
  /** Body bytes the client had written when the answer came. */
  readonly sent: number
}

/**
 * A POST that declares `contentLength` and sends only `first` bytes of it, then waits: the answer (if one
 * comes before `waitMs`) and how much of the body was sent by then. The socket is destroyed afterwards.
 */
const upload = (url: string, headers: Record<string, string>, contentLength: number, first = 0, waitMs = 10_000) =>
  new Promise<Early | "no answer">((resolve, reject) => {
    const u = new URL(url)
    const req = http.request({
      host: u.hostname,
      port: u.port,
      path: u.pathname,
      method: "POST",
      agent: false,
      headers: { ...headers, "content-length": String(contentLength) }
    })
    let sent = 0
    const timer = setTimeout(() => (req.destroy(), resolve("no answer")), waitMs)
    req.on("response", (res) => {
      const chunks: Array<Buffer> = []
      const at = sent
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => {
        clearTimeout(timer)
        req.destroy()
        resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString("utf8"), sent: at })
      })
    })
    req.on("error", (e) => (clearTimeout(timer), reject(e)))
    req.flushHeaders()
    if (first > 0) req.write(Buffer.alloc(first, 0x61), () => void (sent += first))
  })

/** An upload held open: it has sent its headers and `first` bytes; `answer` settles when the server answers or closes. */
const held = (url: string, headers: Record<string, string>, contentLength: number, first: number) => {
  const u = new URL(url)
  const req = http.request({
    host: u.hostname,
    port: u.port,
    path: u.pathname,
    method: "POST",
    agent: false,
    headers: { ...headers, "content-length": String(contentLength) }
  })
  const answer = new Promise<number | "closed">((resolve) => {
    req.on("response", (res) => (res.resume(), resolve(res.statusCode!)))
    req.on("error", () => resolve("closed"))
    req.on("close", () => resolve("closed"))
  })
  req.flushHeaders()
  req.write(Buffer.alloc(first, 0x62))
  return { answer, destroy: () => req.destroy() }
}

const sleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))

const metrics = (edge: Edge) => Effect.promise(() => edge.fetch("/metrics").then((r) => r.text()))
const outcome = (text: string, o: string) => metricValue(text, `ankusa_ingest_requests_total{outcome="${o}"}`)

describe("admission", () => {
  it.live("a tenant over its ingest rate gets 429 tenant_rate and another tenant is not", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(adminConfig())
        const RATE = 5
        expect((yield* ingest(edge, "noisy")).status).toBe(202)
        expect((yield* ingest(edge, "quiet")).status).toBe(202)
        const set = yield* putLimits(edge, "noisy", { ingestPerSec: RATE })
        expect([set.status, set.body.limits.ingestPerSec, set.body.limits_override]).toEqual([200, RATE, { ingestPerSec: RATE }])
        const shown = yield* adminCall(edge, GLOBAL, "/v1/tenants/noisy")
        expect(shown.body.limits).toMatchObject({ ingestPerSec: RATE, maxQueuedBytes: 0 })

        // Both tenants send as fast as they are answered, side by side, for about two seconds.
        const started = Date.now()
        const noisy: Array<Awaited<ReturnType<typeof read>>> = []
        const quiet: Array<Awaited<ReturnType<typeof read>>> = []
        for (let i = 0; i < 60; i++) {
          const [n, q] = yield* Effect.all([ingest(edge, "noisy"), ingest(edge, "quiet")], { concurrency: 2 })
          noisy.push(n)
          quiet.push(q)
          if (i % 10 === 9) yield* sleep(300)
        }
        const seconds = (Date.now() - started) / 1000

        expect(quiet.map((r) => r.status)).toEqual(quiet.map(() => 202))
        const accepted = noisy.filter((r) => r.status === 202).length
        const refused = noisy.filter((r) => r.status === 429)
        expect(accepted + refused.length).toBe(noisy.length)
        // The bucket: one second's burst (RATE tokens), then RATE a second.
        expect(accepted).toBeGreaterThanOrEqual(RATE)
        expect(accepted).toBeLessThanOrEqual(RATE + Math.ceil(RATE * seconds) + 1)
        expect(refused.length).toBeGreaterThan(0)
        for (const r of refused) {
          expect(r.body).toEqual({ error: "tenant_rate", message: `this tenant may send ${RATE} hooks a second` })
          expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
        }
        expect(outcome(yield* metrics(edge), "tenant_rate")).toBe(refused.length)

        // Refused before the body is read: with the bucket emptied, the answer comes while the body is still unsent.
        // (On a slow machine a token may come back between the burst and the upload: then the upload is taken,
        // waits for its body, and the test tries again.)
        let early: Early | "no answer" = "no answer"
        for (let attempt = 0; attempt < 5 && (early === "no answer" || early.status !== 429); attempt++) {
          const emptied = yield* Effect.all(Array.from({ length: 2 * RATE }, () => ingest(edge, "noisy")), { concurrency: 2 * RATE })
          expect(emptied.some((r) => r.status === 429)).toBe(true)
          early = yield* Effect.promise(() => upload(`${edge.url}/v1/hooks/shop`, { "x-tenant": "noisy" }, 1024, 0, 1_500))
        }
        expect(early).not.toBe("no answer")
        expect([(early as Early).status, (early as Early).sent]).toEqual([429, 0])
        expect((yield* ingest(edge, "quiet")).status).toBe(202)
      })
    ), { timeout: 60_000 })

  it.live("a tenant at its queued-bytes quota gets 429 tenant_quota and nothing acked is lost", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(adminConfig())
        const QUOTA = 40_000
        const body = JSON.stringify({ pad: "x".repeat(1_000) })
        expect((yield* ingest(edge, "noisy", body)).status).toBe(202)
        expect((yield* putLimits(edge, "noisy", { maxQueuedBytes: QUOTA })).status).toBe(200)
        const acked = new Map<string, number>()
        const bytesOf = (tenant: string) => Effect.map(adminCall(edge, GLOBAL, `/v1/tenants/${tenant}`), (r) => r.body as { bytes: number; pending: number })

        // Bursts of concurrent requests: the edge and the Writer's commit both hold the quota.
        let quota: Array<Awaited<ReturnType<typeof read>>> = []
        let quietAcked = 0
        for (let round = 0; round < 30 && quota.length === 0; round++) {
          const answers = yield* Effect.all(
            Array.from({ length: 8 }, (_, i) => ingest(edge, i % 4 === 3 ? "quiet" : "noisy", body)),
            { concurrency: 8 }
          )
          answers.forEach((r, i) => {
            if (i % 4 === 3) {
              expect(r.status).toBe(202)
              quietAcked++
            } else if (r.status === 202) acked.set(r.body.id, r.body.seq)
            else quota.push(r)
          })
        }
        expect(quota.length).toBeGreaterThan(0)
        for (const r of quota) {
          expect(r.status).toBe(429)
          expect(r.body).toEqual({ error: "tenant_quota", message: `this tenant's queue holds its quota of ${QUOTA} bytes` })
          expect(r.headers.get("retry-after")).toBe("10")
        }
        // At the quota, not far past it: the request that crossed it was the last taken.
        const noisy = yield* bytesOf("noisy")
        const oneHook = noisy.bytes / noisy.pending
        expect(noisy.bytes).toBeGreaterThanOrEqual(QUOTA)
        expect(noisy.bytes).toBeLessThan(QUOTA + oneHook)
        // Refused before the body is read.
        const early = yield* Effect.promise(() => upload(`${edge.url}/v1/hooks/shop`, { "x-tenant": "noisy" }, body.length, 0, 2_000))
        expect(early).not.toBe("no answer")
        expect([(early as Early).status, (early as Early).sent]).toEqual([429, 0])
        // The other tenant never noticed; its queue is past the noisy one's quota.
        for (let i = 0; i < 40; i++) expect((yield* ingest(edge, "quiet", body)).status).toBe(202)
        expect((yield* bytesOf("quiet")).bytes).toBeGreaterThan(QUOTA)

        // Nothing acked is lost: every 202 is a queued row, and every queued row was a 202.
        expect(noisy.pending).toBe(acked.size + 1)
        const queue = Context.get(edge.context, Queue)
        const envelopes = yield* queue.envelopes([...acked.values()])
        for (const [id, seq] of acked) expect(envelopes.get(seq)?.id, id).toBe(id)
        expect(outcome(yield* metrics(edge), "tenant_quota")).toBeGreaterThanOrEqual(quota.length)

        // The quota follows the queue: once the tenant's rows are purged, it is taken again, without a restart.
        const purged = yield* adminCall(edge, GLOBAL, "/v1/tenants/noisy/queue?kinds=pending", { method: "DELETE" })
        expect(purged.status).toBe(200)
        expect((yield* bytesOf("noisy")).bytes).toBe(0)
        expect((yield* ingest(edge, "noisy", body)).status).toBe(202)
        expect(quietAcked).toBeGreaterThan(0)
      })
    ), { timeout: 60_000 })

  it.live("past maxBufferedBytes of bodies arrived, another upload is refused before its body is read", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const KiB = 1024
        const edge = yield* startEdge(
          adminConfig({
            ingest: { maxBodyBytes: 64 * KiB, maxBufferedBytes: 256 * KiB },
            // No body pace here: the request timeout alone ends the stalled uploads (edge-isolation.test.ts has the pace).
            http: { headersTimeoutMs: 1_000, requestTimeoutMs: 4_000, minBodyBytesPerSec: 0 }
          })
        )
        const url = `${edge.url}/v1/hooks/shop`
        // Five uploads of 64 KiB each send 60 KiB and stall: 300 KiB arrived, past the budget (the last chunks pause).
        const slow = Array.from({ length: 5 }, () => held(url, { "x-tenant": "slow" }, 64 * KiB, 60 * KiB))
        yield* sleep(1_000)
        // Another client's upload is refused at its headers: 503 busy, no byte of its body read, the connection closed.
        const refused = yield* Effect.promise(() => upload(url, { "x-tenant": "other" }, 32 * KiB, 0, 3_000))
        expect(refused).not.toBe("no answer")
        const r = refused as Early
        expect([r.status, r.sent, r.headers["connection"], r.headers["retry-after"]]).toEqual([503, 0, "close", "1"])
        expect(JSON.parse(r.body)).toEqual({ error: "busy", message: `request bodies being read are at ${256 * KiB} bytes` })
        expect(outcome(yield* metrics(edge), "busy")).toBe(1)
        // Requests with no body to read are not held back by the stalled ones.
        expect((yield* Effect.promise(() => edge.fetch("/healthz"))).status).toBe(200)

        // The request timeout ends the stalled uploads; their reservations go with them and ingest takes hooks again.
        const ends = yield* Effect.promise(() => Promise.all(slow.map((s) => s.answer)))
        for (const e of ends) expect([408, "closed"]).toContain(e)
        const after = yield* ingest(edge, "other")
        expect(after.status).toBe(202)
        for (const s of slow) s.destroy()
      })
    ), { timeout: 60_000 })

  it.live("past http.maxConnections a new connection is closed unanswered", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(adminConfig({ http: { maxConnections: 4 } }))
        const { hostname, port } = new URL(edge.url)
        const open = () =>
          new Promise<net.Socket>((resolve, reject) => {
            const socket = net.connect(Number(port), hostname, () => resolve(socket))
            socket.on("error", reject)
          })
        /** A GET /healthz on a fresh connection: its status line, or "closed" if the server closed it unanswered. */
        const probe = () =>
          new Promise<string>((resolve) => {
            let answer = ""
            const socket = net.connect(Number(port), hostname, () => socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
            socket.on("data", (c: Buffer) => (answer += c.toString("latin1")))
            socket.on("error", () => {})
            socket.on("close", () => resolve(answer === "" ? "closed" : answer.split("\r\n")[0]!))
          })
        const idle = yield* Effect.promise(() => Promise.all(Array.from({ length: 4 }, open)))
        yield* sleep(100)
        expect(yield* Effect.promise(probe)).toBe("closed")
        idle[0]!.destroy()
        yield* sleep(200)
        expect(yield* Effect.promise(probe)).toBe("HTTP/1.1 200 OK")
        for (const s of idle) s.destroy()
      })
    ), { timeout: 30_000 })

  it.live("the demo sink is off unless the configuration asks for it", () =>
    Effect.gen(function* () {
      const post = (c: Cfg.Config) =>
        Effect.scoped(
          Effect.gen(function* () {
            const edge = yield* startEdge(c)
            return (yield* Effect.promise(() => edge.fetch(Cfg.DEMO_SINK_PATH, { method: "POST", body: "{}" }))).status
          })
        )
      // The built-in default configuration routes its demo source to it: served.
      expect(Cfg.defaults.http.demoSink).toBe("auto")
      expect(yield* post(configOf({}))).toBe(204)
      // A configuration with its own sinks does not ask: not served.
      expect(yield* post(adminConfig())).toBe(404)
      // Unless it says so.
      expect(yield* post(adminConfig({ http: { demoSink: true } }))).toBe(204)
      expect(yield* post(configOf({ http: { demoSink: false }, sources: [{ id: "s", routes: ["a"] }], sinks: [{ name: "a", url: "http://127.0.0.1:9/a" }] }))).toBe(404)
      // A sink that delivers to a demo sink that is off is refused at start.
      const off = Cfg.decode({ http: { demoSink: false } })
      expect(Result.isFailure(off)).toBe(true)
      if (Result.isFailure(off)) expect(String(off.failure)).toContain("the demo sink is off (http.demoSink: false)")
    }), { timeout: 60_000 })
})
