/**
 * Failing destinations (issue 28; docs/delivery.md "Failing destinations"): each destination's
 * circuit breaker, on a real `ankusa serve` child (RocksDB) with real sinks on 127.0.0.1.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { leftovers, runAnkusa, servingAddress } from "./support/node-child.js"
import { type RecordingSink as Sink, startRecordingSink } from "./support/record-sink.js"

const TOKEN = "breaker-admin-token-0001"

const { children, dirs, closers: sinks } = leftovers(afterEach)

const serve = async (config: object) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-breaker-"))
  const file = path.join(dir, "ankusa.json")
  fs.writeFileSync(file, JSON.stringify(config))
  const child = runAnkusa(["serve", "--config", file, "--data-dir", dir, "--port", "0"])
  children.push(child)
  dirs.push(dir)
  return { child, url: await servingAddress(child) }
}
const sink = async (status = 500) => {
  const s = await startRecordingSink(status)
  sinks.push(s)
  return s
}

/** Retries every 100 ms, thirty times: a row is never dead in these tests. */
const RETRY = { delaysMs: Array.from({ length: 30 }, () => 100), jitter: 0 }

const configOf = (down: Sink, up: Sink, breaker: Record<string, number>) => ({
  sources: [
    { id: "stuck", tenant: "stuck", routes: ["down"] },
    { id: "quiet", tenant: "quiet", routes: ["up"] }
  ],
  sinks: [
    { name: "down", url: `${down.url}/down`, concurrency: 2, retry: RETRY },
    { name: "up", url: `${up.url}/up`, concurrency: 2, retry: RETRY }
  ],
  adminTokens: [{ name: "ops", token: TOKEN, tenants: "*" }],
  breaker,
  http: { demoSink: false },
  pipeline: { tickMs: 20 },
  log: { level: "info" }
})

const post = (url: string, source: string, body: object) =>
  fetch(`${url}/v1/hooks/${source}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })

const metric = async (url: string, series: string) => {
  const text = await (await fetch(`${url}/metrics`)).text()
  for (const line of text.split("\n")) if (line.startsWith(series + " ")) return Number(line.slice(series.length + 1))
  return undefined
}

const until = async (what: string, ok: () => boolean | Promise<boolean>, ms = 20_000) => {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const OPEN = 'ankusa_breaker_state{destination="down"}'

describe("breaker", () => {
  it("a failing destination opens its breaker and stops being called", { timeout: 60_000 }, async () => {
    const down = await sink(500)
    const up = await sink(204)
    const node = await serve(configOf(down, up, { minCalls: 4, failureRatio: 0.7, windowMs: 10_000, openMs: 60_000 }))
    for (let i = 0; i < 10; i++) expect((await post(node.url, "stuck", { i })).status).toBe(202)
    await until("the breaker to open", async () => (await metric(node.url, OPEN)) === 1)
    // Calls on the wire when it opened may still end; none starts after.
    await sleep(200)
    const seen = down.got.length
    await sleep(1_500)
    expect(down.got.length).toBe(seen)
    // Without the breaker, 10 rows retried every 100 ms would have made dozens of calls by now.
    // minCalls failed calls trip it; the tripping call has ended, so at most concurrency − 1 others
    // were on the wire. A row admitted before the trip and read after waits behind the breaker.
    expect(seen).toBeLessThanOrEqual(4 + 2 - 1)
    expect(await metric(node.url, "ankusa_breaker_trips_total")).toBe(1)
    expect(node.child.stdout()).toContain("breaker opened")
  })

  it("an open breaker uses no attempts and probes once after openMs", { timeout: 60_000 }, async () => {
    const down = await sink(500)
    const up = await sink(204)
    const OPEN_MS = 1_000
    const node = await serve(configOf(down, up, { minCalls: 4, failureRatio: 0.7, windowMs: 10_000, openMs: OPEN_MS }))
    for (let i = 0; i < 10; i++) expect((await post(node.url, "stuck", { i })).status).toBe(202)
    await until("the breaker to open", async () => (await metric(node.url, OPEN)) === 1)
    const opened = Date.now()
    await sleep(150)
    const before = down.got.length
    // The first probe comes after openMs; it fails, so the next opening is twice as long: one call in between.
    await until("the probe", () => down.got.length === before + 1, 5_000)
    // Every call before it arrived before the trip; the probe comes openMs after the trip at the earliest.
    expect(down.got[before]!.at - down.got[before - 1]!.at).toBeGreaterThanOrEqual(OPEN_MS)
    expect(Date.now() - opened).toBeLessThan(OPEN_MS * 3)
    await sleep(OPEN_MS + 500)
    expect(down.got.length).toBe(before + 1)
    expect(await metric(node.url, "ankusa_breaker_trips_total")).toBe(2)
    // No attempt was used while it was open: the rows are still queued (none dead), every call counted once.
    const counters = (await (await fetch(`${node.url}/v1/tenants/stuck`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as Record<string, number>
    expect(counters["dead"]).toBe(0)
    expect(counters["pending"]! + counters["scheduled"]! + counters["inflight"]!).toBe(10)
  })

  it("a probe's 2xx closes the breaker and the backlog drains", { timeout: 60_000 }, async () => {
    const down = await sink(500)
    const up = await sink(204)
    const node = await serve(configOf(down, up, { minCalls: 4, failureRatio: 0.7, windowMs: 10_000, openMs: 800 }))
    for (let i = 0; i < 30; i++) expect((await post(node.url, "stuck", { i })).status).toBe(202)
    await until("the breaker to open", async () => (await metric(node.url, OPEN)) === 1)
    down.status = 204
    await until("the breaker to close", async () => (await metric(node.url, OPEN)) === 0, 10_000)
    await until("the backlog delivered", () => new Set(down.got.filter((c) => c.at > 0).map((c) => JSON.parse(c.body).i)).size === 30, 20_000)
    expect(node.child.stdout()).toContain("breaker closed")
  })

  it("a breaker on one destination does not slow another tenant's destinations", { timeout: 60_000 }, async () => {
    const down = await sink(500)
    const up = await sink(204)
    const node = await serve(configOf(down, up, { minCalls: 4, failureRatio: 0.7, windowMs: 10_000, openMs: 500 }))
    for (let i = 0; i < 200; i++) expect((await post(node.url, "stuck", { i })).status).toBe(202)
    const delays: Array<number> = []
    for (let i = 0; i < 20; i++) {
      const sent = Date.now()
      expect((await post(node.url, "quiet", { i })).status).toBe(202)
      await until(`quiet hook ${i}`, () => up.got.some((c) => JSON.parse(c.body).i === i))
      delays.push(up.got.find((c) => JSON.parse(c.body).i === i)!.at - sent)
      await sleep(50)
    }
    // The stuck tenant's breaker opened, closed for probes and opened again meanwhile; quiet's calls went on.
    expect(await metric(node.url, "ankusa_breaker_trips_total")).toBeGreaterThanOrEqual(1)
    expect(Math.max(...delays)).toBeLessThan(1_000)
  })
})
