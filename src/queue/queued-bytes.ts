/**
 * `QueuedBytes`: every tenant's `bytes` counter (TEN-1 §4) in memory, so that
 * admission (TEN-2, `tenants.limits.maxQueuedBytes`) reads it without a store
 * read. Exact, not an estimate: the counters are read once when the service
 * starts, before anything writes (serve builds it before the Writer, the
 * pipeline and the lifecycle fibers), and from then on every batch the store
 * applies adds its `bytes` merges (the store's `onCommitted`, which runs as
 * a write ends and before its caller resumes). A counter only moves by a
 * merge in a batch, so the figure is the counter as of the last write ended.
 * One float64 an ordinal: 8 MiB at a million tenants.
 */
import { Context, Effect, Layer, Stream } from "effect"
import * as Counters from "../domain/counters.js"
import { Families, familyDataRange } from "../domain/families.js"
import { counterKeyOrd, decodeCounterKey } from "../domain/keys.js"
import { decodeInt64LE, type Merge } from "../domain/ops.js"
import { Store, type StoreError } from "../store/store.js"

export interface QueuedBytesShape {
  /** The tenant's `bytes` counter as of the last write that ended (0 for an ordinal never seen). */
  readonly of: (ord: number) => number
}

export class QueuedBytes extends Context.Service<QueuedBytes, QueuedBytesShape>()("ankusa/QueuedBytes") {}

const BYTES = Counters.Fields.bytes
/** The field of a counter key: its last byte (`<<?k, ord::32, field::8>>`, src/domain/keys.ts). */
const fieldOf = (key: Uint8Array): number => key[key.length - 1]!

export const make = Effect.gen(function* () {
  const store = yield* Store
  let figures = new Float64Array(1024)
  const add = (ord: number, delta: number) => {
    if (ord >= figures.length) {
      const grown = new Float64Array(Math.max(ord + 1, figures.length * 2))
      grown.set(figures)
      figures = grown
    }
    figures[ord] = figures[ord]! + delta
  }
  const observe = (merges: ReadonlyArray<Merge>) => {
    for (const op of merges) if (fieldOf(op.key) === BYTES) add(counterKeyOrd(op.key), Number(op.delta))
  }
  yield* Stream.runForEach(store.stream("counters", familyDataRange(Families.counters), { chunk: 4096 }), (e) =>
    Effect.sync(() => {
      const k = decodeCounterKey(e.key)
      if (k.field === BYTES) add(k.ord, Number(decodeInt64LE(e.value)))
    })
  )
  const remove = store.marks.onCommitted(observe)
  yield* Effect.addFinalizer(() => Effect.sync(remove))
  return { of: (ord) => (ord < figures.length ? figures[ord]! : 0) } satisfies QueuedBytesShape
})

export const layer: Layer.Layer<QueuedBytes, StoreError, Store> = Layer.effect(QueuedBytes, make)
