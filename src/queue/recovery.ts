/** Boot recovery of inflight rows: run once, before the pipeline starts. */
import { Effect, Stream } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import * as K from "../domain/keys.js"
import { familyRows } from "../store/family.js"
import type { StoreCorrupt, StoreError, StoreShape } from "../store/store.js"

/** Rows per synced batch of `recoverInflight`. */
export const RECOVER_CHUNK = 500

// Every ?F row back to due, kind 0, in synced chunks.
export const recoverInflight =
  (store: StoreShape) =>
  (now: number): Effect.Effect<number, StoreError | StoreCorrupt> =>
    familyRows(store, K.Families.inflight, { chunk: RECOVER_CHUNK }).pipe(
      Stream.grouped(RECOVER_CHUNK),
      Stream.runFoldEffect(() => 0, (n, rows) => {
        const ts = rows.map((e) => Deliveries.recover(K.decodeInflightKey(e.key), K.decodeSizeValue(e.value), now))
        return store.write(Deliveries.batch(ts), { sync: true }).pipe(Effect.as(n + ts.length))
      })
    )

/** One tenant's `?F` rows back to due (TEN-5 step 2 past its timeout), in synced chunks; the caller holds its lock. */
export const takeBackInflight = (store: StoreShape, ord: number, now: number): Effect.Effect<number, StoreError> =>
  Effect.gen(function* () {
    let n = 0
    for (;;) {
      const page = yield* store.scan("index", Deliveries.tenantInflightRange(ord), { limit: RECOVER_CHUNK })
      if (page.length === 0) return n
      const ts = page.map((e) => Deliveries.recover(K.decodeInflightKey(e.key), K.decodeSizeValue(e.value), now))
      yield* store.write(Deliveries.batch(ts), { sync: true })
      n += ts.length
    }
  })
