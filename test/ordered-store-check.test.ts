/**
 * The store check's part of ordered delivery (docs/storage.md "Ordered lanes"): it counts heads,
 * held heads and waiting rows, folds `waiting` into the counters, and finds a lane whose head names
 * a row that is gone, a counter that drifted from the fold and a waiting row below an unmarked head.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Counters from "../src/domain/counters.js"
import * as K from "../src/domain/keys.js"
import { del } from "../src/domain/ops.js"
import * as Ordering from "../src/domain/ordering.js"
import { checkStore } from "../src/queue/format/check.js"
import { memoryWorld } from "./pipeline-world.js"
import { keyed, makeOrderedIngest } from "./ordered-world.js"

describe("ordered delivery: store check", () => {
  it.effect("store check counts the ordering state and finds a planted inconsistency", () =>
    Effect.gen(function* () {
      const w = yield* memoryWorld
      const ingest = makeOrderedIngest(w, new Set(["o"]))
      // Two tenants, three keys: each key's first hook is its lane's head (due), the others wait. "u" does not order.
      yield* ingest([...keyed("t1", "a", 3, ["o", "u"]), ...keyed("t1", "b", 2, ["o"]), ...keyed("t2", "a", 4, ["o"])])
      yield* ingest([{ tenant: "t2", k: undefined, n: 1, sinks: ["o"] }])

      const clean = yield* checkStore(w.store)
      expect(clean.differences).toEqual([])
      expect(clean.ok).toBe(true)
      expect(clean.ordering).toEqual({ heads: 3, held: 0, waiting: 6, lanes: 3, lanesAwaitingHead: 0, headsUnchecked: false })
      expect((yield* w.queue.counters(1)).waiting).toBe(3)
      expect((yield* w.queue.counters(2)).waiting).toBe(3)
      // t1: a's three hooks to "u", and the heads a/1, b/1; t2: a/1 and the unkeyed hook.
      expect((yield* w.queue.counters(1)).pending).toBe(5)
      expect((yield* w.queue.counters(2)).pending).toBe(2)

      // Planted: t2's head row vanishes from the due index without its transition, and t1's waiting counter drifts.
      const heads = yield* w.store.scan("index", K.familyDataRange(K.Families.heads), { limit: 10 })
      const t2Head = heads.map((e) => ({ key: e.key, ...K.decodeHeadKey(e.key), ...K.decodeHeadValue(e.value) })).find((h) => h.ord === 2)!
      const due = yield* w.store.scan("index", K.range(K.duePrefix(2)), { limit: 10 })
      const headRow = due.find((e) => K.decodeDueKey(e.key).seq === t2Head.seq)!
      yield* w.store.write([del("index", headRow.key), ...Counters.ops([Counters.delta(1, "waiting", 1)])], { sync: true })

      const broken = yield* checkStore(w.store)
      expect(broken.ok).toBe(false)
      expect(broken.differences).toContainEqual(
        expect.objectContaining({ problem: "head_without_row", family: "heads", ord: 2, key: Buffer.from(t2Head.key).toString("hex") })
      )
      expect(broken.differences).toContainEqual(expect.objectContaining({ problem: "counter", ord: 1, field: "waiting", expected: 3, found: 4 }))
      expect(broken.differences).toContainEqual(expect.objectContaining({ problem: "counter", ord: 2, field: "pending", expected: 1, found: 2 }))

      // A lane whose head is lost (a crash between the Writer's commit and its promotion) is counted, not a difference.
      const aLane = heads.map((e) => K.decodeHeadKey(e.key)).find((h) => h.ord === 1)!
      yield* w.store.write([del("index", K.headKey(aLane.ord, aLane.lane))], { sync: true })
      const awaiting = yield* checkStore(w.store)
      expect(awaiting.ordering?.lanesAwaitingHead).toBe(1)
      expect(awaiting.differences.filter((d) => d.problem === "head_without_row")).toHaveLength(1)

      // A waiting row below its lane's head that the head does not mark (t2's key a: its head a/1 is seq 6):
      // the settle, which reads on from the head's place, would never reach it.
      const live = (yield* w.store.scan("index", K.familyDataRange(K.Families.heads), { limit: 10 })).map((e) => ({ ...K.decodeHeadKey(e.key), ...K.decodeHeadValue(e.value) }))
      const bLane = live.find((h) => h.ord === 2)!
      expect(bLane.seq).toBe(6)
      yield* w.store.write([Ordering.waitPut({ ord: 2, lane: bLane.lane, seq: 1, sink: 0 }, 10), ...Counters.ops([Counters.delta(2, "waiting", 1)])], { sync: true })
      const unmarked = yield* checkStore(w.store)
      expect(unmarked.differences).toContainEqual(
        expect.objectContaining({ problem: "waiting_below_head", ord: 2, key: Buffer.from(K.waitingKey(2, bLane.lane, 1, 0)).toString("hex") })
      )
      // Marked (as a replay marks it), it is consistent.
      yield* w.store.write([Ordering.headPut({ ord: 2, lane: bLane.lane, seq: bLane.seq, sink: bLane.sink }, false, true)], { sync: true })
      expect((yield* checkStore(w.store)).differences.filter((d) => d.problem === "waiting_below_head")).toEqual([])
    })
  )
})
