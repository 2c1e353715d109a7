/**
 * The admission's operational events (issue 28; docs/api.md "Operational events"): a real
 * `ankusa serve` child on RocksDB, a recording operations sink on 127.0.0.1. `tenant.quota_reached`
 * is sent once per crossing of a tenant's `maxQueuedBytes`; `store.disk_reserve` when the disk
 * reserve stops ingest and when it resumes, driven by a reload of `store.minFreeBytes` (a reserve
 * above any disk's size) rather than by filling a disk.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { leftovers, runAnkusa, servingAddress } from "./support/node-child.js"
import { type RecordingSink, startRecordingSink, verifies } from "./support/record-sink.js"

const TOKEN = "operations-admin-token-0001"
const OPS_SECRET = "whsec_" + Buffer.from("operations-secret-0123456789").toString("base64")

const { children, dirs, closers: sinks } = leftovers(afterEach)

const configOf = (ops: RecordingSink, down: RecordingSink, extra: Record<string, unknown> = {}) => ({
  sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["down"] }],
  sinks: [
    { name: "ops", url: `${ops.url}/ops`, secret: OPS_SECRET, retry: { delaysMs: [200, 200, 200], jitter: 0 } },
    { name: "down", url: `${down.url}/down`, retry: { delaysMs: Array.from({ length: 50 }, () => 200), jitter: 0 } }
  ],
  adminTokens: [{ name: "ops", token: TOKEN, tenants: "*" }],
  operations: { sink: "ops" },
  // No breaker in the way: the `down` sink's rows stay queued and retried, and drain at once when it recovers.
  breaker: { minCalls: 1_000_000 },
  http: { demoSink: false },
  pipeline: { tickMs: 20 },
  store: { minFreeBytes: 0 },
  ...extra
})

const serve = async (config: object) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-operations-"))
  dirs.push(dir)
  const file = path.join(dir, "ankusa.json")
  fs.writeFileSync(file, JSON.stringify(config))
  const child = runAnkusa(["serve", "--config", file, "--data-dir", path.join(dir, "data"), "--port", "0"])
  children.push(child)
  return { url: await servingAddress(child), file }
}

const sinkOf = async (status: number) => {
  const s = await startRecordingSink(status)
  sinks.push(s)
  return s
}

const hook = (url: string, tenant: string, i: number) =>
  fetch(`${url}/v1/hooks/shop`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-tenant": tenant },
    body: JSON.stringify({ i, pad: "x".repeat(400) })
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as { error?: string } }))

const reload = async (url: string) => {
  const r = await fetch(`${url}/v1/config/reload`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } })
  expect(r.status).toBe(200)
}

const until = async (what: string, ok: () => boolean | Promise<boolean>, ms = 20_000) => {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** The events the operations sink took, each verified against the sink's secret. */
const eventsOf = (s: RecordingSink, type: string) =>
  s.got
    .filter((g) => g.path === "/ops")
    .map((g) => {
      expect(verifies(g, OPS_SECRET)).toBe(true)
      const e: Record<string, string | null> = JSON.parse(g.body)
      e["id"] = String(g.headers["webhook-id"])
      return e
    })
    .filter((e) => e["type"] === type)

/** Hooks until the tenant is refused with 429 tenant_quota; how many were taken. */
const fillToQuota = async (url: string, tenant: string) => {
  let taken = 0
  for (let i = 0; i < 100; i++) {
    const r = await hook(url, tenant, i)
    if (r.status === 429) {
      expect(r.body.error).toBe("tenant_quota")
      return taken
    }
    expect(r.status).toBe(202)
    taken++
  }
  throw new Error("the quota was never reached")
}

