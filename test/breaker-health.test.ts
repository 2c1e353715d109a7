/**
 * Breakers count health, not verdicts (issue 39 item 4; docs/delivery.md "Failing destinations"):
 * which answers open a breaker, a probe that is never called, the breaker and the auto-disable
 * clock across reloads and edits, and open breakers beside `endpoints.maxPools`. The pipeline on
 * the memory store with real sinks on 127.0.0.1, and a real `ankusa serve` child for endpoints.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { makeBreaker, type Breaker } from "../src/delivery/breaker.js"
import { makeRemembered } from "../src/delivery/health.js"
import { makeAdmission, makePlaces, type PlacedSink } from "../src/delivery/sink-places.js"
import * as Queue from "../src/queue/queue.js"
import { Store, StoreError, type StoreShape } from "../src/store/store.js"
import { leftovers, runAnkusa, servingAddress } from "./support/node-child.js"
import { type RecordingSink, startRecordingSink } from "./support/record-sink.js"
import { makeIngest, memoryWorld, sinkOf, startPipeline, until, type World } from "./pipeline-world.js"
import { startSink } from "./sink-server.js"

const TOKEN = "breaker-health-token-0001"
const { children, dirs, closers } = leftovers(afterEach)

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const waitFor = async (what: string, ok: () => boolean | Promise<boolean>, ms = 20_000) => {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(20)
  }
}

/** A memory world whose store fails the next `failWrites.n` writes. */
const failingWorld = Effect.gen(function* () {
  const base = yield* memoryWorld
  const failWrites = { n: 0 }
  const store: StoreShape = {
    ...base.store,
    write: (batch, opts) =>
      Effect.suspend(() => {
        if (failWrites.n === 0) return base.store.write(batch, opts)
        failWrites.n -= 1
        return Effect.fail(new StoreError({ op: "write", message: "injected" }))
      })
  }
  const context = yield* Layer.build(Queue.layer.pipe(Layer.provideMerge(Layer.succeed(Store, store))))
  return { world: { store, queue: Context.get(context, Queue.Queue), context } satisfies World, failWrites }
})

