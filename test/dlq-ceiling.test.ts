import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Metric } from "effect"
import * as Deliveries from "../src/domain/deliveries.js"
import * as K from "../src/domain/keys.js"
import { checkStore } from "../src/queue/format/check.js"
import * as Ceiling from "../src/lifecycle/dlq-ceiling.js"
import { dlqCeilingDropped, withReason } from "../src/observability/lifecycle-metrics.js"
import * as Queue from "../src/queue/queue.js"
import { Store, type StoreShape } from "../src/store/store.js"
import { layerMemory } from "../src/store/memory.js"
import { aggregate, allocAll, commit, envelopeOf, rowsOf } from "./lifecycle-helpers.js"

const counter = (reason: string) => Metric.value(withReason(dlqCeilingDropped, reason)).pipe(Effect.map((s) => s.count))

/** Hook `seq` of tenant `ord` ingested, claimed and dead-lettered at `at`; returns its row size. */
const deadHook = (store: StoreShape, seq: number, ord: number, at: number, bodyBytes: number) =>
  Effect.gen(function* () {
    const envelope = envelopeOf(seq, ord, at, 1, bodyBytes)
    const size = envelope.length
    yield* commit(store, [Deliveries.ingest({ seq, ord, envelope, sinkCount: 1, at, archive: false })])
    yield* commit(store, [Deliveries.claim({ ord, at, seq, sink: 0 }, { size, kind: 0 })])
    yield* commit(store, [
      Deliveries.deadLetter({ ord, seq, sink: 0 }, { attempts: 5, lastStatus: 500, size, lastAt: at }, at, { sourceId: "src", id: `hook_${seq}` })
    ])
    return size
  })

const deadSeqs = (store: StoreShape) => rowsOf(store, K.Families.dead).pipe(Effect.map((rows) => rows.map((e) => K.decodeDeadKey(e.key).seq)))

describe("dlq ceiling", () => {
  it.effect("the dlq ceiling drops the oldest dead rows and counts them", () =>
    Effect.gen(function* () {
      const store = yield* Store
      yield* store.write(allocAll(3), { sync: false })
      // 20 dead rows across three tenants, dead-lettered in an order unlike their seqs.
      const sizes = new Map<number, number>()
      const order = Array.from({ length: 20 }, (_, i) => ((i * 7) % 20) + 1)
      for (let n = 0; n < order.length; n++) {
        const seq = order[n]!
        sizes.set(seq, yield* deadHook(store, seq, 1 + (seq % 3), 1_000 + n * 10, 10 + seq * 5))
      }
      // A waiting (live) row, which no bound may touch.
      const live = envelopeOf(100, 1, 5_000, 1, 50)
      yield* commit(store, [Deliveries.ingest({ seq: 100, ord: 1, envelope: live, sinkCount: 1, at: 5_000, archive: false })])
      const byAge = [...order] // dead-letter order = oldest first

      const rowsBefore = yield* counter("rows")
      const bytesBefore = yield* counter("bytes")
      const enforce = (o: Partial<Ceiling.DlqCeilingOptions>) =>
        Ceiling.make({ chunk: 4, ...o }).pipe(Effect.flatMap((c) => c.enforce))

      // Rows: 20 > 12, so the 8 oldest go, in chunks of 4 across tenants.
      expect(yield* enforce({ maxRows: 12 })).toEqual({ byRows: 8, byBytes: 0 })
      expect((yield* aggregate(store)).dead).toBe(12)
      expect((yield* deadSeqs(store)).sort((a, b) => a - b)).toEqual(byAge.slice(8).sort((a, b) => a - b))
      expect((yield* counter("rows")) - rowsBefore).toBe(8)
      // Dropped through the counted path: ?X gone with ?x, delivery rows gone, ?c put for reclaim.
      const cleared = (yield* rowsOf(store, K.Families.cleared)).map((e) => K.decodeClearedKey(e.key))
      expect(cleared.sort((a, b) => a - b)).toEqual(byAge.slice(0, 8).sort((a, b) => a - b))
      expect((yield* rowsOf(store, K.Families.dead_by_tenant)).length).toBe(12)
      const report = yield* checkStore(store)
      expect(report.differences).toEqual([])

      // Within bounds: nothing happens.
      expect(yield* enforce({ maxRows: 12 })).toEqual({ byRows: 0, byBytes: 0 })

      // Bytes: a bound just under the queue's bytes minus the three oldest rows' sizes drops exactly those.
      const agg = yield* aggregate(store)
      const three = byAge.slice(8, 11).reduce((n, seq) => n + sizes.get(seq)!, 0)
      expect(yield* enforce({ maxBytes: agg.bytes - three + 1 })).toEqual({ byRows: 0, byBytes: 3 })
      expect((yield* deadSeqs(store)).sort((a, b) => a - b)).toEqual(byAge.slice(11).sort((a, b) => a - b))
      expect((yield* aggregate(store)).bytes).toBe(agg.bytes - three)
      expect((yield* counter("bytes")) - bytesBefore).toBe(3)

      // A byte bound below the live rows empties the DLQ and stops there: the live row stays.
      yield* enforce({ maxBytes: 1 })
      const end = yield* aggregate(store)
      expect(end.dead).toBe(0)
      expect(end.pending).toBe(1)
      expect(end.bytes).toBe(live.length)
      expect((yield* checkStore(store)).differences).toEqual([])
    }).pipe(Effect.provide(Layer.provideMerge(Queue.layer, layerMemory())))
  )
})
