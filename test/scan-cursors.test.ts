/**
 * Scan cursors (src/delivery/cursors.ts, docs/delivery.md "Scan cursors"): a tenant's due reads
 * start at its cursor, kept when it drains; a row committed below the cursor is still claimed.
 * The discovery scan's floor (src/delivery/marker-floor.ts): a pass over the active index starts
 * past the seconds whose markers are all deleted; a marker written below it is still found.
 * Lingering markers (src/delivery/lingering.ts): a marker a visit left in its own second is
 * deleted by the tenant's next visit once that second has passed, found without the slice.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, type Scope } from "effect"
import { CURSOR_VERIFY_MS, makeCursors } from "../src/delivery/cursors.js"
import { makeLingering } from "../src/delivery/lingering.js"
import { FLOOR_SLACK_MS, FLOOR_VERIFY_MS, makeMarkerFloor } from "../src/delivery/marker-floor.js"
import { DISCOVERY_MARKERS } from "../src/delivery/options.js"
import { bucketOf } from "../src/domain/keys.js"
import { makeIngest, memoryWorld, rocksWorld, sinkOf, startPipeline, type World } from "./pipeline-world.js"
import { startSink } from "./sink-server.js"

/**
 * Ticks every 50 ms until one claims something, or `limitMs` passed: the rows it claimed, and the ms
 * it took. `elsewhere`: rows the pipeline's own ticks (woken by its outcome commits) claimed meanwhile.
 */
const firstClaims = (
  pipeline: { readonly tick: Effect.Effect<{ readonly claimed: ReadonlyArray<{ readonly seq: number }> }, unknown> },
  limitMs: number,
  elsewhere: () => ReadonlyArray<number> = () => []
) =>
  Effect.gen(function* () {
    const started = Date.now()
    const seqs: Array<number> = []
    while (seqs.length === 0 && Date.now() - started < limitMs) {
      for (const r of (yield* pipeline.tick).claimed) seqs.push(r.seq)
      if (seqs.length === 0) seqs.push(...elsewhere())
      if (seqs.length === 0) yield* Effect.sleep(50)
    }
    return { seqs, ms: Date.now() - started }
  })

const lateRowCase = (world: Effect.Effect<World, never, Scope.Scope>) =>
  Effect.gen(function* () {
    const w = yield* world
    const sink = yield* startSink()
    const ingest = makeIngest(w.store)
    // A second's start: the late row below shares the first row's second, so the discovery floor
    // (that second, marker-floor.ts) does not hide its marker and only the cursor stands in its way.
    const base = Math.floor((Date.now() - 60_000) / 1000) * 1000
    yield* ingest([
      { tenant: "t", sinks: ["s"], at: base + 2_000 },
      { tenant: "t", sinks: ["s"], at: base + 3_000 }
    ])
    const { pipeline } = yield* startPipeline(w, { tickMs: 60_000, maxInflight: 1_000, sinks: [sinkOf("s", sink.url)] })
    const first = yield* pipeline.tick
    expect(first.claimed.map((r) => r.at)).toEqual([base + 2_000, base + 3_000])
    // Below the cursor (base + 3000), and with no hint: found by the cursor's next check.
    const [late] = yield* ingest([{ tenant: "t", sinks: ["s"], at: base + 2_500 }])
    // A tick the first rows' outcome commit woke may claim it too (then the sink has it).
    const got = yield* firstClaims(pipeline, CURSOR_VERIFY_MS * 3, () => (sink.received.some((r) => r.headers["webhook-id"] === late!.id) ? [late!.seq] : []))
    expect(got.seqs).toEqual([late!.seq])
    expect(got.ms).toBeLessThan(CURSOR_VERIFY_MS * 2)
  })

/** A tenant's first row lands 60 s before now, below the floor a pass raised, with no hint: a floor check finds it. */
const markerBelowFloorCase = (world: Effect.Effect<World, never, Scope.Scope>) =>
  Effect.gen(function* () {
    const w = yield* world
    const sink = yield* startSink()
    const ingest = makeIngest(w.store)
    yield* ingest([{ tenant: "t", sinks: ["s"], at: Date.now() }])
    const { pipeline } = yield* startPipeline(w, { tickMs: 60_000, maxInflight: 1_000, sinks: [sinkOf("s", sink.url)] })
    // The first pass starts at the index's start and raises the floor; the next ones start there.
    expect((yield* pipeline.tick).claimed.length).toBe(1)
    yield* pipeline.tick
    const [late] = yield* ingest([{ tenant: "u", sinks: ["s"], at: Date.now() - 60_000 }])
    const got = yield* firstClaims(pipeline, FLOOR_VERIFY_MS * 3)
    expect(got.seqs).toEqual([late!.seq])
    expect(got.ms).toBeLessThan(FLOOR_VERIFY_MS * 2)
  })

/** Until the clock is in the first `ms` of a second. */
const secondStart = (ms: number) =>
  Effect.promise(async () => {
    while (Date.now() % 1000 >= ms) await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000)))
  })
/** Until the next second has begun. */
const nextSecond = Effect.promise(() => new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 10)))

/** The buckets of `ord`'s markers due by `now`, read from the whole active index. */
const markersOf = (w: World, ord: number, now: number) =>
  Effect.map(w.queue.markerSlice(now, undefined, 100_000, 0), (s) => s.tenants.find((t) => t.ord === ord)?.buckets ?? [])