describe("breakers count health (issue 39)", () => {
  it.live("a 4xx answer other than 408 and 429 never opens a breaker", () =>
    Effect.gen(function* () {
      const gone = yield* startSink(() => ({ status: 410 }))
      const bad = yield* startSink(() => ({ status: 400 }))
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const HOOKS = 20
      const hooks = yield* ingest([
        ...Array.from({ length: HOOKS }, () => ({ tenant: "t", sinks: ["gone"], at: Date.now() - 1_000 })),
        ...Array.from({ length: HOOKS }, () => ({ tenant: "t", sinks: ["bad"], at: Date.now() - 1_000 }))
      ])
      const minCalls = 2
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 20,
        graceMs: 0,
        // Open for a minute past minCalls failures: a breaker that opened would hold the rest past the test.
        breaker: { minCalls, failureRatio: 0.5, windowMs: 60_000, openMs: 60_000, maxOpenMs: 600_000 },
        sinks: [sinkOf("gone", gone.url), sinkOf("bad", bad.url, { retry: { delaysMs: [20, 20, 20], jitter: 0, maxRetryAfterMs: 5_000 } })]
      })
      const ord = hooks[0]!.ord
      yield* until("every hook settled in the DLQ", Effect.map(w.queue.counters(ord), (c) => c.dead === 2 * HOOKS), 20_000)
      // Each 410 went to the DLQ at its first call; each 400 was retried on its schedule, then dead-lettered.
      expect(gone.received).toHaveLength(HOOKS)
      expect(bad.received).toHaveLength(4 * HOOKS)
      expect(gone.received.length).toBeGreaterThan(minCalls * 5)
      expect(yield* w.queue.counters(ord)).toMatchObject({ pending: 0, scheduled: 0, inflight: 0 })
      for (const b of pipeline.breakers()) expect(b, b.destination).toMatchObject({ state: "closed", trips: 0 })
    })
  )

  it.live("a probe that was never called is released and the breaker probes again", () =>
    Effect.gen(function* () {
      let healthy = false
      const s = yield* startSink(() => ({ status: healthy ? 204 : 500 }))
      const other = yield* startSink()
      const { world: w, failWrites } = yield* failingWorld
      const ingest = makeIngest(w.store)
      const [first] = yield* ingest(Array.from({ length: 2 }, () => ({ tenant: "t", sinks: ["s"], at: Date.now() - 1_000 })))
      const ord = first!.ord
      const openMs = 300
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        graceMs: 0,
        breaker: { minCalls: 2, failureRatio: 0.5, windowMs: 60_000, openMs, maxOpenMs: openMs },
        // A failed row comes back far past the test: only the rows below are due. A second sink (no
        // rows) makes the claim admit row by row as it reads, before its write.
        sinks: [sinkOf("s", s.url, { retry: { delaysMs: [600_000], jitter: 0, maxRetryAfterMs: 5_000 } }), sinkOf("other", other.url)]
      })
      yield* pipeline.tick
      yield* until("the two calls failed and their breaker opened", Effect.map(pipeline.inflight, (n) => n === 0 && s.received.length === 2 && pipeline.breakers()[0]!.state === "open"))
      yield* ingest(Array.from({ length: 3 }, () => ({ tenant: "t", sinks: ["s"], at: Date.now() - 1 })))
      yield* Effect.sleep(`${openMs + 100} millis`)
      healthy = true
      // The probe's claim fails: its row is given back, never called.
      failWrites.n = 1
      expect(Exit.isFailure(yield* Effect.exit(pipeline.tick))).toBe(true)
      expect(failWrites.n).toBe(0)
      expect(s.received).toHaveLength(2)
      expect(pipeline.breakers()[0]!.state).toBe("half-open")
      // The next ticks admit another probe; its 2xx closes the breaker and the three rows are delivered.
      yield* until("the three rows delivered", Effect.gen(function* () {
        yield* pipeline.tick
        return (yield* w.queue.counters(ord)).pending === 0 && s.received.length === 5
      }))
      expect(pipeline.breakers()[0]).toMatchObject({ state: "closed", trips: 1 })
    })
  )

  it("a row dropped before its call gives back its place and its probe", () => {
    const breaker: Breaker = { ...makeBreaker({ minCalls: 1, failureRatio: 0.5, windowMs: 1_000, openMs: 100, maxOpenMs: 100 }), state: "open", openUntil: 0 }
    const sink: PlacedSink = { places: makePlaces(1, 4), breaker, running: 0, retired: false, options: { name: "endpoint:ep_1" } }
    const admission = makeAdmission({ get: () => sink, all: () => [sink], none: () => false, unopened: () => 0, anyUnopened: () => false }, () => 1_000)
    expect(admission.admit(sink, 1, 0)).toBe(true)
    expect(breaker).toMatchObject({ state: "half", probing: true })
    // Half-open with its probe out: the next row waits (its tenant parked).
    expect(admission.admit(sink, 2, 0)).toBe(false)
    admission.endClaim(true)
    // Its endpoint was deleted before the call: the row is dead-lettered, never called.
    admission.dropped("endpoint:ep_1", 1)
    expect(sink.places.held).toBe(0)
    expect(breaker.probing).toBe(false)
    expect(admission.admit(sink, 2, 0)).toBe(true)
    expect(breaker.probing).toBe(true)
  })

  it("the remembered breakers are bounded, and those closed are forgotten first", () => {
    const settings = { minCalls: 1, failureRatio: 0.5, windowMs: 1_000, openMs: 100, maxOpenMs: 100 }
    const health = (state: Breaker["state"], since?: number) => ({ url: "http://127.0.0.1/x", breaker: { ...makeBreaker(settings), state }, failing: { since, disabling: false } })
    const MAX = 4
    const r = makeRemembered(MAX)
    // A closed breaker with no failing clock has nothing to remember.
    r.keep("healthy", health("closed"))
    expect(r.size()).toBe(0)
    r.keep("open-0", health("open"))
    r.keep("clock-0", health("closed", 1))
    r.keep("open-1", health("open"))
    r.keep("clock-1", health("closed", 1))
    expect(r.size()).toBe(MAX)
    r.get("clock-0")
    for (let i = 2; i < 6; i++) r.keep(`open-${i}`, health("open"))
    expect(r.size()).toBe(MAX)
    // The closed ones went first (the least recently used first), then the oldest open ones.
    expect(r.entries().map(([name]) => name)).toEqual(["open-2", "open-3", "open-4", "open-5"])
  })
})

