/**
 * `ankusa_breaker_state{destination}` of tenant endpoints (issue 28; docs/delivery.md "Failing
 * destinations"): a real `ankusa serve` child on RocksDB, 105 endpoints at a closed loopback port
 * and one at a real sink. The gauge tick reports the top TOP_TENANTS (100) endpoints by failed
 * calls since their last success, the tenant gauges' cardinality rule: never more, and an endpoint
 * that recovers leaves /metrics. Shared sinks keep their series.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { closedPort } from "../bench/lib/proc.js"
import { TOP_TENANTS } from "../src/observability/gauges.js"
import { leftovers, runAnkusa, servingAddress } from "./support/node-child.js"
import { startRecordingSink } from "./support/record-sink.js"

const TOKEN = "breaker-metrics-token-0001"
const FAILING = 105

const { children, dirs, closers: sinks } = leftovers(afterEach)

const api = async (url: string, method: string, route: string, body?: unknown) => {
  const r = await fetch(`${url}${route}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await r.text()
  return { status: r.status, body: (text === "" ? {} : JSON.parse(text)) as any }
}

const hook = (url: string, i: number) =>
  fetch(`${url}/v1/hooks/shop`, { method: "POST", headers: { "content-type": "application/json", "x-tenant": "acme" }, body: JSON.stringify({ i }) })

/** The endpoints' `ankusa_breaker_state` series, and the shared sinks'. */
const breakerSeries = async (url: string) => {
  const text = await (await fetch(`${url}/metrics`)).text()
  const endpoints = new Map<string, number>()
  const shared = new Map<string, number>()
  for (const m of text.matchAll(/^ankusa_breaker_state\{destination="([^"]+)"\} (\S+)$/gm)) {
    ;(m[1]!.startsWith("endpoint:") ? endpoints : shared).set(m[1]!, Number(m[2]))
  }
  return { endpoints, shared }
}

const until = async (what: string, ok: () => boolean | Promise<boolean>, ms = 30_000) => {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe("breaker metrics", () => {
  it("the top endpoints by failures have a breaker state series, at most TOP_TENANTS of them", { timeout: 120_000 }, async () => {
    const good = await startRecordingSink(204)
    sinks.push(good)
    const port = await closedPort()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-breaker-metrics-"))
    dirs.push(dir)
    const file = path.join(dir, "ankusa.json")
    fs.writeFileSync(
      file,
      JSON.stringify({
        sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["tenant-endpoints", "shared"] }],
        sinks: [{ name: "shared", url: `${good.url}/shared` }],
        adminTokens: [{ name: "ops", token: TOKEN, tenants: "*" }],
        endpoints: { allowNetworks: ["127.0.0.0/8"] },
        tenants: { maxEndpoints: 200 },
        breaker: { minCalls: 2, openMs: 500, maxOpenMs: 1_000 },
        gauges: { intervalMs: 200 },
        http: { demoSink: false },
        pipeline: { tickMs: 20 }
      })
    )
    const child = runAnkusa(["serve", "--config", file, "--data-dir", path.join(dir, "data"), "--port", "0"])
    children.push(child)
    const url = await servingAddress(child)
    expect((await hook(url, 0)).status).toBe(202)
    const failing: Array<string> = []
    for (let i = 0; i < FAILING; i++) {
      const r = await api(url, "POST", "/v1/tenants/acme/endpoints", { url: `http://127.0.0.1:${port}/e${i}` })
      expect(r.status).toBe(201)
      failing.push(`endpoint:${r.body.id}`)
    }
    const healthy = await api(url, "POST", "/v1/tenants/acme/endpoints", { url: `${good.url}/healthy` })
    expect(healthy.status).toBe(201)
    for (let i = 1; i <= 3; i++) expect((await hook(url, i)).status).toBe(202)

    // Every failing endpoint's breaker opens (one with a single failure so far is still closed, so wait
    // for the reported ones to be open or half-open); the tick reports TOP_TENANTS of them, never more.
    await until("the failing endpoints reported open", async () => {
      const s = (await breakerSeries(url)).endpoints
      return s.size === TOP_TENANTS && [...s.values()].every((state) => state === 1 || state === 2)
    })
    const seen = await breakerSeries(url)
    for (const [destination, state] of seen.endpoints) {
      expect(failing).toContain(destination)
      expect([1, 2]).toContain(state)
    }
    expect(seen.endpoints.has(`endpoint:${healthy.body.id}`)).toBe(false)
    expect(seen.shared.get("shared")).toBe(0)
    // The healthy endpoint's three deliveries run beside the failing ones' and may still be in flight.
    await until("the healthy endpoint's deliveries", () => good.got.filter((g) => g.path === "/healthy").length >= 3)

    // One failing endpoint reported now is pointed at the sink: its probe's 2xx closes its breaker and it leaves /metrics.
    const moved = [...seen.endpoints.keys()][0]!
    const id = moved.slice("endpoint:".length)
    expect((await api(url, "PATCH", `/v1/tenants/acme/endpoints/${id}`, { url: `${good.url}/moved` })).status).toBe(200)
    await until("the moved endpoint delivered", () => good.got.some((g) => g.path === "/moved"))
    await until("the moved endpoint out of /metrics", async () => !(await breakerSeries(url)).endpoints.has(moved))
    for (let i = 0; i < 10; i++) {
      const now = await breakerSeries(url)
      expect(now.endpoints.size).toBeLessThanOrEqual(TOP_TENANTS)
      expect(now.endpoints.has(moved)).toBe(false)
      await new Promise((r) => setTimeout(r, 100))
    }
  })
})