describe("operational events", () => {
  it("a tenant reaching its queue quota is told once per crossing", { timeout: 90_000 }, async () => {
    const ops = await sinkOf(204)
    const down = await sinkOf(503)
    const node = await serve(configOf(ops, down, { tenants: { limits: { maxQueuedBytes: 4_000 } } }))

    expect(await fillToQuota(node.url, "acme")).toBeGreaterThan(1)
    // More refusals while still at the quota: no second event.
    for (let i = 0; i < 5; i++) expect((await hook(node.url, "acme", i)).status).toBe(429)
    await until("the first quota event", () => eventsOf(ops, "tenant.quota_reached").length === 1)
    const [first] = eventsOf(ops, "tenant.quota_reached")
    expect(first).toMatchObject({ tenant: "acme", destination: null })
    expect(first!["reason"]).toMatch(/reached tenants\.limits\.maxQueuedBytes 4000/)
    expect(Number.isNaN(Date.parse(first!["at"]!))).toBe(false)
    // Another tenant is not at its quota: nothing told for it.
    expect((await hook(node.url, "other", 0)).status).toBe(202)

    // The sink recovers, the queue drains; the next hook is taken, and the edge sees the bytes under the rearm share.
    down.status = 204
    await until("acme's queue drained", async () => {
      const t = await fetch(`${node.url}/v1/tenants/acme`, { headers: { authorization: `Bearer ${TOKEN}` } })
      return ((await t.json()) as { bytes: number }).bytes === 0
    })
    expect((await hook(node.url, "acme", 0)).status).toBe(202)
    await new Promise((r) => setTimeout(r, 1_000))
    expect(eventsOf(ops, "tenant.quota_reached")).toHaveLength(1)

    // A second crossing is a second event.
    down.status = 503
    await fillToQuota(node.url, "acme")
    await until("the second quota event", () => eventsOf(ops, "tenant.quota_reached").length === 2)
    const second = eventsOf(ops, "tenant.quota_reached")[1]!
    expect(second).toMatchObject({ tenant: "acme", destination: null })
    expect(second["id"]).not.toBe(first!["id"])
    await new Promise((r) => setTimeout(r, 500))
    expect(eventsOf(ops, "tenant.quota_reached").map((e) => e["tenant"])).toEqual(["acme", "acme"])
  })

  it("the disk reserve stopping and resuming ingest is told, and the stop event is written under the reserve", { timeout: 90_000 }, async () => {
    const ops = await sinkOf(204)
    const down = await sinkOf(204)
    const config = configOf(ops, down)
    const node = await serve(config)
    expect((await hook(node.url, "acme", 0)).status).toBe(202)

    // A reserve larger than any disk, by reload: ingest stops within a poll.
    fs.writeFileSync(node.file, JSON.stringify({ ...config, store: { minFreeBytes: Number.MAX_SAFE_INTEGER } }))
    await reload(node.url)
    await until("ingest answers disk_reserve", async () => (await hook(node.url, "acme", 1)).status === 503)
    // The event is delivered while ingest is still refused.
    await until("the stop event", () => eventsOf(ops, "store.disk_reserve").length === 1)
    const r = await hook(node.url, "acme", 2)
    expect([r.status, r.body.error]).toEqual([503, "disk_reserve"])
    const [stopped] = eventsOf(ops, "store.disk_reserve")
    expect(stopped).toMatchObject({ tenant: null, destination: null, ingest: "stopped" })
    expect(stopped!["reason"]).toMatch(/under store\.minFreeBytes 9007199254740991/)

    fs.writeFileSync(node.file, JSON.stringify(config))
    await reload(node.url)
    await until("ingest takes hooks again", async () => (await hook(node.url, "acme", 3)).status === 202)
    await until("the resume event", () => eventsOf(ops, "store.disk_reserve").length === 2)
    const resumed = eventsOf(ops, "store.disk_reserve")[1]!
    expect(resumed).toMatchObject({ tenant: null, destination: null, ingest: "resumed" })
    expect(Date.parse(resumed["at"]!)).toBeGreaterThanOrEqual(Date.parse(stopped!["at"]!))
    await new Promise((r) => setTimeout(r, 1_500))
    expect(eventsOf(ops, "store.disk_reserve").map((e) => e["ingest"])).toEqual(["stopped", "resumed"])
  })
})
