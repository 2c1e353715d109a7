/**
 * Tenant purge (TEN-1 §6): a tenant's due and dead rows removed in synced chunks, each chunk under
 * the tenant's lock so a purge and a claim or revive never both count one row's removal.
 */
import { Clock, Effect } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import * as K from "../domain/keys.js"
import type { StoreError, StoreShape } from "../store/store.js"
import type { WithTenant } from "./tenant-locks.js"
import type { Lanes } from "./lanes.js"

/** Rows per synced batch of `purgeTenant` (TEN-1 §6). */
export const PURGE_CHUNK = 500

export interface PurgeResult {
  readonly pending: number
  readonly dead: number
  /** false when `maxChunks` stopped it: call again to resume. */
  readonly done: boolean
}

export type PurgeKind = "pending" | "dead"

const purgePendingChunk = (store: StoreShape, withTenant: WithTenant, ord: number, lo: Uint8Array, chunk: number) =>
  withTenant(
    ord,
    Effect.gen(function* () {
      const page = yield* store.scan("index", { lo, hi: Deliveries.tenantDueRange(ord).hi }, { limit: chunk })
      if (page.length === 0) return { purged: 0, scanned: 0, next: lo }
      const ts = page.map((e) => Deliveries.purgeDue(K.decodeDueKey(e.key), K.decodeDueValue(e.value)))
      yield* store.write(Deliveries.batch(ts), { sync: true })
      return { purged: page.length, scanned: page.length, next: K.keyAfter(page[page.length - 1]!.key) }
    })
  )

const purgeDeadChunk = (store: StoreShape, withTenant: WithTenant, ord: number, lo: Uint8Array, chunk: number) =>
  withTenant(
    ord,
    Effect.gen(function* () {
      const range = Deliveries.tenantDeadRange(ord)
      const page = yield* store.scan("index", { lo, hi: range.hi }, { limit: chunk })
      if (page.length === 0) return { purged: 0, scanned: 0, next: lo }
      const refs = page.map((e) => Deliveries.deadKeyOfByTenant(e.key))
      const deadValues = yield* store.multiGet("index", refs.map((r) => r.deadKey))
      const rows = yield* store.multiGet("deliveries", refs.map((r) => K.deliveryKey(r.ref.seq, r.ref.sink)))
      const ts: Array<Deliveries.Transition> = []
      refs.forEach((r, i) => {
        const v = deadValues[i]
        // Only rows the fold counts as this tenant's dead: a broken mirror is left for store check.
        if (v === undefined || K.decodeDeadValue(v).ord !== ord) return
        // bytes drops by exactly what the fold counts for the row: its delivery row's size, 0 if gone.
        ts.push(Deliveries.purgeDead(r.ref, ord, Deliveries.decodeRow(rows[i])?.size ?? 0))
      })
      if (ts.length > 0) yield* store.write(Deliveries.batch(ts), { sync: true })
      return { purged: ts.length, scanned: page.length, next: K.keyAfter(page[page.length - 1]!.key) }
    })
  )

export const purgeTenant =
  (store: StoreShape, withTenant: WithTenant, lanes?: Lanes) =>
  (
    ord: number,
    kinds: ReadonlyArray<PurgeKind>,
    options?: { readonly chunk?: number; readonly maxChunks?: number }
  ): Effect.Effect<PurgeResult, StoreError> =>
    Effect.gen(function* () {
      const chunk = Math.max(1, options?.chunk ?? PURGE_CHUNK)
      const maxChunks = options?.maxChunks ?? Infinity
      let chunks = 0
      let pending = 0
      let dead = 0
      // One pass over each range with a cursor: never re-reads the purged keys (tombstones in RocksDB)
      // nor rows left behind (a broken mirror). A row enqueued behind the cursor meanwhile survives;
      // calling again purges it.
      // Ordered lanes: waiting rows are pending too, purged before the due rows so that no head purged
      // below promotes one of them; then every head whose row went moves its lane on.
      if (kinds.includes("pending") && lanes !== undefined) {
        for (;;) {
          if (chunks >= maxChunks) return { pending, dead, done: false }
          const n = yield* withTenant(ord, lanes.purgeWaiting(ord, chunk))
          // A pass that found no waiting row wrote nothing: it is not a chunk.
          if (n > 0) chunks++
          pending += n
          if (n < chunk) break
        }
      }
      if (kinds.includes("pending")) {
        let lo = Deliveries.tenantDueRange(ord).lo
        for (;;) {
          if (chunks >= maxChunks) return { pending, dead, done: false }
          const r = yield* purgePendingChunk(store, withTenant, ord, lo, chunk)
          chunks++
          pending += r.purged
          lo = r.next
          if (r.scanned < chunk) break
        }
      }
      if (kinds.includes("dead")) {
        let lo = Deliveries.tenantDeadRange(ord).lo
        for (;;) {
          if (chunks >= maxChunks) return { pending, dead, done: false }
          const r = yield* purgeDeadChunk(store, withTenant, ord, lo, chunk)
          chunks++
          dead += r.purged
          lo = r.next
          if (r.scanned < chunk) break
        }
      }
      if (lanes !== undefined) yield* Effect.flatMap(Clock.currentTimeMillis, (now) => lanes.repairHeads(ord, now)).pipe(Effect.catchTag("StoreCorrupt", Effect.die))
      return { pending, dead, done: true }
    })
