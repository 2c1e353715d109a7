/**
 * TEN-3's named cases (docs/delivery.md "Fair dispatch"): deficit round-robin at the claim, by
 * weight and within each tenant's limits, round-robin at the sinks' slots, and a sink's pace. The
 * scheduling properties run on the memory store (the rate limit under `TestClock`); the sink cases
 * on real HTTP sinks on 127.0.0.1.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"
import { DEFAULT_LIMITS, type TenantLimits } from "../src/delivery/fair.js"
import { Defaults } from "../src/delivery/options.js"
import type * as K from "../src/domain/keys.js"
import * as Replay from "../src/queue/replay.js"
import { type Ingested, makeIngest, memoryWorld, sinkOf, startPipeline, until } from "./pipeline-world.js"
import { startSink } from "./sink-server.js"

/** A sink that holds every call far past the test: rows stay inflight, so only the test's ticks claim. */
const holding = startSink(() => ({ status: 204, delayMs: 60_000 }))

/** Room for every row a test claims (sinks[].maxWaiting): the scheduler alone decides what is claimed. */
const roomy = { timeoutMs: 120_000, maxWaiting: 100_000 }

/** Limits by ordinal, the defaults for the rest. */
const limitsBy = (by: ReadonlyMap<number, Partial<TenantLimits>>) => (ords: ReadonlyArray<number>) =>
  Effect.succeed(ords.map((o) => ({ ...DEFAULT_LIMITS, ...by.get(o) })))

/** Rows claimed by tenant in one tick. */
const countByTenant = (claimed: ReadonlyArray<K.DueRef>) => {
  const out = new Map<number, number>()
  for (const d of claimed) out.set(d.ord, (out.get(d.ord) ?? 0) + 1)
  return out
}

type Ingest = ReturnType<typeof makeIngest>

/** `n` rows of each tenant, due a minute ago (one `makeIngest` per world: it numbers seqs and ordinals). */
const backlog = (ingest: Ingest, tenants: ReadonlyArray<{ readonly tenant: string; readonly rows: number }>) =>
  Effect.gen(function* () {
    const at = Date.now() - 60_000
    const out: Array<Ingested> = []
    for (const t of tenants) out.push(...(yield* ingest(Array.from({ length: t.rows }, () => ({ tenant: t.tenant, sinks: ["s"], at })))))
    return out
  })