/**
 * Tenant t's row is claimed in its own second S, which leaves its marker (TEN-1 §5). In S + 1 a
 * slice of DISCOVERY_MARKERS other tenants' markers of S − 1 comes before t's, so the slice does
 * not reach it: only the lingering hand-off brings t back, and its visit deletes the marker.
 */
const lingeringCase = (world: Effect.Effect<World, never, Scope.Scope>) =>
  Effect.gen(function* () {
    const w = yield* world
    // No call answers during the test: no outcome commit wakes a tick of the pipeline's own between ours.
    const sink = yield* startSink(() => ({ status: 204, delayMs: 3_000 }))
    const ingest = makeIngest(w.store)
    yield* secondStart(300)
    const s = Math.floor(Date.now() / 1000)
    const early = Array.from({ length: DISCOVERY_MARKERS }, (_, i) => ({ tenant: `u${i}`, sinks: ["s"], at: (s - 60) * 1000 }))
    const ingested = yield* ingest([...early, { tenant: "t", sinks: ["s"], at: Date.now() }])
    const t = ingested[ingested.length - 1]!
    const { pipeline } = yield* startPipeline(w, { tickMs: 60_000, maxInflight: 1_000, sinks: [sinkOf("s", sink.url, { concurrency: 4 * DISCOVERY_MARKERS })] })
    // The first slice is the early tenants' markers; the second reaches t's, still in second S.
    expect((yield* pipeline.tick).claimed.length).toBe(DISCOVERY_MARKERS)
    expect((yield* pipeline.tick).claimed.map((r) => r.seq)).toEqual([t.seq])
    expect(Math.floor(Date.now() / 1000)).toBe(s)
    expect(yield* markersOf(w, t.ord, Date.now())).toEqual([s])
    yield* ingest(Array.from({ length: DISCOVERY_MARKERS }, (_, i) => ({ tenant: `v${i}`, sinks: ["s"], at: (s - 1) * 1000 })))
    yield* nextSecond
    const third = yield* pipeline.tick
    expect(third.claimed.length).toBe(DISCOVERY_MARKERS)
    expect(third.visited).toContain(t.ord)
    expect(yield* markersOf(w, t.ord, Date.now())).toEqual([])
  })

describe("scan cursors", () => {
  it("the discovery floor rises to a pass's first marker but stays FLOOR_SLACK_MS behind now, is lowered by a row below it, and a pass starts at the index's start once per FLOOR_VERIFY_MS", () => {
    const f = makeMarkerFloor()
    const now = 1_000_000
    // The first pass verifies: from the index's start.
    expect(f.from(now)).toBe(0)
    f.passed(990, now)
    expect(f.from(now + 1)).toBe(990)
    // No marker at all: the floor stops FLOOR_SLACK_MS before now.
    f.passed(undefined, now + 1)
    expect(f.from(now + 2)).toBe(Math.floor((now + 1 - FLOOR_SLACK_MS) / 1000))
    f.lower(500_000)
    expect(f.from(now + 3)).toBe(500)
    // A lowering after the pass started is not undone: the pass's first marker is the lowest it saw.
    f.passed(700, now + 3)
    expect(f.from(now + 4)).toBe(700)
    expect(f.from(now + FLOOR_VERIFY_MS - 1)).toBe(700)
    expect(f.from(now + FLOOR_VERIFY_MS)).toBe(0)
  })

  it("a cursor is lowered, never raised, by a hint; a check comes at most once per CURSOR_VERIFY_MS", () => {
    const c = makeCursors()
    expect(c.floorOf(1)).toBe(0)
    c.set(1, 5_000)
    c.lower(1, 7_000)
    expect(c.floorOf(1)).toBe(5_000)
    c.lower(1, 4_000)
    expect(c.floorOf(1)).toBe(4_000)
    expect(c.verify(1, 10_000)).toBe(true)
    expect(c.verify(1, 10_000 + CURSOR_VERIFY_MS - 1)).toBe(false)
    expect(c.verify(1, 10_000 + CURSOR_VERIFY_MS)).toBe(true)
  })

  it("the cursors are bounded: past the bound they are cleared whole and read from 0", () => {
    const c = makeCursors(2)
    c.set(1, 100)
    c.set(2, 200)
    c.set(3, 300)
    expect([c.floorOf(1), c.floorOf(2), c.floorOf(3)]).toEqual([0, 0, 300])
  })

  it("lingering markers: the tenants whose visits left this second's marker come back once, after it, at most the bound a second", () => {
    const l = makeLingering(2)
    l.left(10, [
      { ord: 1, markers: [9, 10] },
      { ord: 2, markers: [9] },
      { ord: 3, markers: [10] },
      { ord: 4, markers: [10] }
    ])
    // Tenant 2 left no marker of second 10; tenant 4 is past the bound (the slice finds its marker).
    expect(l.size()).toBe(2)
    expect(l.due(10)).toEqual([])
    expect(l.due(11)).toEqual([
      [1, 10],
      [3, 10]
    ])
    expect(l.due(12)).toEqual([])
  })

  it.live("a marker a visit leaves in its own second is deleted by the tenant's next visit after it, without the slice", () => Effect.scoped(lingeringCase(memoryWorld)))
  it.live("a row committed below its tenant's cursor is claimed within a cursor check", () => Effect.scoped(lateRowCase(memoryWorld)))
  it.live("a row committed below its tenant's cursor is claimed within a cursor check (RocksDB)", () => Effect.scoped(lateRowCase(rocksWorld)))
  it.live("a marker written below the discovery floor without a hint is found within a floor check (RocksDB)", () => Effect.scoped(markerBelowFloorCase(rocksWorld)))
})
