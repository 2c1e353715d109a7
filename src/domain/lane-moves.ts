/**
 * The transitions of ordered lanes (docs/delivery.md "Ordered delivery"): rows moving between a
 * lane's waiting rows (`?W`), its head (`?H`) and the due index, each with its counter deltas.
 * The `?W`/`?H` ops are ordering.ts's, the due ops deliveries.ts's. Pure.
 */
import { delta } from "./counters.js"
import { clearedPut, deadDels, dueOps, freshRow, inflightPut, revive, rowDel, rowPut, type Transition } from "./deliveries.js"
import * as K from "./keys.js"
import * as Ordering from "./ordering.js"

/** A lane's first waiting row becomes its head: `?W` → due (kind 0, at `at`) and `?H` names it. */
export const promote = (r: Ordering.LaneRow, size: number, at: number): Transition => ({
  ops: [Ordering.waitDel(r), ...dueOps({ ord: r.ord, at, seq: r.seq, sink: r.sink, size, kind: 0 }), Ordering.headPut(r, false)],
  deltas: [delta(r.ord, "waiting", -1), delta(r.ord, "pending", 1)]
})

/**
 * A lane's first waiting row becomes its head and is claimed in the same batch (the settle's hand-off
 * to the pipeline, docs/delivery.md "The hand-off"): `?W` → `?F` with no due row in between.
 */
export const promoteClaimed = (r: Ordering.LaneRow, size: number): Transition => ({
  ops: [Ordering.waitDel(r), inflightPut(r.ord, r.seq, r.sink, size), Ordering.headPut(r, false)],
  deltas: [delta(r.ord, "waiting", -1), delta(r.ord, "inflight", 1)]
})

/** The lane's head settled and nothing waits: the lane is free. */
export const laneFree = (ref: K.LaneRef): Transition => ({ ops: [Ordering.headDel(ref)], deltas: [] })

/** onDead hold: the dead-lettered head stays the head, held, until it is replayed, purged or discarded. */
export const laneHold = (r: Ordering.LaneRow, below: boolean): Transition => ({ ops: [Ordering.headPut(r, true, below)], deltas: [] })

/** A replay put a `?W` row below the head's place: the head says so (its successor is sought from the lane's start). */
export const headBelow = (r: Ordering.LaneRow, held: boolean): Transition => ({ ops: [Ordering.headPut(r, held, true)], deltas: [] })

/** Replay of a dead row into a lane whose head is another row: it waits in the lane, at its own seq. */
export const reviveWaiting = (ref: K.DeadRef, r: Ordering.LaneRow, size: number): Transition => ({
  ops: [
    ...deadDels(ref, r.ord),
    rowPut(ref.seq, ref.sink, freshRow(size)),
    Ordering.waitPut(r, size)
  ],
  deltas: [delta(r.ord, "dead", -1), delta(r.ord, "waiting", 1)]
})

/** Replay of a dead row that is (or becomes) its lane's head: revived due, and `?H` names it live (`below` kept). */
export const reviveHead = (ref: K.DeadRef, r: Ordering.LaneRow, size: number, at: number, below: boolean): Transition => {
  const t = revive(ref, r.ord, size, at)
  return { ops: [...t.ops, Ordering.headPut(r, false, below)], deltas: t.deltas }
}

/** Purge of a waiting row: `?W` and the delivery row go, `?c` for reclaim. */
export const purgeWaiting = (r: Ordering.LaneRow, size: number): Transition => ({
  ops: [Ordering.waitDel(r), rowDel(r.seq, r.sink), clearedPut(r.seq)],
  deltas: [delta(r.ord, "waiting", -1), delta(r.ord, "bytes", -size)]
})
