/**
 * Ordered delivery by key (issue 44; docs/delivery.md "Ordered delivery") on the memory store,
 * through the real pipeline to real HTTP sinks on 127.0.0.1.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import * as K from "../src/domain/keys.js"
import * as Ordering from "../src/domain/ordering.js"
import * as Replay from "../src/queue/replay.js"
import { Layer } from "effect"
import { fast, memoryWorld, sinkOf, startPipeline, until } from "./pipeline-world.js"
import { keyed, makeOrderedIngest, noBreaker, type OrderedHook, upTo } from "./ordered-world.js"
import { startOrderedSink } from "./support/ordered-sink.js"

const skip = { ordered: { onDead: "skip" as const } }
const hold = { ordered: { onDead: "hold" as const } }
/** Attempts enough that a failing head stays failing for the whole test. */
const slow = { delaysMs: Array.from({ length: 50 }, () => 100), jitter: 0, maxRetryAfterMs: 5_000 }
/** One retry, then the DLQ. */
const once = { delaysMs: [30], jitter: 0, maxRetryAfterMs: 5_000 }

const pipelineOf = (sinks: Parameters<typeof startPipeline>[1]["sinks"]) => ({ tickMs: 10, graceMs: 0, breaker: noBreaker, sinks })

describe("ordered delivery", () => {
  it.live("hooks of one key reach an ordered destination in accepted order across retries", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 3 }),
          fc.array(fc.nat(), { minLength: 2, maxLength: 14 }),
          fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 14, maxLength: 14 }),
          fc.integer({ min: 1, max: 13 }),
          (keys, picks, failures, cut) =>
            Effect.runPromise(
              Effect.scoped(
                Effect.gen(function* () {
                  // Failures of (k, n): its first `failures[i]` attempts answer 500 (at most 3: the schedule's retries).
                  const failuresOf = new Map<string, number>()
                  const counts = new Map<string, number>()
                  const hooks: Array<OrderedHook> = picks.map((p, i) => {
                    const k = `key${p % keys}`
                    const n = (counts.get(k) ?? 0) + 1
                    counts.set(k, n)
                    failuresOf.set(`${k}/${n}`, failures[i]!)
                    return { tenant: "t", k, n, sinks: ["o"] }
                  })
                  const sink = yield* startOrderedSink((k, n, attempt) => (attempt <= (failuresOf.get(`${k}/${n}`) ?? 0) ? 500 : 204))
                  const w = yield* memoryWorld
                  const ingest = makeOrderedIngest(w, new Set(["o"]))
                  yield* startPipeline(w, pipelineOf([sinkOf("o", sink.url, { ...skip, retry: fast, concurrency: 8 })]))
                  // Two batches: the second lands while the first's heads are in flight or retrying.
                  const at = Math.min(cut, hooks.length)
                  yield* ingest(hooks.slice(0, at))
                  yield* Effect.sleep("15 millis")
                  yield* ingest(hooks.slice(at))
                  yield* until("every hook delivered", Effect.sync(() => [...counts].every(([k, c]) => sink.delivered(k).length >= c)), 20_000)
                  for (const [k, c] of counts) {
                    expect(sink.delivered(k), `delivered of ${k}`).toEqual(upTo(c))
                    // Attempts in accepted order: once n + 1 was tried, n is never tried again.
                    const tried = sink.calls.filter((x) => x.k === k).map((x) => x.n)
                    expect(tried, `attempts of ${k}`).toEqual([...tried].sort((a, b) => a - b))
                    expect(sink.maxOpen.get(k), `calls of ${k} open at once`).toBe(1)
                  }
                  // Nothing is left behind in any lane (the last outcomes commit just after their calls).
                  yield* until("queue empty", w.queue.aggregate.pipe(Effect.map((c) => c.waiting + c.pending + c.scheduled + c.inflight + c.dead === 0)))
                })
              )
            )
        ),
        { numRuns: 12 }
      )
    ), 120_000
  )

  it.live("a failing head blocks only its key", () =>
    Effect.gen(function* () {
      // a/1 fails at every attempt; b's hooks and a's other destination go on.
      const sink = yield* startOrderedSink((k, n) => (k === "a" && n === 1 ? 500 : 204))
      const other = yield* startOrderedSink()
      const w = yield* memoryWorld
      const ingest = makeOrderedIngest(w, new Set(["o"]))
      yield* startPipeline(w, pipelineOf([sinkOf("o", sink.url, { ...skip, retry: slow }), sinkOf("u", other.url, { retry: slow })]))
      yield* ingest([...keyed("t", "a", 5, ["o", "u"]), ...keyed("t", "b", 5, ["o"])])
      yield* until("b delivered and a's other destination too", Effect.sync(() => sink.delivered("b").length === 5 && other.delivered("a").length === 5))
      yield* until("a's head retried", Effect.sync(() => sink.calls.filter((c) => c.k === "a").length >= 3))
      expect(sink.delivered("b")).toEqual(upTo(5))
      // The unordered destination has every hook of a, in whatever order its concurrent calls landed.
      expect([...other.delivered("a")].sort((x, y) => x - y)).toEqual(upTo(5))
      // Only a's head was ever called at the ordered destination; a/2..5 wait in its lane.
      expect(new Set(sink.calls.filter((c) => c.k === "a").map((c) => c.n))).toEqual(new Set([1]))
      expect((yield* w.queue.aggregate).waiting).toBe(4)
    })
  )

  it.live("onDead skip moves the key on and marks the dead row; onDead hold waits for the replay", () =>
    Effect.gen(function* () {
      let failing = true
      const answer = (_k: string, n: number) => (n === 1 && failing ? 500 : 204)
      const skipping = yield* startOrderedSink(answer)
      const holding = yield* startOrderedSink(answer)
      const w = yield* memoryWorld
      const ingest = makeOrderedIngest(w, new Set(["s", "h"]))
      yield* startPipeline(w, pipelineOf([sinkOf("s", skipping.url, { ...skip, retry: once }), sinkOf("h", holding.url, { ...hold, retry: once })]))
      const [first] = yield* ingest(keyed("t", "k", 3, ["s", "h"]))

      // skip: k/1 dead after two attempts, then k/2 and k/3; its dead row says its lane skipped past it.
      yield* until("skip lane moved on", Effect.sync(() => skipping.delivered("k").length === 2))
      expect(skipping.delivered("k")).toEqual([2, 3])
      yield* until("both heads dead", w.queue.aggregate.pipe(Effect.map((c) => c.dead === 2)))
      const page = yield* w.queue.deadPage({ limit: 10 })
      const lanes = new Map(page.items.map((d) => [d.sink, d]))
      const deadValue = (sink: number) =>
        w.store.scan("index", K.familyDataRange(K.Families.dead), { limit: 10 }).pipe(
          Effect.map((rows) => rows.map((r) => ({ ref: K.decodeDeadKey(r.key), v: K.decodeDeadValue(r.value) })).find((r) => r.ref.sink === sink)!.v)
        )
      expect(lanes.size).toBe(2)
      expect((yield* deadValue(0)).lane).toBe("skipped")
      expect((yield* deadValue(1)).lane).toBe("held")

      // hold: nothing after k/1 is attempted; the lane shows as held.
      yield* Effect.sleep("150 millis")
      expect(holding.delivered("k")).toEqual([])
      expect(holding.calls.every((c) => c.n === 1)).toBe(true)
      const held = yield* w.queue.heldLanes(first!.ord, 10)
      expect(held).toEqual([{ lane: Ordering.laneOf("h", "k"), seq: first!.seq, sink: 1 }])

      // The replay of the held head: it is delivered first, then its successors, in order.
      failing = false
      const replay = yield* Replay.make.pipe(Effect.provide(Layer.succeedContext(w.context)))
      const r = yield* replay.replay({ ords: [first!.ord], seqs: new Set([first!.seq]) })
      expect(r.revived).toBe(2)
      yield* until("held lane delivered", Effect.sync(() => holding.delivered("k").length === 3))
      expect(holding.delivered("k")).toEqual([1, 2, 3])
      // The skipped row's replay went into its (free) lane: delivered again after its successors.
      yield* until("skipped row replayed", Effect.sync(() => skipping.delivered("k").length === 3))
      expect(skipping.delivered("k")).toEqual([2, 3, 1])
      expect(yield* w.queue.heldLanes(first!.ord, 10)).toEqual([])
      for (const s of [skipping, holding]) expect(s.maxOpen.get("k")).toBe(1)
    })
  )

  it.live("a skipped hook replayed while its successor is in flight goes next, before the key's waiting hooks", () =>
    Effect.gen(function* () {
      let failing = true
      // Every call takes 400 ms: k/2's call is still open when k/1 is replayed.
      const sink = yield* startOrderedSink((_k, n) => (n === 1 && failing ? 500 : 204), 400)
      const w = yield* memoryWorld
      const ingest = makeOrderedIngest(w, new Set(["s"]))
      yield* startPipeline(w, pipelineOf([sinkOf("s", sink.url, { ...skip, retry: once })]))
      const [first] = yield* ingest(keyed("t", "k", 3, ["s"]))
      yield* until("k/1 dead", w.queue.aggregate.pipe(Effect.map((c) => c.dead === 1)))
      failing = false
      const replay = yield* Replay.make.pipe(Effect.provide(Layer.succeedContext(w.context)))
      expect((yield* replay.replay({ ords: [first!.ord], seqs: new Set([first!.seq]) })).revived).toBe(1)
      // k/1 waits below the head k/2 (still in flight), and the head says so.
      const lane = Ordering.laneOf("s", "k")
      const head = K.decodeHeadValue((yield* w.store.get("index", K.headKey(first!.ord, lane)))!)
      expect({ seq: head.seq, below: head.below }).toEqual({ seq: first!.seq + 1, below: true })
      yield* until("every hook delivered", Effect.sync(() => sink.delivered("k").length === 3))
      expect(sink.delivered("k")).toEqual([2, 1, 3])
      expect(sink.maxOpen.get("k")).toBe(1)
      yield* until("queue empty", w.queue.aggregate.pipe(Effect.map((c) => c.waiting + c.pending + c.scheduled + c.inflight + c.dead === 0)))
    })
  )

  it.live("an unordered destination of the same hook is not held back by an ordered one", () =>
    Effect.gen(function* () {
      const ordered = yield* startOrderedSink((_k, n) => (n === 1 ? 500 : 204), 2)
      // The unordered sink answers slowly: several of the key's calls are open at once there.
      const unordered = yield* startOrderedSink(() => 204, 60)
      const w = yield* memoryWorld
      const ingest = makeOrderedIngest(w, new Set(["o"]))
      yield* startPipeline(w, pipelineOf([sinkOf("o", ordered.url, { ...skip, retry: slow }), sinkOf("u", unordered.url, { retry: slow })]))
      yield* ingest(keyed("t", "k", 6, ["o", "u"]))
      yield* until("unordered destination has every hook", Effect.sync(() => unordered.delivered("k").length === 6))
      expect([...unordered.delivered("k")].sort((a, b) => a - b)).toEqual(upTo(6))
      expect(unordered.maxOpen.get("k")).toBeGreaterThan(1)
      expect(ordered.delivered("k")).toEqual([])
      expect(new Set(ordered.calls.map((c) => c.n))).toEqual(new Set([1]))
    })
  )

  it.live("a tenant's blocked key does not slow another tenant", () =>
    Effect.gen(function* () {
      // The same ordered sink; b's hooks take as long with a's key blocked (300 rows behind a failing head) as without.
      const run = (blocked: boolean) =>
        Effect.scoped(
          Effect.gen(function* () {
            const sink = yield* startOrderedSink((k, n) => (k === "a" && n === 1 ? 500 : 204))
            const w = yield* memoryWorld
            const ingest = makeOrderedIngest(w, new Set(["o"]))
            yield* startPipeline(w, pipelineOf([sinkOf("o", sink.url, { ...skip, retry: slow, concurrency: 8 })]))
            if (blocked) {
              yield* ingest(keyed("tenant-a", "a", 300, ["o"]))
              yield* until("a's head called", Effect.sync(() => sink.calls.some((c) => c.k === "a")))
            }
            const started = Date.now()
            const hooks = Array.from({ length: 40 }, (_, i) => keyed("tenant-b", `b${i}`, 5, ["o"])).flat()
            yield* ingest(hooks)
            yield* until("b delivered", Effect.sync(() => Array.from({ length: 40 }, (_, i) => sink.delivered(`b${i}`).length).every((n) => n === 5)), 30_000)
            const took = Date.now() - started
            if (blocked) {
              expect(new Set(sink.calls.filter((c) => c.k === "a").map((c) => c.n))).toEqual(new Set([1]))
              expect((yield* w.queue.counters(1)).waiting).toBe(299)
            }
            for (let i = 0; i < 40; i++) expect(sink.delivered(`b${i}`)).toEqual(upTo(5))
            return took
          })
        )
      const alone = yield* run(false)
      const beside = yield* run(true)
      expect(beside, `b alone ${alone} ms, beside a blocked key ${beside} ms`).toBeLessThanOrEqual(2 * alone + 250)
    }), 60_000
  )

  it.live("a tenant's hand-offs do not crowd another tenant out of an ordered sink", () =>
    Effect.gen(function* () {
      // Tenant a's 40 keys of 25 hooks each keep the sink's six places (two calls, four waiting) busy,
      // each settled head handing its place to the key's next hook. Tenant b's 12 hooks arrive meanwhile:
      // once the round has found them, b must get its share of the sink (half, with two tenants wanting
      // it): about one of a's calls for each of b's, not the many a would get with its places passed on regardless.
      const sink = yield* startOrderedSink(() => 204, 5)
      const w = yield* memoryWorld
      const ingest = makeOrderedIngest(w, new Set(["o"]))
      yield* ingest(Array.from({ length: 40 }, (_, i) => keyed("tenant-a", `a${i}`, 25, ["o"])).flat())
      yield* startPipeline(w, pipelineOf([sinkOf("o", sink.url, { ...skip, concurrency: 2, maxWaiting: 4 })]))
      const aDone = () => sink.calls.filter((c) => c.k.startsWith("a") && c.status === 204).length
      yield* until("a's keys flow", Effect.sync(() => aDone() >= 100), 30_000)
      yield* ingest(Array.from({ length: 12 }, (_, i) => ({ tenant: "tenant-b", k: `b${i}`, n: 1, sinks: ["o"] })))
      yield* until("b delivered", Effect.sync(() => Array.from({ length: 12 }, (_, i) => sink.delivered(`b${i}`).length).every((n) => n === 1)), 30_000)
      // From b's first call to its last, in the order the sink answered: a's calls in between.
      const isB = sink.calls.map((c) => c.k.startsWith("b"))
      const between = isB.slice(isB.indexOf(true), isB.lastIndexOf(true) + 1).filter((b) => !b).length
      expect(between, `a's calls among b's 12: ${sink.calls.map((c) => (c.k.startsWith("b") ? "B" : "a")).join("")}`).toBeLessThanOrEqual(2 * 12)
      expect(aDone(), "a's backlog is not drained yet").toBeLessThan(1_000)
    }), 60_000
  )
})
