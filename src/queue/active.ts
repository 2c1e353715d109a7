/**
 * Reads of the active index `?A` (TEN-1 §5): which tenants have markers at or before now, and the
 * age of the oldest due row, verified against its tenant's first due row.
 */
import { Effect } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import * as K from "../domain/keys.js"
import type { StoreError, StoreShape } from "../store/store.js"
import { firstDue } from "./due.js"

/** Distinct tenants `activeTenants` returns by default (TEN-1 §5). */
export const ACTIVE_TENANTS_LIMIT = 4096
/** Markers read per `?A` scan page at most. */
export const ACTIVE_SCAN_PAGE = 1024
/**
 * Markers the first `?A` page reads at fewest; a page is `limit + 1` markers (one bucket holds a
 * tenant's marker once, so that many can show `limit + 1` tenants) and each next page doubles, up to
 * ACTIVE_SCAN_PAGE: a tick asking for 16 tenants reads tens of markers, not a thousand.
 */
export const ACTIVE_SCAN_FIRST_PAGE = 32
/** Markers one `activeTenants` call reads at most, whatever the backlog's spread in seconds. */
export const ACTIVE_SCAN_MAX_MARKERS = 65_536
/** Stale markers `oldestDueAge` verifies and skips before it reports a bucket start (TEN-1 §5). */
export const OLDEST_AGE_MAX_STALE = 32

/** A tenant with markers at or before now: its oldest scanned bucket and every bucket scanned (for the cleanup). */
export interface ActiveTenant {
  readonly ord: number
  readonly bucket: number
  readonly buckets: ReadonlyArray<number>
}

export const activeTenants =
  (store: StoreShape) =>
  (now: number, limit = ACTIVE_TENANTS_LIMIT): Effect.Effect<ReadonlyArray<ActiveTenant>, StoreError> =>
    Effect.gen(function* () {
      const out = new Map<number, Array<number>>()
      if (limit <= 0) return []
      const { hi } = Deliveries.activeRange(now)
      let lo = Deliveries.activeRange(now).lo
      let scanned = 0
      let pageSize = Math.min(ACTIVE_SCAN_PAGE, Math.max(ACTIVE_SCAN_FIRST_PAGE, limit + 1))
      scan: while (scanned < ACTIVE_SCAN_MAX_MARKERS) {
        const want = Math.min(pageSize, ACTIVE_SCAN_MAX_MARKERS - scanned)
        pageSize = Math.min(ACTIVE_SCAN_PAGE, pageSize * 2)
        const page = yield* store.scan("index", { lo, hi }, { limit: want })
        scanned += page.length
        for (const e of page) {
          const m = K.decodeActiveKey(e.key)
          let buckets = out.get(m.ord)
          if (buckets === undefined) {
            if (out.size >= limit) break scan
            buckets = []
            out.set(m.ord, buckets)
          }
          buckets.push(m.bucket)
        }
        if (page.length < want) break
        lo = K.keyAfter(page[page.length - 1]!.key)
      }
      // Map order is first-sight order, and markers come oldest bucket first.
      return [...out].map(([ord, buckets]): ActiveTenant => ({ ord, bucket: buckets[0]!, buckets }))
    })

/** A bounded slice of the markers due by now, and where the next slice starts. */
export interface MarkerSlice {
  readonly tenants: ReadonlyArray<ActiveTenant>
  /** The second of the first marker read (the lowest at or after `from`); undefined when none. */
  readonly first: number | undefined
  /** The key after the last marker read; undefined when the slice reached now's end (start again from the first). */
  readonly next: Uint8Array | undefined
}

/**
 * TEN-3's discovery scan: at most `maxMarkers` markers due by `now`, from `from` (when undefined,
 * the first marker of second `floor` or later: the caller knows none lies below), grouped by
 * tenant in first-sight order. Called tick after tick with the last `next`, it walks the whole
 * index in slices, so a tenant is found within markers-before-it / `maxMarkers` ticks however
 * many seconds another tenant's backlog spans.
 */
export const markerSlice =
  (store: StoreShape) =>
  (now: number, from: Uint8Array | undefined, maxMarkers: number, floor = 0): Effect.Effect<MarkerSlice, StoreError> =>
    Effect.gen(function* () {
      const range = Deliveries.activeRange(now)
      const start = from ?? Deliveries.markerKey(floor, 0)
      let lo = K.compare(start, range.lo) > 0 ? start : range.lo
      if (K.compare(lo, range.hi) >= 0) lo = range.lo
      const out = new Map<number, Array<number>>()
      let first: number | undefined
      let scanned = 0
      while (scanned < maxMarkers) {
        const want = Math.min(ACTIVE_SCAN_PAGE, maxMarkers - scanned)
        const page = yield* store.scan("index", { lo, hi: range.hi }, { limit: want })
        scanned += page.length
        for (const e of page) {
          const m = K.decodeActiveKey(e.key)
          first ??= m.bucket
          const buckets = out.get(m.ord)
          if (buckets === undefined) out.set(m.ord, [m.bucket])
          else buckets.push(m.bucket)
        }
        if (page.length < want) return { tenants: toTenants(out), first, next: undefined }
        lo = K.keyAfter(page[page.length - 1]!.key)
      }
      return { tenants: toTenants(out), first, next: lo }
    })

const toTenants = (m: Map<number, Array<number>>): ReadonlyArray<ActiveTenant> =>
  [...m].map(([ord, buckets]): ActiveTenant => ({ ord, bucket: buckets[0]!, buckets }))

// TEN-1 §5: from the first marker, verified against its tenant's firstDue; O(1).
export const oldestDueAge = (store: StoreShape) => {
  const first = firstDue(store)
  return (now: number): Effect.Effect<number, StoreError> =>
    Effect.gen(function* () {
      const markers = yield* store.scan("index", K.familyDataRange(K.Families.active), { limit: OLDEST_AGE_MAX_STALE + 1 })
      for (let i = 0; i < markers.length; i++) {
        const m = K.decodeActiveKey(markers[i]!.key)
        const start = K.bucketStart(m.bucket)
        if (start > now) return 0
        if (i === OLDEST_AGE_MAX_STALE) return now - start
        const f = yield* first(m.ord)
        if (f !== undefined && K.bucketOf(f.ref.at) <= m.bucket) return Math.max(0, now - f.ref.at)
      }
      return 0
    })
}
