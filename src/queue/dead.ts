/** The DLQ reads: per-tenant pages newest first (`?X` by tenant) and the global `?x` page with a tenant filter. */
import { Effect } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import * as K from "../domain/keys.js"
import type { StoreError, StoreShape } from "../store/store.js"

/** Largest page of `dead` and `deadPage`. */
export const DEAD_MAX_LIMIT = 1000
/** `?x` rows one `deadPage` call scans at most (its tenant filter may match few of them). */
export const DEAD_PAGE_MAX_SCANNED = 10_000
/** `?x` rows read per reverse scan page of `deadPage`. */
export const DEAD_PAGE_SCAN_PAGE = 500

export interface DeadItem {
  readonly ord: number
  readonly at: number
  readonly seq: number
  readonly sink: number
  readonly sourceId: string
  readonly id: string
  /** The head of an ordered lane when it died: its lane skipped past it, or holds for it. */
  readonly lane?: K.DeadLane | undefined
}

export interface DeadPage {
  readonly items: ReadonlyArray<DeadItem>
  /** Pass back as `before` / `cursor` for the next (older) page; undefined when nothing older is left. */
  readonly cursor: K.DeadRef | undefined
}

const byNewest = (a: K.DeadRef, b: K.DeadRef): number => b.at - a.at || b.seq - a.seq || b.sink - a.sink

export const dead =
  (store: StoreShape) =>
  ({ ords, limit, before }: {
    readonly ords: ReadonlyArray<number>
    readonly limit: number
    readonly before?: K.DeadRef | undefined
  }): Effect.Effect<DeadPage, StoreError> =>
    Effect.gen(function* () {
      const n = Math.max(0, Math.min(limit, DEAD_MAX_LIMIT))
      if (n === 0) return { items: [], cursor: undefined }
      const found: Array<{ readonly ord: number; readonly ref: K.DeadRef; readonly deadKey: Uint8Array }> = []
      for (const ord of new Set(ords)) {
        const page = yield* store.scan("index", Deliveries.tenantDeadRangeBefore(ord, before), { limit: n, reverse: true })
        for (const e of page) found.push(Deliveries.deadKeyOfByTenant(e.key))
      }
      const taken = found.sort((a, b) => byNewest(a.ref, b.ref)).slice(0, n)
      const values = taken.length === 0 ? [] : yield* store.multiGet("index", taken.map((t) => t.deadKey))
      const items: Array<DeadItem> = []
      taken.forEach((t, i) => {
        const raw = values[i]
        if (raw === undefined) return // revived or purged since the scan
        const v = K.decodeDeadValue(raw)
        // A mirror naming another tenant is a broken invariant (store check reports it): never show it here.
        if (v.ord !== t.ord) return
        items.push({ ord: t.ord, ...t.ref, sourceId: v.sourceId, id: v.id, lane: v.lane })
      })
      return { items, cursor: taken.length === n ? taken[n - 1]!.ref : undefined }
    })

export const deadPage =
  (store: StoreShape) =>
  ({ ord, limit, cursor, maxScanned = DEAD_PAGE_MAX_SCANNED }: {
    readonly ord?: number | undefined
    readonly limit: number
    readonly cursor?: K.DeadRef | undefined
    readonly maxScanned?: number | undefined
  }): Effect.Effect<DeadPage, StoreError> =>
    Effect.gen(function* () {
      const n = Math.max(0, Math.min(limit, DEAD_MAX_LIMIT))
      const family = K.familyDataRange(K.Families.dead)
      let hi = cursor === undefined ? family.hi : K.deadKey(cursor.at, cursor.seq, cursor.sink)
      const items: Array<DeadItem> = []
      let scanned = 0
      let last: K.DeadRef | undefined = cursor
      let exhausted = false
      while (items.length < n && scanned < maxScanned) {
        const want = Math.min(DEAD_PAGE_SCAN_PAGE, maxScanned - scanned, ord === undefined ? n - items.length : Infinity)
        const page = yield* store.scan("index", { lo: family.lo, hi }, { limit: want, reverse: true })
        let consumed = 0
        for (const e of page) {
          consumed++
          const ref = K.decodeDeadKey(e.key)
          last = ref
          const v = K.decodeDeadValue(e.value)
          if (ord === undefined || v.ord === ord) {
            items.push({ ord: v.ord ?? 0, ...ref, sourceId: v.sourceId, id: v.id, lane: v.lane })
            if (items.length === n) break
          }
        }
        scanned += consumed
        if (page.length < want && consumed === page.length) {
          exhausted = true
          break
        }
        hi = page[consumed - 1]!.key
      }
      return { items, cursor: exhausted || n === 0 ? undefined : last }
    })
