/**
 * The settle of a claimed row (TEN-1 §3, §6; docs/delivery.md "Outcomes"): the pipeline says what
 * became of a call and the queue turns it into its transition. One write per batch of outcomes,
 * unsynced (a lost outcome leaves its row `?F`, which boot recovery puts back due).
 */
import { Effect } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import * as K from "../domain/keys.js"
import type { StoreError, StoreShape } from "../store/store.js"

export type DeliveryRow = Deliveries.DeliveryRow

/** What became of one claimed row. */
export type Outcome =
  | { readonly _tag: "Delivered"; readonly ref: K.InflightRef; readonly size: number }
  | { readonly _tag: "Retry"; readonly ref: K.InflightRef; readonly row: DeliveryRow; readonly at: number }
  | {
      readonly _tag: "DeadLetter"
      readonly ref: K.InflightRef
      readonly row: DeliveryRow
      readonly at: number
      readonly hook: { readonly sourceId: string; readonly id: string }
    }
  /** The hook is gone or undecodable: nothing to deliver, the row goes. */
  | { readonly _tag: "Dropped"; readonly ref: K.InflightRef; readonly size: number }

const transitionOf = (o: Outcome): Deliveries.Transition => {
  switch (o._tag) {
    case "Delivered":
      return Deliveries.delivered(o.ref, o.size)
    case "Retry":
      return Deliveries.retry(o.ref, o.row, o.at)
    case "DeadLetter":
      return Deliveries.deadLetter(o.ref, o.row, o.at, o.hook)
    case "Dropped":
      return Deliveries.orphanDrop(o.ref, o.size)
  }
}

/** `taken`: tenants whose inflight rows an erase took back (Queue.takeBack); their outcomes are dropped, in the same run as the write is sent. */
export const settle =
  (store: StoreShape, taken: ReadonlySet<number> = new Set()) =>
  (outcomes: ReadonlyArray<Outcome>): Effect.Effect<void, StoreError> =>
    Effect.suspend(() => {
      const kept = taken.size === 0 ? outcomes : outcomes.filter((o) => !taken.has(o.ref.ord))
      return kept.length === 0 ? Effect.void : store.write(Deliveries.batch(kept.map(transitionOf)), { sync: false })
    })

/**
 * A claimed row's delivery row (attempts, last status), read only when an outcome needs it (a
 * retry or the DLQ); a row not found reads as a first attempt of `size` bytes.
 */
export const deliveryRow =
  (store: StoreShape) =>
  (ref: K.InflightRef, size: number): Effect.Effect<DeliveryRow, StoreError> =>
    store.get("deliveries", K.deliveryKey(ref.seq, ref.sink)).pipe(Effect.map((v) => Deliveries.decodeRow(v) ?? Deliveries.freshRow(size)))

/** The delivery rows of DLQ items (admin listings), one multi-get; undefined where gone. */
export const deliveryRows =
  (store: StoreShape) =>
  (refs: ReadonlyArray<K.DeliveryRef>): Effect.Effect<Array<DeliveryRow | undefined>, StoreError> =>
    refs.length === 0
      ? Effect.succeed([])
      : store.multiGet("deliveries", refs.map((r) => K.deliveryKey(r.seq, r.sink))).pipe(Effect.map((vs) => vs.map(Deliveries.decodeRow)))
