/**
 * The ordered lanes' transitions (src/queue/lanes.ts; docs/delivery.md "Ordered delivery", "Finding
 * the successor") on the memory store, without a pipeline: a settle reads a lane's next row from
 * its head's place or from the rows it remembered, and that must always be the row a read from the
 * lane's first key would find.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import fc from "fast-check"
import * as Deliveries from "../src/domain/deliveries.js"
import * as K from "../src/domain/keys.js"
import * as Ordering from "../src/domain/ordering.js"
import { checkStore } from "../src/queue/format/check.js"
import * as Queue from "../src/queue/queue.js"
import type { DueEntry, Outcome, TakeHeads } from "../src/queue/queue.js"
import * as Replay from "../src/queue/replay.js"
import { makeMemoryStore } from "../src/store/memory.js"
import { Store, StoreError } from "../src/store/store.js"
import { makeOrderedIngest } from "./ordered-world.js"

type Op =
  | { readonly t: "ingest"; readonly keys: ReadonlyArray<number> }
  /**
   * `fail`: the settle's first write fails (the committer then writes the same outcome again);
   * `take`: the pipeline's hand-off takes the new head (claimed in the settle's batch).
   */
  | { readonly t: "settle"; readonly pick: number; readonly dead: boolean; readonly fail: boolean; readonly take: boolean }
  | { readonly t: "replay"; readonly pick: number }
  /** The tenant's pending rows purged (due and waiting; inflight heads stay, and settle later). */
  | { readonly t: "purge" }

const KEYS = ["a", "b"]
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ t: fc.constant("ingest" as const), keys: fc.array(fc.integer({ min: 0, max: KEYS.length - 1 }), { minLength: 1, maxLength: 12 }) }),
  fc.record({ t: fc.constant("settle" as const), pick: fc.nat(), dead: fc.boolean(), fail: fc.boolean(), take: fc.boolean() }),
  // Plain deliveries once more, so that lanes move on more often than they fill with dead rows.
  fc.record({ t: fc.constant("settle" as const), pick: fc.nat(), dead: fc.constant(false), fail: fc.constant(false), take: fc.boolean() }),
  fc.record({ t: fc.constant("replay" as const), pick: fc.nat() }),
  fc.record({ t: fc.constant("purge" as const) })
)

const run = (ops: ReadonlyArray<Op>) =>
  Effect.gen(function* () {
    // The memory store, whose next write fails while `failing` is set.
    const inner = yield* makeMemoryStore()
    let failing = false
    const store = {
      ...inner,
      write: (...args: Parameters<typeof inner.write>) =>
        Effect.suspend(() => (failing ? ((failing = false), Effect.fail(new StoreError({ op: "write", message: "injected" }))) : inner.write(...args)))
    }
    const context = yield* Layer.build(Queue.layer.pipe(Layer.provideMerge(Layer.succeed(Store, store)))).pipe(Effect.orDie)
    const w = { store, queue: Context.get(context, Queue.Queue), context }
    const ingest = makeOrderedIngest(w, new Set(["o"]))
    const replay = yield* Replay.make.pipe(Effect.provide(Layer.succeedContext(w.context)))
    const keyOf = new Map<number, string>()
    const inflight: Array<DueEntry> = []
    const dead: Array<number> = []
    let ord = 0
    const laneRef = (k: string) => ({ ord, lane: Ordering.laneOf("o", k) })
    /** A lane's first waiting row, read from the lane's first key (the truth the settle must match). */
    const firstWaiting = (k: string) =>
      Effect.map(w.store.scan("index", Ordering.laneWaitingRange(laneRef(k)), { limit: 1 }), (page) => (page[0] === undefined ? undefined : K.decodeWaitingKey(page[0].key).seq))
    const head = (k: string) => Effect.map(w.store.get("index", Ordering.headKey(laneRef(k))), (v) => (v === undefined ? undefined : K.decodeHeadValue(v)))

    for (const o of ops) {
      if (o.t === "ingest") {
        const accepted = yield* ingest(o.keys.map((i, n) => ({ tenant: "t", k: KEYS[i]!, n, sinks: ["o"] })))
        for (const a of accepted) keyOf.set(a.seq, a.k!)
        ord = accepted[0]!.ord
      } else if (o.t === "settle") {
        if (ord === 0) continue
        // Every due head claimed; one of the claimed ones settles.
        const visits = yield* w.queue.claim(Date.now() + 60_000, [{ ord, floorAt: 0, limit: 100 }], 100, 1e9)
        for (const v of visits) inflight.push(...v.rows)
        if (inflight.length === 0) continue
        const [e] = inflight.splice(o.pick % inflight.length, 1)
        const k = keyOf.get(e!.ref.seq)!
        const expected = yield* firstWaiting(k)
        const ref = { ord, seq: e!.ref.seq, sink: e!.ref.sink }
        const lane = { lane: laneRef(k).lane, hold: false }
        const now = Date.now()
        const outcome: Outcome = o.dead
          ? { _tag: "DeadLetter", ref, row: { ...Deliveries.freshRow(e!.value.size), attempts: 1, lastStatus: 500, lastAt: now }, at: now, hook: { sourceId: "src", id: `msg_${ref.seq}` }, lane }
          : { _tag: "Delivered", ref, size: e!.value.size, lane }
        // The hand-off takes every head offered; a head taken by the write that succeeded is inflight now.
        let taken: Array<DueEntry> = []
        const take: TakeHeads = (heads) =>
          Effect.sync(() => {
            taken = heads.map((h) => ({ ref: { ord: h.row.ord, at: now, seq: h.row.seq, sink: h.row.sink }, value: { size: h.size, kind: 0 as const } }))
            return heads.map(() => true)
          })
        failing = o.fail
        const first = yield* Effect.exit(w.queue.settle([outcome], o.take ? take : undefined))
        expect(first._tag, "the settle's first write").toBe(o.fail ? "Failure" : "Success")
        if (o.fail) {
          taken = []
          yield* w.queue.settle([outcome], o.take ? take : undefined)
        }
        inflight.push(...taken)
        if (o.dead) dead.push(ref.seq)
        // The lane's new head is its earliest waiting row, or the lane is free.
        expect((yield* head(k))?.seq, `head of ${k} after ${ref.seq} settled`).toBe(expected)
      } else if (o.t === "purge") {
        if (ord === 0) continue
        expect((yield* w.queue.purgeTenant(ord, ["pending"])).done).toBe(true)
      } else {
        if (dead.length === 0) continue
        const [seq] = dead.splice(o.pick % dead.length, 1)
        expect((yield* replay.replay({ ords: [ord], seqs: new Set([seq!]) })).revived).toBe(1)
      }
      const report = yield* checkStore(w.store)
      expect(report.differences, `after ${JSON.stringify(o)}`).toEqual([])
    }
  })

describe("ordered lanes", () => {
  it.effect("a settled head's successor is the lane's earliest waiting row, after any ingests, settles (some written twice, the first write failing; some handing the next head off), replays and purges", () =>
    Effect.promise(() => fc.assert(fc.asyncProperty(fc.array(op, { minLength: 4, maxLength: 40 }), (ops) => Effect.runPromise(Effect.scoped(run(ops)))), { numRuns: 300 }))
  )
})
