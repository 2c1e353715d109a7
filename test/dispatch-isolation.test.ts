/**
 * Issue 24's dispatch cases (docs/delivery.md "Fair dispatch"): a sink's places bound the rows
 * claimed for it, so a stuck sink holds back no tenant of another sink; and the round's state (a
 * drained tenant's place, a rate bucket, the rotation past `activeTenants`, a sink's pause, a tick
 * that fails while claiming) cannot be gamed. Timings on RocksDB and real sinks on 127.0.0.1;
 * scheduling properties on the memory store, the rate under `TestClock`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Context, Effect, Exit } from "effect"
import { TestClock } from "effect/testing"
import { DEFAULT_LIMITS, type TenantLimits } from "../src/delivery/fair.js"
import { SINK_WAIT_FACTOR } from "../src/delivery/pipeline.js"
import type * as K from "../src/domain/keys.js"
import type { RetrySchedule } from "../src/domain/retry-schedule.js"
import * as Queue from "../src/queue/queue.js"
import { StoreError } from "../src/store/store.js"
import { makeIngest, memoryWorld, rocksWorld, sinkOf, startPipeline, until, type World } from "./pipeline-world.js"
import { startSink } from "./sink-server.js"

/** A sink that holds every call far past the test. */
const holding = startSink(() => ({ status: 204, delayMs: 60_000 }))
/** Room for every row a test claims: the scheduler alone decides what is claimed. */
const roomy = { timeoutMs: 120_000, maxWaiting: 100_000 }

const limitsBy = (by: ReadonlyMap<number, Partial<TenantLimits>>) => (ords: ReadonlyArray<number>) =>
  Effect.succeed(ords.map((o) => ({ ...DEFAULT_LIMITS, ...by.get(o) })))

const rowsOf = (claimed: ReadonlyArray<K.DueRef>, ord: number) => claimed.filter((d) => d.ord === ord).length