describe("fair dispatch (TEN-3)", () => {
  it.live("weighted shares hold while every tenant is backlogged", () =>
    Effect.gen(function* () {
      const sink = yield* holding
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(
            fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 2, maxLength: 5 }),
            fc.integer({ min: 0, max: 30 }),
            (weights, extra) =>
              Effect.runPromise(
                Effect.scoped(
                  Effect.gen(function* () {
                    // A budget of at least Σ weights: every tick completes a round (q = budget / Σ weights ≥ 1).
                    const claimLimit = weights.reduce((a, b) => a + b, 0) + extra
                    // R rounds: a tenant's share is R quanta, and a window's edges can cut one quantum off.
                    const R = 40
                    const ticks = 2 * R
                    const w = yield* memoryWorld
                    const ingest = makeIngest(w.store)
                    // Every tenant holds more rows than it can be given in the run.
                    const hooks = yield* backlog(ingest, weights.map((_, i) => ({ tenant: `t${i}`, rows: ticks * claimLimit })))
                    const ords = [...new Set(hooks.map((h) => h.ord))]
                    const by = new Map(ords.map((o, i) => [o, { weight: weights[i]! }]))
                    const { pipeline } = yield* startPipeline(w, {
                      tickMs: 60_000,
                      claimLimit,
                      maxInflight: 100_000,
                      // A quantum of one row, so that a tick is a round (the default quantum makes rounds of many ticks).
                      quantumRows: 1,
                      graceMs: 0,
                      limitsOf: limitsBy(by),
                      sinks: [sinkOf("s", sink.url, roomy)]
                    })
                    const perTick: Array<Map<number, number>> = []
                    for (let i = 0; i < ticks; i++) perTick.push(countByTenant((yield* pipeline.tick).claimed))
                    const total = weights.reduce((a, b) => a + b, 0)
                    // Over every window of R rounds.
                    for (let start = 0; start + R <= ticks; start++) {
                      const window = perTick.slice(start, start + R)
                      const claimed = window.reduce((n, m) => n + [...m.values()].reduce((a, b) => a + b, 0), 0)
                      expect(claimed).toBe(R * claimLimit)
                      ords.forEach((ord, i) => {
                        const got = window.reduce((n, m) => n + (m.get(ord) ?? 0), 0)
                        const share = (claimed * weights[i]!) / total
                        expect(Math.abs(got - share), `tenant ${i} weight ${weights[i]}: ${got} of share ${share}`).toBeLessThanOrEqual(0.05 * share + 1)
                      })
                    }
                  })
                )
              )
          ),
          { numRuns: 8 }
        )
      )
    })
  )

  it.live("a tenant with one due row is served within one round", () =>
    Effect.gen(function* () {
      const sink = yield* holding
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      // 40 tenants with 2,000 rows each; 100 rows a tick: a round of the 41 tenants, a quantum each
      // (pipeline.quantumRows), is ⌈41 × quantum / 100⌉ ticks. A newcomer is next in turn, so far sooner.
      yield* backlog(ingest, Array.from({ length: 40 }, (_, i) => ({ tenant: `flood${i}`, rows: 2_000 })))
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        claimLimit: 100,
        maxInflight: 100_000,
        graceMs: 0,
        sinks: [sinkOf("s", sink.url, roomy)]
      })
      for (let i = 0; i < 7; i++) yield* pipeline.tick
      const [quiet] = yield* ingest([{ tenant: "quiet", sinks: ["s"], at: Date.now() - 1 }])
      let ticks = 0
      for (let served = false; !served; ) {
        ticks++
        served = (yield* pipeline.tick).claimed.some((d) => d.seq === quiet!.seq)
        expect(ticks, "ticks until the quiet tenant's row was claimed").toBeLessThanOrEqual(Math.ceil((41 * Defaults.quantumRows) / 100) + 1)
      }
    })
  )

  it.live("dispatch is work-conserving", () =>
    Effect.gen(function* () {
      const sink = yield* holding
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      // A lone tenant gets the whole budget.
      const big = yield* backlog(ingest, [{ tenant: "big", rows: 120 }])
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        claimLimit: 25,
        maxInflight: 100_000,
        graceMs: 0,
        sinks: [sinkOf("s", sink.url, roomy)]
      })
      const first = yield* pipeline.tick
      expect(first.claimed).toHaveLength(25)
      expect(new Set(first.claimed.map((d) => d.ord))).toEqual(new Set([big[0]!.ord]))
      // Small tenants join and drain: the tick still claims its whole budget while rows are left.
      yield* backlog(ingest, [{ tenant: "s1", rows: 2 }, { tenant: "s2", rows: 3 }, { tenant: "s3", rows: 1 }])
      let left = 95 + 6
      for (;;) {
        const r = yield* pipeline.tick
        expect(r.claimed.length).toBe(Math.min(25, left))
        left -= r.claimed.length
        if (left === 0) break
      }
    })
  )

  it.live("a tenant never exceeds its max inflight", () =>
    Effect.gen(function* () {
      const sink = yield* startSink(() => ({ status: 204, delayMs: 30 }))
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const hooks = yield* backlog(ingest, [{ tenant: "capped", rows: 60 }, { tenant: "free", rows: 60 }])
      const capped = hooks[0]!.ord
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 5,
        maxInflight: 100,
        limitsOf: limitsBy(new Map([[capped, { maxInflight: 3 }]])),
        sinks: [sinkOf("s", sink.url, { concurrency: 16 })]
      })
      yield* until(
        "every row delivered",
        Effect.gen(function* () {
          const c = yield* w.queue.aggregate
          return c.pending + c.scheduled + c.inflight === 0 && (yield* pipeline.inflight) === 0
        }),
        20_000
      )
      // The capped tenant's calls open at the sink at once (each answered 30 ms after it arrived)
      // never pass 3, though the sink had 16 slots and the other tenant used them.
      const ids = new Set(hooks.filter((h) => h.ord === capped).map((h) => h.id))
      const arrivals = (mine: boolean) => sink.received.filter((r) => ids.has(String(r.headers["webhook-id"])) === mine).map((r) => r.at)
      const most = (ats: ReadonlyArray<number>) => Math.max(...ats.map((t) => ats.filter((u) => u <= t && u > t - 30).length))
      expect(most(arrivals(true))).toBeLessThanOrEqual(3)
      expect(most(arrivals(false))).toBeGreaterThan(3)
      expect(sink.received).toHaveLength(120)
    })
  )

  it.effect("a tenant's rate limit holds within 5% over ten seconds", () =>
    Effect.gen(function* () {
      // The test clock from the wall clock's now, so the rows below are due.
      yield* TestClock.setTime(Date.now())
      const sink = yield* holding
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const hooks = yield* backlog(ingest, [{ tenant: "limited", rows: 1_000 }, { tenant: "other", rows: 1_000 }])
      const limited = hooks[0]!.ord
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        claimLimit: 1_000,
        maxInflight: 100_000,
        graceMs: 0,
        limitsOf: limitsBy(new Map([[limited, { ratePerSec: 20 }]])),
        sinks: [sinkOf("s", sink.url, roomy)]
      })
      // Ten seconds of 100 ms ticks on the test clock.
      let got = 0
      for (let i = 0; i < 100; i++) {
        got += (yield* pipeline.tick).claimed.filter((d) => d.ord === limited).length
        yield* TestClock.adjust("100 millis")
      }
      expect(Math.abs(got - 200)).toBeLessThanOrEqual(10)
    })
  )

  it.live("sink slots are shared fairly between tenants", () =>
    Effect.gen(function* () {
      const sink = yield* startSink(() => ({ status: 204, delayMs: 50 }))
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const flood = yield* backlog(ingest, [{ tenant: "flood", rows: 100 }])
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        maxInflight: 1_000,
        claimLimit: 1_000,
        sinks: [sinkOf("s", sink.url, { concurrency: 4, maxWaiting: 1_000 })]
      })
      // Every flood row is claimed and waits for the sink's four slots.
      expect((yield* pipeline.tick).claimed).toHaveLength(100)
      const [quiet] = yield* ingest([{ tenant: "quiet", sinks: ["s"], at: Date.now() - 1 }])
      // Before the quiet row: the first four flood calls (the sink's slots), none answered yet (50 ms).
      const concurrency = 4
      expect((yield* pipeline.tick).claimed.map((d) => d.seq)).toEqual([quiet!.seq])
      yield* until("the quiet row is delivered", Effect.sync(() => sink.received.some((r) => r.headers["webhook-id"] === quiet!.id)))
      // Within one slot turn: at most one flood call starts after the quiet row was handed over and before its call.
      const at = sink.received.findIndex((r) => r.headers["webhook-id"] === quiet!.id)
      expect(at).toBeLessThanOrEqual(concurrency + 1)
      expect(flood.length).toBe(100)
    })
  )

  it.live("a sink's 429 slows only that sink", () =>
    Effect.gen(function* () {
      const slow = yield* startSink((_, n) => (n === 1 ? { status: 429, headers: { "retry-after": "2" } } : { status: 204 }))
      const other = yield* startSink()
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const at = Date.now() - 1_000
      yield* ingest(Array.from({ length: 20 }, () => ({ tenant: "t", sinks: ["slow", "other"], at })))
      yield* startPipeline(w, {
        tickMs: 10,
        sinks: [sinkOf("slow", slow.url, { concurrency: 1 }), sinkOf("other", other.url, { concurrency: 1 })]
      })
      yield* until("the first call of the slow sink was answered 429", Effect.sync(() => slow.received.length >= 1))
      const first = slow.received[0]!.at
      // The tenant's other sink goes on at once and takes every row, while the slow sink waits.
      yield* until("the other sink has every row", Effect.sync(() => other.received.length === 20), 5_000)
      expect(other.received[19]!.at - first).toBeLessThan(1_500)
      expect(slow.received).toHaveLength(1)
      yield* until("the slow sink resumes", Effect.sync(() => slow.received.length >= 2), 5_000)
      expect(slow.received[1]!.at - first).toBeGreaterThanOrEqual(1_900)
    })
  )

  it.live("a replay of one tenant does not delay another tenant's deliveries", () =>
    Effect.gen(function* () {
      const sink = yield* holding
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      // 2,000 dead rows of one tenant, dead-lettered through the Queue.
      const dead = yield* backlog(ingest, [{ tenant: "replayed", rows: 2_000 }])
      const now = Date.now()
      const visits = yield* w.queue.claim(now, [{ ord: dead[0]!.ord, floorAt: 0, limit: 2_000 }], 2_000, Number.MAX_SAFE_INTEGER)
      yield* w.queue.settle(
        visits[0]!.rows.map((d) => ({
          _tag: "DeadLetter" as const,
          ref: { ord: d.ref.ord, seq: d.ref.seq, sink: d.ref.sink },
          row: { attempts: 3, lastStatus: 500, size: d.value.size, lastAt: now },
          at: now,
          hook: { sourceId: "src", id: `msg_${d.ref.seq}` }
        }))
      )
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        claimLimit: 50,
        maxInflight: 100_000,
        graceMs: 0,
        sinks: [sinkOf("s", sink.url, roomy)]
      })
      const replay = yield* Replay.make.pipe(Effect.provide(w.context))
      const revived = yield* replay.replay({ ords: [dead[0]!.ord] }, { chunk: 500, maxRevived: 10_000, maxScanned: 10_000 })
      expect(revived.revived).toBe(2_000)
      const [other] = yield* ingest([{ tenant: "other", sinks: ["s"], at: Date.now() - 1 }])
      // The other tenant's row is claimed in the first tick, beside the replayed backlog.
      const r = yield* pipeline.tick
      expect(r.claimed.some((d) => d.seq === other!.seq)).toBe(true)
      expect(r.claimed.length).toBe(50)
    })
  )
})
