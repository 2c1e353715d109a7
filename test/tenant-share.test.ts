/**
 * Issue 39's slow endpoints (docs/delivery.md "A tenant's share"): a tenant whose endpoints take
 * every call they are allowed and answer slowly holds at most its share of `pipeline.maxInflight`,
 * so another tenant's rows still find slots. A real `ankusa serve` child on RocksDB, endpoints
 * created over the API, a slow receiver and a recording sink on 127.0.0.1.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo, Socket } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import fc from "fast-check"
import { DEFAULT_LIMITS, makeFair, shareOf } from "../src/delivery/fair.js"
import { type NodeChild, runAnkusa, servingAddress } from "./support/node-child.js"
import { type RecordingSink, startRecordingSink } from "./support/record-sink.js"

const TOKEN = "share-admin-token-0001"
/** Under the endpoints' call timeout (10 s): every slow call succeeds, so no breaker trips. */
const SLOW_MS = 8_000

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

/** A receiver that answers 200 after SLOW_MS, and how many calls it holds open. */
const slowReceiver = () =>
  new Promise<{ readonly url: string; readonly open: () => number }>((resolve) => {
    let open = 0
    const sockets = new Set<Socket>()
    const server: Server = createServer((req, res) => {
      open++
      req.resume()
      const t = setTimeout(() => {
        open--
        res.writeHead(200).end()
      }, SLOW_MS)
      res.on("close", () => clearTimeout(t))
    })
    server.on("connection", (s) => {
      sockets.add(s)
      s.on("close", () => sockets.delete(s))
    })
    server.listen(0, "127.0.0.1", () => {
      cleanups.push(
        () =>
          new Promise<void>((done) => {
            for (const s of sockets) s.destroy()
            server.close(() => done())
          })
      )
      resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, open: () => open })
    })
  })

const serve = async (): Promise<{ readonly url: string; readonly child: NodeChild }> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-share-"))
  const file = path.join(dir, "ankusa.json")
  fs.writeFileSync(
    file,
    JSON.stringify({
      sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["tenant-endpoints"] }],
      sinks: [],
      adminTokens: [{ name: "ops", token: TOKEN, tenants: "*" }],
      endpoints: { allowNetworks: ["127.0.0.0/8"] },
      http: { demoSink: false },
      pipeline: { tickMs: 20 },
      log: { level: "warning" }
    })
  )
  const child = runAnkusa(["serve", "--config", file, "--data-dir", dir, "--port", "0"])
  cleanups.push(async () => {
    child.child.kill("SIGTERM")
    await child.exited(30_000).catch(() => child.kill())
    fs.rmSync(dir, { recursive: true, force: true })
  })
  return { url: await servingAddress(child), child }
}

const api = async (url: string, method: string, route: string, body?: unknown) => {
  const r = await fetch(`${url}${route}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await r.text()
  return { status: r.status, body: (text === "" ? {} : JSON.parse(text)) as any }
}

const hook = async (url: string, tenant: string, body: object) => {
  const r = await fetch(`${url}/v1/hooks/shop`, { method: "POST", headers: { "content-type": "application/json", "x-tenant": tenant }, body: JSON.stringify(body) })
  expect(r.status).toBe(202)
  return ((await r.json()) as { id: string }).id
}

const until = async (what: string, ok: () => boolean | Promise<boolean>, ms = 30_000) => {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe("a tenant's share of the pipeline (issue 39)", () => {
  it("a tenant's slow endpoints do not hold back another tenant's endpoints", { timeout: 120_000 }, async () => {
    const slow = await slowReceiver()
    const fast: RecordingSink = await startRecordingSink(204)
    cleanups.push(() => fast.close())
    const node = await serve()
    // SLOWCO: 4 endpoints at the most concurrency allowed, each row waiting SLOW_MS for its answer.
    for (let i = 0; i < 4; i++) expect((await api(node.url, "POST", "/v1/tenants/slowco/endpoints", { url: `${slow.url}/e${i}`, concurrency: 64 })).status).toBe(201)
    expect((await api(node.url, "POST", "/v1/tenants/acme/endpoints", { url: `${fast.url}/acme` })).status).toBe(201)
    // 400 hooks fan out to 1,600 rows: more than the pipeline's 1,024 slots.
    for (let i = 0; i < 400; i += 20) await Promise.all(Array.from({ length: 20 }, (_, j) => hook(node.url, "slowco", { i: i + j })))
    await until("the slow receiver holds every call SLOWCO's endpoints allow", () => slow.open() === 256)
    await until("SLOWCO's rows fill its share", async () => (await api(node.url, "GET", "/v1/tenants/slowco")).body.inflight >= 400)
    const sent: Array<{ readonly id: string; readonly at: number }> = []
    for (let i = 0; i < 20; i++) {
      const at = Date.now()
      sent.push({ id: await hook(node.url, "acme", { i }), at })
      await new Promise((r) => setTimeout(r, 100))
    }
    await until("every ACME hook delivered", () => fast.got.length === sent.length, 20_000)
    const arrived = new Map(fast.got.map((g) => [String(g.headers["webhook-id"]), g.at]))
    const delays = sent.map((s) => arrived.get(s.id)! - s.at)
    // Well under one slow call: ACME's rows never wait for SLOWCO's to finish (a second is 50 ticks of margin).
    expect(Math.max(...delays)).toBeLessThan(1_000)
    // SLOWCO holds at most its share alone (pipeline.tenantSharePercent 50 of maxInflight 1,024).
    const held = (await api(node.url, "GET", "/v1/tenants/slowco")).body.inflight
    expect(held).toBeLessThanOrEqual(512)
  })
})

describe("a tenant's share of the pipeline, as planned (fair.ts)", () => {
  const pool = { slots: 1_024, maxPercent: 50 }

  it("a share is the weight's part, never under one claim quantum, never over the percent", () =>
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 0, max: 100_000 }), fc.integer({ min: 1, max: 256 }), (weight, others, quantum) => {
        const weights = weight + others
        const share = shareOf(pool, weight, weights, quantum)
        const part = Math.floor((pool.slots * weight) / weights)
        expect(share).toBeLessThanOrEqual(512)
        expect(share).toBeGreaterThanOrEqual(Math.min(512, part, quantum * weight))
        expect(share).toBe(Math.min(512, Math.max(part, quantum * weight)))
      })
    ))

  it("with 100 tenants wanting rows, a claim offers a tenant a whole quantum and holds back one that holds it", () => {
    const fair = makeFair(1_000, 64, () => 0, pool)
    for (let ord = 1; ord <= 100; ord++) fair.join(ord)
    const limits = () => DEFAULT_LIMITS
    const first = fair.plan(512, 1 << 30, 0, limits)
    // Their parts are 10 rows each (1,024 / 100): each offer is still a quantum.
    expect(first.slice(0, 8).map((p) => p.limit)).toEqual(Array(8).fill(64))
    const got = first.map((p, i) => ({ ord: p.ord, rows: i < 8 ? 64 : 0, drained: false }))
    fair.settle(first, got, 0, limits)
    // The eight that hold a quantum each are not offered more until their rows settle.
    const held = new Set(first.slice(0, 8).map((p) => p.ord))
    const next = fair.plan(512, 1 << 30, 0, limits)
    expect(next.length).toBeGreaterThan(0)
    expect(next.filter((p) => held.has(p.ord))).toEqual([])
  })
})

