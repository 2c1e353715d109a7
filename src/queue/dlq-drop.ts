/** Dropping dead rows by the DLQ ceiling (docs/operations.md "DLQ ceiling"): sizes, then the drop under the tenant's lock. */
import { Clock, Effect } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import * as K from "../domain/keys.js"
import type { Entry, StoreError, StoreShape } from "../store/store.js"
import type { WithTenant } from "./tenant-locks.js"
import type { Lanes } from "./lanes.js"

/** The size of the delivery row behind each `?x` entry (0 where gone). */
export const deadSizes =
  (store: StoreShape) =>
  (entries: ReadonlyArray<Entry>): Effect.Effect<Array<number>, StoreError> =>
    store
      .multiGet("deliveries", entries.map((e) => {
        const r = K.decodeDeadKey(e.key)
        return K.deliveryKey(r.seq, r.sink)
      }))
      .pipe(Effect.map((rows) => rows.map((v) => Deliveries.decodeRow(v)?.size ?? 0)))

/**
 * Drop these `?x` rows of one tenant under its lock (so a replay or a purge never counts the same
 * row's removal twice), in one synced batch; rows gone since the caller's scan are skipped.
 * Returns the sizes dropped, row by row.
 */
export const dropDead =
  (store: StoreShape, withTenant: WithTenant, lanes?: Lanes) =>
  (ord: number, entries: ReadonlyArray<Entry>): Effect.Effect<Array<number>, StoreError> =>
    withTenant(
      ord,
      Effect.gen(function* () {
        const refs = entries.map((e) => K.decodeDeadKey(e.key))
        const still = yield* store.multiGet("index", entries.map((e) => e.key))
        const found = yield* store.multiGet("deliveries", refs.map((r) => K.deliveryKey(r.seq, r.sink)))
        const ts: Array<Deliveries.Transition> = []
        const sizes: Array<number> = []
        refs.forEach((ref, i) => {
          const v = still[i]
          if (v === undefined || K.decodeDeadValue(v).ord !== ord) return
          const size = Deliveries.decodeRow(found[i])?.size ?? 0
          ts.push(Deliveries.purgeDead(ref, ord, size))
          sizes.push(size)
        })
        if (ts.length > 0) yield* store.write(Deliveries.batch(ts), { sync: true })
        // A dropped row that held its lane (onDead hold): the lane moves on.
        if (ts.length > 0 && lanes !== undefined) yield* Effect.flatMap(Clock.currentTimeMillis, (now) => lanes.repairHeads(ord, now)).pipe(Effect.catchTag("StoreCorrupt", Effect.die))
        return sizes
      })
    )
