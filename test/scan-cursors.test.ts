/**
 * Scan cursors (src/delivery/cursors.ts, docs/delivery.md "Scan cursors"): a tenant's due reads
 * start at its cursor, kept when it drains; a row committed below the cursor is still claimed.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, type Scope } from "effect"
import { CURSOR_VERIFY_MS, makeCursors } from "../src/delivery/cursors.js"
import { makeIngest, memoryWorld, rocksWorld, sinkOf, startPipeline, type World } from "./pipeline-world.js"
import { startSink } from "./sink-server.js"

const lateRowCase = (world: Effect.Effect<World, never, Scope.Scope>) =>
  Effect.gen(function* () {
    const w = yield* world
    const sink = yield* startSink()
    const ingest = makeIngest(w.store)
    const base = Date.now() - 60_000
    yield* ingest([
      { tenant: "t", sinks: ["s"], at: base + 2_000 },
      { tenant: "t", sinks: ["s"], at: base + 3_000 }
    ])
    const { pipeline } = yield* startPipeline(w, { tickMs: 60_000, maxInflight: 1_000, sinks: [sinkOf("s", sink.url)] })
    const first = yield* pipeline.tick
    expect(first.claimed.map((r) => r.at)).toEqual([base + 2_000, base + 3_000])
    // Below the cursor (base + 3000), and with no hint: found by the cursor's next check.
    const [late] = yield* ingest([{ tenant: "t", sinks: ["s"], at: base + 1_000 }])
    const started = Date.now()
    const claimed: Array<number> = []
    while (claimed.length === 0 && Date.now() - started < CURSOR_VERIFY_MS * 3) {
      for (const r of (yield* pipeline.tick).claimed) claimed.push(r.seq)
      if (claimed.length === 0) yield* Effect.sleep(50)
    }
    expect(claimed).toEqual([late!.seq])
    expect(Date.now() - started).toBeLessThan(CURSOR_VERIFY_MS * 2)
  })

describe("scan cursors", () => {
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

  it.live("a row committed below its tenant's cursor is claimed within a cursor check", () => Effect.scoped(lateRowCase(memoryWorld)))
  it.live("a row committed below its tenant's cursor is claimed within a cursor check (RocksDB)", () => Effect.scoped(lateRowCase(rocksWorld)))
})
