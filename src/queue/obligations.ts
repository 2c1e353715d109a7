/**
 * The archive obligations `?a` (TEN-1 §4) and the reclaim check (TEN-1 §6): the index side of the
 * archive compactor and of reclaim, which own the files and the hooks but not these keys.
 */
import { Effect } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import * as K from "../domain/keys.js"
import type { Op } from "../domain/ops.js"
import type { StoreError, StoreShape } from "../store/store.js"

const OBLIGATIONS = K.familyDataRange(K.Families.archive)

export interface Obligation {
  readonly seq: number
  readonly ord: number
  readonly size: number
}

/** The oldest `limit` archive obligations, in seq order. */
export const archiveObligations =
  (store: StoreShape) =>
  (limit: number): Effect.Effect<Array<Obligation>, StoreError> =>
    store.scan("index", OBLIGATIONS, { limit }).pipe(
      Effect.map((page) =>
        page.map((e) => {
          const v = K.decodeArchiveValue(e.value)
          return { seq: K.decodeArchiveKey(e.key), ord: v.ord, size: v.size }
        })
      )
    )

/**
 * Settles obligations (archived or dropped: the same transition, `archive_pending` −1) together
 * with `extra` (the compactor's cursor) in one synced batch.
 */
export const settleArchive =
  (store: StoreShape) =>
  (settled: ReadonlyArray<Pick<Obligation, "seq" | "ord">>, extra: ReadonlyArray<Op>): Effect.Effect<void, StoreError> =>
    store.write(Deliveries.batch(settled.map((o) => Deliveries.archiveSettle(o.seq, o.ord)), extra), { sync: true })

/** For each hook: true when nothing refers to it any more (no archive obligation, no delivery row). */
export const unreferenced =
  (store: StoreShape) =>
  (seqs: ReadonlyArray<number>): Effect.Effect<Array<boolean>, StoreError> =>
    Effect.gen(function* () {
      // Obligations first or rows first does not matter: neither comes back once gone.
      const obligations = yield* store.multiGet("index", seqs.map(K.archiveKey))
      const out: Array<boolean> = []
      for (let i = 0; i < seqs.length; i++) {
        if (obligations[i] !== undefined) {
          out.push(false)
          continue
        }
        out.push((yield* store.first("deliveries", K.range(K.deliveryPrefix(seqs[i]!)))) === undefined)
      }
      return out
    })