describe("dispatch isolation (issue 24)", () => {
  it.live("a tenant on a stuck sink does not hold back a tenant on a healthy sink", () =>
    Effect.gen(function* () {
      const stuck = yield* startSink(() => ({ status: 204, delayMs: 60_000 }))
      const healthy = yield* startSink()
      const w = yield* rocksWorld
      const ingest = makeIngest(w.store)
      const backlog = yield* ingest(Array.from({ length: 2_000 }, () => ({ tenant: "stuck", sinks: ["stuck"], at: Date.now() - 1_000 })))
      // The same tenant's rows for the healthy sink, behind its backlog: they flow past it.
      const behind = yield* ingest(Array.from({ length: 10 }, () => ({ tenant: "stuck", sinks: ["healthy"], at: Date.now() - 500 })))
      // The pipeline's defaults (maxInflight 256, no tenant limits); no grace at the test's end.
      const { pipeline } = yield* startPipeline(w, {
        graceMs: 0,
        sinks: [sinkOf("stuck", stuck.url, { timeoutMs: 120_000 }), sinkOf("healthy", healthy.url)]
      })
      yield* until("the stuck sink's connections are busy", Effect.sync(() => stuck.received.length === 4))
      yield* until("the stuck tenant's rows for the healthy sink are delivered", Effect.sync(() => healthy.received.length === behind.length), 5_000)
      const sent: Array<{ readonly id: string; readonly at: number }> = []
      for (let i = 0; i < 20; i++) {
        const [h] = yield* ingest([{ tenant: "quiet", sinks: ["healthy"], at: Date.now() }])
        sent.push({ id: h!.id, at: h!.at })
        yield* Effect.sleep("100 millis")
      }
      yield* until("every quiet row delivered", Effect.sync(() => healthy.received.length === behind.length + sent.length), 5_000)
      const arrived = new Map(healthy.received.map((r) => [String(r.headers["webhook-id"]), r.at]))
      const delays = sent.map((s) => arrived.get(s.id)! - s.at)
      // A tick period is 100 ms: a second is ten ticks of margin on a busy machine.
      expect(Math.max(...delays)).toBeLessThan(1_000)
      // The stuck sink holds its own places only: its calls and maxWaiting rows.
      const c = yield* w.queue.counters(backlog[0]!.ord)
      expect(c.inflight).toBe(4 + 4 * SINK_WAIT_FACTOR)
      yield* until("the quiet rows' outcomes are committed", Effect.map(pipeline.inflight, (n) => n === 4 + 4 * SINK_WAIT_FACTOR))
    })
  )

  it.live("rows waiting for a sink's connections are bounded", () =>
    Effect.gen(function* () {
      const a = yield* holding
      const b = yield* startSink(() => ({ status: 204, delayMs: 60_000 }))
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const at = Date.now() - 1_000
      const hooks = yield* ingest([
        ...Array.from({ length: 300 }, () => ({ tenant: "one", sinks: ["a"], at })),
        ...Array.from({ length: 300 }, () => ({ tenant: "two", sinks: ["b"], at }))
      ])
      const [one, two] = [hooks[0]!.ord, hooks[300]!.ord]
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        maxInflight: 10_000,
        claimLimit: 10_000,
        graceMs: 0,
        // a: the default maxWaiting (concurrency × SINK_WAIT_FACTOR); b: its own.
        sinks: [sinkOf("a", a.url, { concurrency: 3, timeoutMs: 120_000 }), sinkOf("b", b.url, { concurrency: 2, maxWaiting: 5, timeoutMs: 120_000 })]
      })
      for (let i = 0; i < 5; i++) yield* pipeline.tick
      yield* until("both sinks' connections are busy", Effect.sync(() => a.received.length === 3 && b.received.length === 2))
      for (let i = 0; i < 5; i++) yield* pipeline.tick
      // Each sink holds its calls and at most its maxWaiting rows waiting; the rest stay due.
      expect(yield* w.queue.counters(one)).toMatchObject({ inflight: 3 + 3 * SINK_WAIT_FACTOR, pending: 300 - 3 - 3 * SINK_WAIT_FACTOR })
      expect(yield* w.queue.counters(two)).toMatchObject({ inflight: 2 + 5, pending: 300 - 7 })
      expect(a.received).toHaveLength(3)
      expect(b.received).toHaveLength(2)
    })
  )

  it.live("a tenant with few rows is not parked behind a backlogged tenant's full sink", () =>
    Effect.gen(function* () {
      const sink = yield* holding
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const [flood] = yield* ingest(Array.from({ length: 300 }, () => ({ tenant: "flood", sinks: ["s"], at: Date.now() - 1_000 })))
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        maxInflight: 10_000,
        claimLimit: 10_000,
        graceMs: 0,
        sinks: [sinkOf("s", sink.url, { concurrency: 2, maxWaiting: 4, timeoutMs: 120_000 })]
      })
      for (let i = 0; i < 3; i++) yield* pipeline.tick
      // The flood fills the sink's places: 2 calls and 4 waiting.
      expect((yield* w.queue.counters(flood!.ord)).inflight).toBe(6)
      // Three sparse tenants with two rows each: the full sink takes one row of a tenant holding
      // none of its places, `concurrency` (2) such rows at most; the flood takes none of them.
      const sparse = yield* ingest(["q1", "q2", "q3"].flatMap((tenant) => [0, 1].map(() => ({ tenant, sinks: ["s"], at: Date.now() - 1 }))))
      for (let i = 0; i < 3; i++) yield* pipeline.tick
      const held = yield* Effect.forEach([0, 2, 4], (i) => Effect.map(w.queue.counters(sparse[i]!.ord), (c) => c.inflight))
      expect(held.filter((n) => n === 1)).toHaveLength(2)
      expect(held.filter((n) => n === 0)).toHaveLength(1)
      expect((yield* w.queue.counters(flood!.ord)).inflight).toBe(6)
      expect(yield* pipeline.inflight).toBe(8)
    })
  )

  it.live("a tenant that drains every round does not overtake a backlogged tenant", () =>
    Effect.gen(function* () {
      const sink = yield* holding
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const [big] = yield* ingest(Array.from({ length: 200 }, () => ({ tenant: "big", sinks: ["s"], at: Date.now() - 60_000 })))
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        // Two rows a tick, a row a visit: a round of four tenants is two ticks.
        claimLimit: 2,
        quantumRows: 1,
        maxInflight: 100_000,
        graceMs: 0,
        sinks: [sinkOf("s", sink.url, roomy)]
      })
      const small = ["d1", "d2", "d3"]
      const claimed: Array<ReadonlyArray<K.DueRef>> = []
      for (let i = 0; i < 24; i++) {
        // Each small tenant gets a row before every tick and drains on each visit.
        yield* ingest(small.map((tenant) => ({ tenant, sinks: ["s"], at: Date.now() - 1 })))
        claimed.push((yield* pipeline.tick).claimed)
      }
      // The backlogged tenant is served once a round (every two ticks), however often the others drain.
      for (let i = 0; i + 2 <= claimed.length; i++) {
        expect(rowsOf([...claimed[i]!, ...claimed[i + 1]!], big!.ord), `ticks ${i} and ${i + 1}`).toBeGreaterThanOrEqual(1)
      }
      expect(rowsOf(claimed.flat(), big!.ord)).toBeGreaterThanOrEqual(11)
    })
  )

  it.effect("a tenant's rate holds across drains", () =>
    Effect.gen(function* () {
      // The test clock from the wall clock's now, so the rows below are due.
      yield* TestClock.setTime(Date.now())
      const sink = yield* holding
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const [first] = yield* ingest([{ tenant: "limited", sinks: ["s"], at: Date.now() - 2_000 }])
      const ord = first!.ord
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        maxInflight: 100_000,
        graceMs: 0,
        limitsOf: limitsBy(new Map([[ord, { ratePerSec: 1 }]])),
        sinks: [sinkOf("s", sink.url, roomy)]
      })
      // One hook every 200 ms for 10 s and a tick every 100 ms: the tenant drains whenever it is
      // served, and (its rows due two seconds back, so the cleanup removes its markers) the tick
      // between two hooks runs without it in the round.
      let got = 0
      for (let i = 0; i < 100; i++) {
        if (i > 0 && i % 2 === 0) yield* ingest([{ tenant: "limited", sinks: ["s"], at: (yield* Clock.currentTimeMillis) - 2_000 }])
        got += rowsOf((yield* pipeline.tick).claimed, ord)
        yield* TestClock.adjust("100 millis")
      }
      // A bucket of one token and one a second: 1 + 10 at most.
      expect(got).toBeLessThanOrEqual(11)
      expect(got).toBeGreaterThanOrEqual(9)
    })
  )

  it.live("a Retry-After pauses the sink at most maxPauseMs and the row for all of it", () =>
    Effect.gen(function* () {
      const sink = yield* startSink((_, n) => (n === 1 ? { status: 429, headers: { "retry-after": "3600" } } : { status: 204 }))
      const w = yield* rocksWorld
      const ingest = makeIngest(w.store)
      const at = Date.now() - 1_000
      const hooks = yield* ingest([
        { tenant: "a", sinks: ["s"], at },
        { tenant: "b", sinks: ["s"], at }
      ])
      // Retry-After honoured up to an hour for the row; the sink's pause capped at 500 ms.
      const retry: RetrySchedule = { delaysMs: [50, 50], jitter: 0, maxRetryAfterMs: 3_600_000 }
      yield* startPipeline(w, { tickMs: 20, graceMs: 0, sinks: [sinkOf("s", sink.url, { concurrency: 1, retry, maxPauseMs: 500 })] })
      yield* until("the other row is delivered", Effect.sync(() => sink.received.length >= 2), 10_000)
      const [limited, next] = [sink.received[0]!, sink.received[1]!]
      expect(next.headers["webhook-id"]).not.toBe(limited.headers["webhook-id"])
      expect(next.at - limited.at).toBeGreaterThanOrEqual(450)
      expect(next.at - limited.at).toBeLessThan(3_000)
      // The row that got the 429 waits its whole Retry-After.
      const h = hooks.find((x) => x.id === limited.headers["webhook-id"])!
      yield* until("the 429 is settled as a retry", Effect.map(w.queue.counters(h.ord), (c) => c.scheduled === 1))
      const due = yield* w.queue.firstDue(h.ord)
      expect(due!.ref.at).toBeGreaterThanOrEqual(limited.at + 3_600_000 - 1_000)
      yield* Effect.sleep("300 millis")
      expect(sink.received).toHaveLength(2)
    })
  )

  it.live("with more tenants than activeTenants, every tenant with work is served within its bound", () =>
    Effect.gen(function* () {
      const sink = yield* holding
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const N = 10
      const A = 3
      const at = Date.now() - 60_000
      const hooks = yield* ingest(Array.from({ length: N * 100 }, (_, i) => ({ tenant: `t${i % N}`, sinks: ["s"], at })))
      const ords = [...new Set(hooks.map((h) => h.ord))]
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        activeTenants: A,
        // One round of the A members a tick, a row each.
        claimLimit: A,
        quantumRows: 1,
        maxInflight: 100_000,
        graceMs: 0,
        sinks: [sinkOf("s", sink.url, roomy)]
      })
      const served = new Map<number, Array<number>>(ords.map((o) => [o, []]))
      const ticks = 6 * Math.ceil(N / A)
      for (let t = 0; t < ticks; t++) for (const d of (yield* pipeline.tick).claimed) served.get(d.ord)!.push(t)
      // docs/delivery.md: served within N visits, ⌈N / activeTenants⌉ rounds; here a round is a tick.
      const bound = Math.ceil(N / A)
      for (const [ord, at] of served) {
        expect(at[0], `tenant ${ord}'s first service`).toBeLessThan(bound)
        for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!, `tenant ${ord}'s gap`).toBeLessThanOrEqual(bound)
        expect(at.length).toBeGreaterThanOrEqual(Math.floor(ticks / bound))
      }
    })
  )

  it.live("with more tenants than activeTenants, members held back by their limits give their places", () =>
    Effect.gen(function* () {
      const sink = yield* holding
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const at = Date.now() - 60_000
      // Six tenants, two places; the first two are limited to a row every ten seconds.
      const hooks = yield* ingest(Array.from({ length: 600 }, (_, i) => ({ tenant: `t${i % 6}`, sinks: ["s"], at })))
      const ords = [...new Set(hooks.map((h) => h.ord))]
      const limited = new Map(ords.slice(0, 2).map((o) => [o, { ratePerSec: 0.1 }]))
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        activeTenants: 2,
        claimLimit: 2,
        quantumRows: 1,
        maxInflight: 100_000,
        graceMs: 0,
        limitsOf: limitsBy(limited),
        sinks: [sinkOf("s", sink.url, roomy)]
      })
      const served = new Map<number, number>(ords.map((o) => [o, 0]))
      for (let t = 0; t < 24; t++) for (const d of (yield* pipeline.tick).claimed) served.set(d.ord, served.get(d.ord)! + 1)
      // The limited two got their one token each; the four others kept going round.
      for (const o of ords.slice(0, 2)) expect(served.get(o)).toBe(1)
      for (const o of ords.slice(2)) expect(served.get(o), `tenant ${o}`).toBeGreaterThanOrEqual(6)
    })
  )

  it.live("rows for a destination whose breaker is open wait for its probe time, attempts kept", () =>
    Effect.gen(function* () {
      const failing = yield* startSink(() => ({ status: 500 }))
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const [first] = yield* ingest(Array.from({ length: 4 }, () => ({ tenant: "t", sinks: ["s"], at: Date.now() - 1_000 })))
      const openMs = 60_000
      const { pipeline, wake, shutdown } = yield* startPipeline(w, {
        tickMs: 60_000,
        graceMs: 0,
        breaker: { minCalls: 2, failureRatio: 0.5, windowMs: 60_000, openMs, maxOpenMs: 600_000 },
        // Another sink with room: ticks run (a claim with no free place anywhere reads nothing).
        sinks: [sinkOf("s", failing.url, { retry: { delaysMs: [10_000], jitter: 0, maxRetryAfterMs: 5_000 } }), sinkOf("ok", (yield* holding).url)]
      })
      yield* pipeline.tick
      yield* until("the four calls failed and their outcomes are committed", Effect.map(pipeline.inflight, (n) => n === 0 && failing.received.length === 4))
      const opened = Date.now()
      // The Writer is told to write the open destination's new rows due at its probe, the other's at once.
      const held = wake.held(Date.now())!
      expect(held("s")).toBeGreaterThanOrEqual(opened + openMs - 5_000)
      expect(held("s")).toBeLessThanOrEqual(opened + openMs)
      expect(held("ok")).toBeUndefined()
      expect(wake.held(opened + 2 * openMs)).toBeUndefined()
      // Rows committed while the breaker is open without the Writer (as a replay writes them): the claim reads each once and moves it to the probe's time.
      yield* ingest(Array.from({ length: 20 }, () => ({ tenant: "t", sinks: ["s"], at: Date.now() - 1 })))
      yield* pipeline.tick
      yield* pipeline.tick
      expect(failing.received).toHaveLength(4)
      const ord = first!.ord
      expect(yield* w.queue.counters(ord)).toMatchObject({ pending: 20, scheduled: 4, inflight: 0, dead: 0 })
      // Nothing is due now (the four failed rows wait for their retry, the twenty for the probe) ...
      const now = yield* w.queue.claim(Date.now(), [{ ord, floorAt: 0, limit: 100 }], 100, 1e9)
      expect(now.flatMap((v) => v.rows)).toHaveLength(0)
      // ... and the twenty are due at the breaker's probe time, kind and attempts kept.
      const later = yield* w.queue.claim(opened + 2 * openMs, [{ ord, floorAt: 0, limit: 100 }], 100, 1e9)
      const moved = later.flatMap((v) => v.rows).filter((d) => d.value.kind === 0)
      expect(moved).toHaveLength(20)
      for (const d of moved) expect(d.ref.at).toBeGreaterThanOrEqual(opened + openMs - 5_000)
      // A stopped pipeline probes nothing: the Writer no longer holds a row for its breakers.
      expect(wake.held(Date.now())).toBeDefined()
      yield* shutdown
      expect(wake.held(Date.now())).toBeUndefined()
    })
  )

  it.effect("an erasing tenant's rows are not claimed, with or without an admission", () =>
    Effect.gen(function* () {
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const at = Date.now() - 1_000
      const hooks = yield* ingest([...Array.from({ length: 3 }, () => ({ tenant: "erasing", sinks: ["s"], at })), { tenant: "kept", sinks: ["s"], at }])
      const [erasing, kept] = [hooks[0]!.ord, hooks[3]!.ord]
      yield* w.queue.fence(erasing)
      const admission = { visit: () => ({ admit: () => true, more: () => true }), open: () => true, refuseMax: 256 }
      const requests = [erasing, kept].map((ord) => ({ ord, floorAt: 0, limit: 10 }))
      for (const a of [admission, undefined]) {
        const visits = yield* w.queue.claim(Date.now(), requests, 10, 1e9, a)
        expect(visits.find((v) => v.ord === erasing)?.rows ?? []).toHaveLength(0)
      }
      expect(yield* w.queue.counters(erasing)).toMatchObject({ pending: 3, inflight: 0 })
      expect((yield* w.queue.counters(kept)).inflight).toBe(1)
    })
  )

  it.live("a tick that fails between claim passes returns its rows to due", () =>
    Effect.gen(function* () {
      const sink = yield* holding
      const w = yield* memoryWorld
      // The second claim (the first tick's second pass) fails.
      let calls = 0
      const queue: Queue.QueueShape = {
        ...w.queue,
        claim: (...args) =>
          Effect.suspend(() => (++calls === 2 ? Effect.fail(new StoreError({ op: "scan", message: "injected" })) : w.queue.claim(...args)))
      }
      const failing: World = { ...w, queue, context: Context.add(w.context, Queue.Queue, queue) }
      const ingest = makeIngest(w.store)
      const at = Date.now() - 1_000
      // A has fewer rows than its share: the first pass leaves budget, and the second pass fails.
      const hooks = yield* ingest([
        ...Array.from({ length: 2 }, () => ({ tenant: "a", sinks: ["s"], at })),
        ...Array.from({ length: 20 }, () => ({ tenant: "b", sinks: ["s"], at }))
      ])
      const [a, b] = [hooks[0]!.ord, hooks[2]!.ord]
      const { pipeline } = yield* startPipeline(failing, {
        tickMs: 60_000,
        claimLimit: 10,
        quantumRows: 1,
        maxInflight: 100_000,
        graceMs: 0,
        sinks: [sinkOf("s", sink.url, roomy)]
      })
      const exit = yield* Effect.exit(pipeline.tick)
      expect(Exit.isFailure(exit)).toBe(true)
      expect(calls).toBe(2)
      // Every row claimed by the first pass is due again, and nothing stays counted for it.
      expect(yield* w.queue.counters(a)).toMatchObject({ inflight: 0, pending: 2 })
      expect(yield* w.queue.counters(b)).toMatchObject({ inflight: 0, pending: 20 })
      expect(yield* pipeline.inflight).toBe(0)
      expect((yield* pipeline.tenantStats).inflight.size).toBe(0)
      expect(sink.received).toHaveLength(0)
      // The next tick claims them again.
      const again = yield* pipeline.tick
      expect(rowsOf(again.claimed, a)).toBe(2)
      expect(again.claimed.length).toBe(10)
    })
  )
})