describe("breakers and endpoint pools (issue 39)", () => {
  const serve = async (config: object) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-breaker-health-"))
    dirs.push(dir)
    const file = path.join(dir, "ankusa.json")
    const write = (c: object) => fs.writeFileSync(file, JSON.stringify(c))
    write(config)
    const child = runAnkusa(["serve", "--config", file, "--data-dir", path.join(dir, "data"), "--port", "0"])
    children.push(child)
    return { url: await servingAddress(child), child }
  }
  const configOf = (extra: Record<string, unknown>) => ({
    sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["tenant-endpoints"] }],
    sinks: [],
    adminTokens: [{ name: "ops", token: TOKEN, tenants: "*" }],
    http: { demoSink: false },
    pipeline: { tickMs: 20 },
    log: { level: "info" },
    ...extra
  })
  const sink = async (status: number) => {
    const s = await startRecordingSink(status)
    closers.push(s)
    return s
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
  const hook = (url: string, tenant: string, body: object) =>
    fetch(`${url}/v1/hooks/shop`, { method: "POST", headers: { "content-type": "application/json", "x-tenant": tenant }, body: JSON.stringify(body) })
  const create = async (url: string, tenant: string, body: object): Promise<string> => {
    const r = await api(url, "POST", `/v1/tenants/${tenant}/endpoints`, body)
    expect(r.status, JSON.stringify(r.body)).toBe(201)
    return r.body.id
  }
  const calledAt = (s: RecordingSink, route: string) => s.got.filter((g) => g.path === route).length

  it("a reload or an edit that keeps the URL keeps the breaker and the auto-disable clock", { timeout: 60_000 }, async () => {
    const down = await sink(500)
    const DISABLE_AFTER_MS = 2_000
    const node = await serve(
      configOf({
        endpoints: { allowNetworks: ["127.0.0.0/8"], disableAfterMs: DISABLE_AFTER_MS },
        breaker: { minCalls: 2, failureRatio: 0.5, openMs: 200, maxOpenMs: 200 }
      })
    )
    const id = await create(node.url, "acme", { url: `${down.url}/failing` })
    const started = Date.now()
    // Hooks keep coming, and the endpoint is edited (its description) or the configuration reloaded
    // more often than its probes are called: each makes its pool open again.
    let trips = 0
    let edits = 0
    for (let i = 0; ; i++) {
      expect((await hook(node.url, "acme", { i })).status).toBe(202)
      const edit = i % 2 === 0 ? await api(node.url, "PATCH", `/v1/tenants/acme/endpoints/${id}`, { description: `edit ${i}` }) : await api(node.url, "POST", "/v1/config/reload")
      expect(edit.status).toBe(200)
      edits++
      const e = (await api(node.url, "GET", `/v1/tenants/acme/endpoints/${id}`)).body
      if (e.disabled === true) break
      // The breaker is the same one throughout: its trips only go up.
      if (e.breaker !== null) {
        expect(e.breaker.trips).toBeGreaterThanOrEqual(trips)
        trips = e.breaker.trips
      }
      if (Date.now() - started > 20_000) throw new Error(`not disabled after ${edits} edits and reloads; trips ${trips}`)
      await sleep(100)
    }
    const e = (await api(node.url, "GET", `/v1/tenants/acme/endpoints/${id}`)).body
    expect(e.disabledReason).toMatch(/^failing without a success since /)
    // Its failing time ran from its first failure, across every edit and reload.
    expect(Date.now() - started).toBeGreaterThanOrEqual(DISABLE_AFTER_MS)
    expect(edits).toBeGreaterThan(DISABLE_AFTER_MS / 200)
    expect(trips).toBeGreaterThan(1)
    expect(calledAt(down, "/failing")).toBeGreaterThan(1)
  })

  it("open breakers do not fill the endpoint pools", { timeout: 90_000 }, async () => {
    const down = await sink(500)
    const up = await sink(204)
    const MAX_POOLS = 4
    const node = await serve(
      configOf({
        endpoints: { allowNetworks: ["127.0.0.0/8"], maxPools: MAX_POOLS },
        breaker: { minCalls: 2, failureRatio: 0.5, openMs: 60_000, maxOpenMs: 60_000 },
        log: { level: "warning" }
      })
    )
    // Two tenants with MAX_POOLS failing endpoints each, one call at a time: rows wait behind each
    // call, so each trip parks its tenant on the pool.
    const failing = ["fail-a", "fail-b"]
    const routes: Array<string> = []
    const ids = new Map<string, string>()
    for (const t of failing) {
      for (let i = 0; i < MAX_POOLS; i++) {
        const route = `/${t}/${i}`
        routes.push(route)
        ids.set(route, await create(node.url, t, { url: `${down.url}${route}`, concurrency: 1 }))
      }
    }
    const quietId = await create(node.url, "quiet", { url: `${up.url}/quiet` })
    for (const t of failing) for (let i = 0; i < 4; i++) expect((await hook(node.url, t, { t, i })).status).toBe(202)
    // Every failing endpoint is called twice (minCalls), and its breaker opens.
    await waitFor(
      "every failing endpoint's breaker open",
      () => routes.every((r) => calledAt(down, r) >= 2),
      30_000
    ).catch((e) => {
      throw new Error(`${e.message}: ${routes.filter((r) => calledAt(down, r) >= 2).length} of ${routes.length} called twice`)
    })
    // The count is read once every breaker shows open, so no answer still being read can add a call.
    const openAll = async () => {
      for (const route of routes) {
        const [tenant] = route.slice(1).split("/")
        if ((await api(node.url, "GET", `/v1/tenants/${tenant}/endpoints/${ids.get(route)}`)).body.breaker?.state !== "open") return false
      }
      return true
    }
    await waitFor("every failing endpoint's breaker shown open", openAll, 30_000)
    const calls = down.got.length
    // Another tenant's endpoint rows are delivered, though more breakers are open than there are pools.
    for (let i = 0; i < 3; i++) expect((await hook(node.url, "quiet", { i })).status).toBe(202)
    await waitFor("the quiet tenant's rows delivered", () => calledAt(up, "/quiet") === 3)
    // The breakers of the pools closed for it are remembered: their endpoints are not called again, and show open.
    await sleep(500)
    expect(down.got.length).toBe(calls)
    for (const route of routes) {
      const [tenant] = route.slice(1).split("/")
      const e = (await api(node.url, "GET", `/v1/tenants/${tenant}/endpoints/${ids.get(route)}`)).body
      expect(e.breaker?.state, route).toBe("open")
    }
    expect((await api(node.url, "GET", `/v1/tenants/quiet/endpoints/${quietId}`)).body.breaker).toMatchObject({ state: "closed" })
    const pools = /^ankusa_endpoint_pools (\d+)/m.exec(await (await fetch(`${node.url}/metrics`)).text())
    expect(Number(pools![1])).toBeLessThanOrEqual(MAX_POOLS)
  })
})
