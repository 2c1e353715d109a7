/**
 * The settle of a claimed row (TEN-1 §3, §6; docs/delivery.md "Outcomes"): the pipeline says what
 * became of a call and the queue turns it into its transition. One write per batch of outcomes,
 * unsynced (a lost outcome leaves its row `?F`, which boot recovery puts back due).
 */
import { Clock, Effect } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import * as K from "../domain/keys.js"
import type { StoreError, StoreShape } from "../store/store.js"
import type { LaneOf, Lanes, LaneSettle, TakeHeads } from "./lanes.js"

export type DeliveryRow = Deliveries.DeliveryRow

/** What became of one claimed row; `lane` when its hook has an ordering key (docs/delivery.md "Ordered delivery"). */
export type Outcome =
  | { readonly _tag: "Delivered"; readonly ref: K.InflightRef; readonly size: number; readonly lane?: LaneOf | undefined }
  | { readonly _tag: "Retry"; readonly ref: K.InflightRef; readonly row: DeliveryRow; readonly at: number; readonly lane?: LaneOf | undefined }
  | {
      readonly _tag: "DeadLetter"
      readonly ref: K.InflightRef
      readonly row: DeliveryRow
      readonly at: number
      readonly hook: { readonly sourceId: string; readonly id: string }
      readonly lane?: LaneOf | undefined
    }
  /** The hook is gone or undecodable: nothing to deliver, the row goes. */
  | { readonly _tag: "Dropped"; readonly ref: K.InflightRef; readonly size: number; readonly lane?: LaneOf | undefined }

const transitionOf = (o: Outcome, lane?: K.DeadLane): Deliveries.Transition => {
  switch (o._tag) {
    case "Delivered":
      return Deliveries.delivered(o.ref, o.size)
    case "Retry":
      return Deliveries.retry(o.ref, o.row, o.at)
    case "DeadLetter":
      return Deliveries.deadLetter(o.ref, o.row, o.at, o.hook, lane)
    case "Dropped":
      return Deliveries.orphanDrop(o.ref, o.size)
  }
}

/** The outcomes that may settle a lane's head (a retry keeps it). */
const laneSettles = (outcomes: ReadonlyArray<Outcome>): Map<Outcome, LaneSettle> => {
  const out = new Map<Outcome, LaneSettle>()
  for (const o of outcomes) if (o.lane !== undefined && o._tag !== "Retry") out.set(o, { ref: o.ref, lane: o.lane, dead: o._tag === "DeadLetter" })
  return out
}

/**
 * The heads a hand-off is offered: none of a tenant being erased (`fenced`) or whose inflight rows
 * an erase took back (`taken`); those are promoted due, where the erase finds them.
 */
const offered = (take: TakeHeads, out: (ord: number) => boolean): TakeHeads => (heads) => {
  const mine = heads.filter((h) => !out(h.row.ord))
  if (mine.length === heads.length) return take(heads)
  return Effect.map(mine.length === 0 ? Effect.succeed([]) : take(mine), (got) => {
    let j = 0
    return heads.map((h) => (out(h.row.ord) ? false : got[j++] === true))
  })
}

/**
 * `taken`: tenants whose inflight rows an erase took back (Queue.takeBack); their outcomes are dropped, in the same run as the write is sent.
 * Outcomes of rows with lanes settle through `lanes`, in the same batch as the lanes' next heads,
 * which `take` (the pipeline's hand-off) may claim in that batch too.
 */
export const settle =
  (store: StoreShape, taken: ReadonlySet<number> = new Set(), lanes?: Lanes, fenced: ReadonlySet<number> = new Set()) =>
  (outcomes: ReadonlyArray<Outcome>, take?: TakeHeads): Effect.Effect<void, StoreError> =>
    Effect.suspend(() => {
      const kept = taken.size === 0 ? outcomes : outcomes.filter((o) => !taken.has(o.ref.ord))
      if (kept.length === 0) return Effect.void
      const laned = lanes === undefined ? undefined : laneSettles(kept)
      if (laned === undefined || laned.size === 0) return store.write(Deliveries.batch(kept.map((o) => transitionOf(o))), { sync: false })
      return Effect.flatMap(Clock.currentTimeMillis, (now) =>
        lanes!.settle(
          [...laned.values()],
          (dead) => kept.map((o) => {
            const l = laned.get(o)
            return transitionOf(o, l === undefined ? undefined : dead.get(l))
          }),
          now,
          take === undefined ? undefined : offered(take, (ord) => taken.has(ord) || fenced.has(ord))
        )
      )
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
