/**
 * The active-index marker cleanup (TEN-1 §5, "delete, then verify"). Writers only put markers;
 * this is the only deleter.
 */
import { Effect } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import * as K from "../domain/keys.js"
import type { Op } from "../domain/ops.js"
import type { StoreError, StoreShape } from "../store/store.js"
import { type DueEntry, firstDue } from "./due.js"

export interface CleanupResult {
  /** Step 1's `firstDue`. */
  readonly first: DueEntry | undefined
  /** Buckets whose marker step 2 deleted. */
  readonly deleted: ReadonlyArray<number>
  /** Buckets whose marker step 3 put back. */
  readonly restored: ReadonlyArray<number>
}

/** A tenant to clean up: its candidate markers' buckets. */
export interface CleanupTenant {
  readonly ord: number
  readonly markers: ReadonlyArray<number>
  /**
   * Step 1's answer when the caller already read it (the claim's next row, undefined when the
   * tenant drained): a due row at or after the tenant's true first one. Step 3 always reads.
   */
  readonly known?: { readonly first: DueEntry | undefined }
  /**
   * Without `known`: step 1 reads the first due row at or after this `at` (a seek past the rows below
   * it and their tombstones). For a caller that knows no due row lies below it but those a commit
   * landing late put there: step 3 puts back any marker step 2 deletes for them.
   */
  readonly from?: number
}

/** Where a test may run something inside the cleanup: after step 1, after step 2. */
export type CleanupPoint = "first" | "delete"

export interface CleanupOptions {
  readonly between?: (point: CleanupPoint) => Effect.Effect<void, StoreError>
}

// Each tenant's steps run in §5's order; tenants are independent, so step 1 runs for all of them,
// then one write deletes every tenant's markers, then step 3 runs for all.
export const cleanupMarkersOf = (store: StoreShape) => {
  const firstOf = firstDue(store)
  return (
    tenants: ReadonlyArray<CleanupTenant>,
    now: number,
    options?: CleanupOptions
  ): Effect.Effect<ReadonlyArray<CleanupResult>, StoreError> =>
    Effect.gen(function* () {
      const between = options?.between ?? (() => Effect.void)
      const nowBucket = K.bucketOf(now)
      // Step 1.
      const firsts: Array<DueEntry | undefined> = []
      for (const t of tenants) firsts.push(t.known !== undefined ? t.known.first : yield* firstOf(t.ord, t.from))
      yield* between("first")
      // Step 2. TEN-1 §5: a marker of the current second is never deleted.
      const deletes: Array<Op> = []
      const deleted = tenants.map((t, i) => {
        const first = firsts[i]
        const cut = Math.min(first === undefined ? Infinity : K.bucketOf(first.ref.at), nowBucket)
        const out = [...new Set(t.markers)].filter((b) => b < cut).sort((a, b) => a - b)
        for (const b of out) deletes.push(Deliveries.markerDel(b, t.ord))
        return out
      })
      if (deletes.length > 0) yield* store.write(deletes, { sync: false })
      yield* between("delete")
      // Step 3.
      const puts: Array<Op> = []
      const results: Array<CleanupResult> = []
      for (let i = 0; i < tenants.length; i++) {
        const ord = tenants[i]!.ord
        const gone = deleted[i]!
        const restored: Array<number> = []
        if (gone.length > 0) {
          // Only the deleted buckets matter here, so the read starts at the lowest of them (`gone` is
          // sorted): a row below it is in a bucket whose marker stays, and the seek does not step over
          // the tombstones of the rows claimed before it.
          const again = yield* firstOf(ord, K.bucketStart(gone[0]!))
          if (again !== undefined) {
            const firstBucket = K.bucketOf(again.ref.at)
            if (gone.includes(firstBucket)) restored.push(firstBucket)
            // Beyond §5's letter: rows that landed between steps 1 and 2 in several deleted buckets
            // (two writers, or a revival into the past) all need their marker back, not only the
            // earliest. Only then is first' below a deleted bucket, so the common path costs nothing.
            for (const b of gone) {
              if (b <= firstBucket) continue
              const row = yield* store.first("index", Deliveries.dueRange(ord, K.bucketStart(b), K.bucketStart(b + 1) - 1))
              if (row !== undefined) restored.push(b)
            }
          }
          for (const b of restored) puts.push(Deliveries.markerPut(b, ord))
        }
        results.push({ first: firsts[i], deleted: gone, restored })
      }
      // Synced: an unsynced put-back could be lost in a torn WAL tail that kept the delete before it.
      if (puts.length > 0) yield* store.write(puts, { sync: true })
      return results
    })
}

/** `cleanupMarkersOf` for one tenant. */
export const cleanupMarkers = (store: StoreShape) => {
  const ofMany = cleanupMarkersOf(store)
  return (ord: number, now: number, scannedMarkers: ReadonlyArray<number>, options?: CleanupOptions): Effect.Effect<CleanupResult, StoreError> =>
    Effect.map(ofMany([{ ord, markers: scannedMarkers }], now, options), (r) => r[0]!)
}
