/**
 * The read side of the tenant-keyed queue (TEN-1 §5, §6): the active index,
 * per-tenant due scans and the marker cleanup, counter reads, the DLQ reads,
 * purge, `pendingForSource` and the boot recovery of inflight rows.
 *
 * Every scan is bounded (named limits below) and every write is a batch of
 * Deliveries transitions: this module never builds a `?D`/`?F`/`?X`/`?A` key.
 */
import { Context, Effect, Layer, Semaphore, Stream } from "effect"
import * as Counters from "../domain/counters.js"
import * as Deliveries from "../domain/deliveries.js"
import { decodeEnvelope } from "../domain/envelope.js"
import * as K from "../domain/keys.js"
import type { Op } from "../domain/ops.js"
import { familyRows } from "../store/family.js"
import { type Entry, type Range, Store, type StoreCorrupt, type StoreError, type StoreShape } from "../store/store.js"

// ---------------------------------------------------------------------------
// Bounds (docs/configuration.md, "Queue reads")

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
/** Due rows read per page of `dueForTenant`. */
export const DUE_SCAN_PAGE = 256
/** Stale markers `oldestDueAge` verifies and skips before it reports a bucket start (TEN-1 §5). */
export const OLDEST_AGE_MAX_STALE = 32
/** Largest page of `dead` and `deadPage`. */
export const DEAD_MAX_LIMIT = 1000
/** `?x` rows one `deadPage` call scans at most (its tenant filter may match few of them). */
export const DEAD_PAGE_MAX_SCANNED = 10_000
/** `?x` rows read per reverse scan page of `deadPage`. */
export const DEAD_PAGE_SCAN_PAGE = 500
/** Rows per synced batch of `purgeTenant` (TEN-1 §6). */
export const PURGE_CHUNK = 500
/** Rows per synced batch of `recoverInflight`. */
export const RECOVER_CHUNK = 500
/** Rows per hook multi-get of `pendingForSource`. */
export const SOURCE_FOLD_CHUNK = 500

// ---------------------------------------------------------------------------
// Results

/** A tenant with markers at or before now: its oldest scanned bucket and every bucket scanned (for the cleanup). */
export interface ActiveTenant {
  readonly ord: number
  readonly bucket: number
  readonly buckets: ReadonlyArray<number>
}

export interface DueEntry {
  readonly ref: K.DueRef
  readonly value: K.DueValue
}

export interface CleanupResult {
  /** Step 1's `firstDue`. */
  readonly first: DueEntry | undefined
  /** Buckets whose marker step 2 deleted. */
  readonly deleted: ReadonlyArray<number>
  /** Buckets whose marker step 3 put back. */
  readonly restored: ReadonlyArray<number>
}

/** Where a test may run something inside the cleanup: after step 1, after step 2. */
export type CleanupPoint = "first" | "delete"

export interface DeadItem {
  readonly ord: number
  readonly at: number
  readonly seq: number
  readonly sink: number
  readonly sourceId: string
  readonly id: string
}

export interface DeadPage {
  readonly items: ReadonlyArray<DeadItem>
  /** Pass back as `before` / `cursor` for the next (older) page; undefined when nothing older is left. */
  readonly cursor: K.DeadRef | undefined
}

export interface PurgeResult {
  readonly pending: number
  readonly dead: number
  /** false when `maxChunks` stopped it: call again to resume. */
  readonly done: boolean
}

export type PurgeKind = "pending" | "dead"

export interface SourcePending {
  readonly pending: number
  readonly scheduled: number
  readonly inflight: number
}

export interface QueueShape {
  readonly activeTenants: (now: number, limit?: number) => Effect.Effect<ReadonlyArray<ActiveTenant>, StoreError>
  readonly dueForTenant: (
    ord: number,
    now: number,
    floorAt: number,
    limit: number,
    byteBudget: number
  ) => Effect.Effect<ReadonlyArray<DueEntry>, StoreError>
  readonly firstDue: (ord: number) => Effect.Effect<DueEntry | undefined, StoreError>
  readonly cleanupMarkers: (
    ord: number,
    now: number,
    scannedMarkers: ReadonlyArray<number>,
    options?: { readonly between?: (point: CleanupPoint) => Effect.Effect<void, StoreError> }
  ) => Effect.Effect<CleanupResult, StoreError>
  /**
   * `cleanupMarkers` for several tenants at once (the tick's visits): each tenant's steps in
   * TEN-1 §5's order, every tenant's deletes in one write and its put-backs in one synced write.
   * `between` runs once per point, for all tenants. Results in `tenants` order.
   */
  readonly cleanupMarkersOf: (
    tenants: ReadonlyArray<{ readonly ord: number; readonly markers: ReadonlyArray<number> }>,
    now: number,
    options?: { readonly between?: (point: CleanupPoint) => Effect.Effect<void, StoreError> }
  ) => Effect.Effect<ReadonlyArray<CleanupResult>, StoreError>
  readonly oldestDueAge: (now: number) => Effect.Effect<number, StoreError>
  readonly counters: (ord: number) => Effect.Effect<Counters.TenantCounters, StoreError>
  readonly pendingForTenant: (
    ord: number
  ) => Effect.Effect<{ readonly pending: number; readonly scheduled: number; readonly inflight: number; readonly bytes: number }, StoreError>
  readonly deadForTenant: (ord: number) => Effect.Effect<{ readonly dead: number }, StoreError>
  readonly aggregate: Effect.Effect<Counters.TenantCounters, StoreError>
  readonly dead: (q: {
    readonly ords: ReadonlyArray<number>
    readonly limit: number
    readonly before?: K.DeadRef | undefined
  }) => Effect.Effect<DeadPage, StoreError>
  readonly deadPage: (q: {
    readonly ord?: number | undefined
    readonly limit: number
    readonly cursor?: K.DeadRef | undefined
    readonly maxScanned?: number | undefined
  }) => Effect.Effect<DeadPage, StoreError>
  readonly purgeTenant: (
    ord: number,
    kinds: ReadonlyArray<PurgeKind>,
    options?: { readonly chunk?: number; readonly maxChunks?: number }
  ) => Effect.Effect<PurgeResult, StoreError>
  readonly pendingForSource: (sourceId: string, fixedOrd?: number) => Effect.Effect<SourcePending, StoreError>
  readonly recoverInflight: (now: number) => Effect.Effect<number, StoreError | StoreCorrupt>
  /**
   * Run `effect` while holding tenant `ord`'s in-process lock. Transitions
   * that read a due or dead row and then delete it (claim, revive, purge)
   * take it, so two of them never both count the same row's removal.
   */
  readonly withTenant: <A, E, R>(ord: number, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export class Queue extends Context.Service<Queue, QueueShape>()("ankusa/Queue") {}

// ---------------------------------------------------------------------------

const ZERO_BYTE = Buffer.from([0])
/** The smallest key after `k`: where a forward page resumes. */
const keyAfter = (k: Uint8Array): Uint8Array => Buffer.concat([k, ZERO_BYTE])

const decodeDue = (e: Entry): DueEntry => ({ ref: K.decodeDueKey(e.key), value: K.decodeDueValue(e.value) })

const byNewest = (a: K.DeadRef, b: K.DeadRef): number => b.at - a.at || b.seq - a.seq || b.sink - a.sink

/** A keyed lock whose entries live only while someone holds or waits for them. */
const makeTenantLocks = () => {
  const locks = new Map<number, { readonly sem: Semaphore.Semaphore; users: number }>()
  return <A, E, R>(ord: number, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      let lock = locks.get(ord)
      if (lock === undefined) {
        lock = { sem: Semaphore.makeUnsafe(1), users: 0 }
        locks.set(ord, lock)
      }
      const held = lock
      held.users++
      return held.sem.withPermits(1)(effect).pipe(
        Effect.ensuring(
          Effect.sync(() => {
            held.users--
            if (held.users === 0) locks.delete(ord)
          })
        )
      )
    })
}

export const make = (store: StoreShape): QueueShape => {
  const withTenant = makeTenantLocks()

  const activeTenants = (now: number, limit = ACTIVE_TENANTS_LIMIT) =>
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
        lo = keyAfter(page[page.length - 1]!.key)
      }
      // Map order is first-sight order, and markers come oldest bucket first.
      return [...out].map(([ord, buckets]): ActiveTenant => ({ ord, bucket: buckets[0]!, buckets }))
    })

  const dueForTenant = (ord: number, now: number, floorAt: number, limit: number, byteBudget: number) =>
    Effect.gen(function* () {
      const out: Array<DueEntry> = []
      if (limit <= 0 || byteBudget <= 0 || floorAt > now) return out
      const range = Deliveries.dueRange(ord, floorAt, now)
      let lo = range.lo
      let bytes = 0
      while (out.length < limit) {
        const want = Math.min(DUE_SCAN_PAGE, limit - out.length)
        const page = yield* store.scan("index", { lo, hi: range.hi }, { limit: want })
        for (const e of page) {
          const d = decodeDue(e)
          // The first row is taken even past the budget, so one oversized row cannot wedge its tenant.
          if (out.length > 0 && bytes + d.value.size > byteBudget) return out
          out.push(d)
          bytes += d.value.size
        }
        if (page.length < want) break
        lo = keyAfter(page[page.length - 1]!.key)
      }
      return out
    })

  const firstDue = (ord: number) =>
    store.first("index", Deliveries.tenantDueRange(ord)).pipe(Effect.map((e) => (e === undefined ? undefined : decodeDue(e))))

  // TEN-1 §5: "delete, then verify". Writers only put markers; this is the only deleter. Each
  // tenant's steps run in §5's order; tenants are independent, so step 1 runs for all of them,
  // then one write deletes every tenant's markers, then step 3 runs for all.
  const cleanupMarkersOf: QueueShape["cleanupMarkersOf"] = (tenants, now, options) =>
    Effect.gen(function* () {
      const between = options?.between ?? (() => Effect.void)
      const nowBucket = K.bucketOf(now)
      // Step 1.
      const firsts: Array<DueEntry | undefined> = []
      for (const t of tenants) firsts.push(yield* firstDue(t.ord))
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
          const again = yield* firstDue(ord)
          if (again !== undefined) {
            const firstBucket = K.bucketOf(again.ref.at)
            if (gone.includes(firstBucket)) restored.push(firstBucket)
            // Beyond §5's letter: rows that landed between steps 1 and 2 in several deleted buckets
            // (two writers, or a revival into the past) all need their marker back, not only the
            // earliest. Only then is first' below a deleted bucket, so the common path costs nothing.
            for (const b of gone) {
              if (b <= firstBucket) continue
              const row = yield* store.first("index", Deliveries.dueRange(ord, b * 1000, b * 1000 + 999))
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

  const cleanupMarkers: QueueShape["cleanupMarkers"] = (ord, now, scannedMarkers, options) =>
    Effect.map(cleanupMarkersOf([{ ord, markers: scannedMarkers }], now, options), (r) => r[0]!)

  // TEN-1 §5: from the first marker, verified against its tenant's firstDue; O(1).
  const oldestDueAge = (now: number) =>
    Effect.gen(function* () {
      const markers = yield* store.scan("index", K.familyDataRange(K.Families.active), { limit: OLDEST_AGE_MAX_STALE + 1 })
      for (let i = 0; i < markers.length; i++) {
        const m = K.decodeActiveKey(markers[i]!.key)
        const start = m.bucket * 1000
        if (start > now) return 0
        if (i === OLDEST_AGE_MAX_STALE) return now - start
        const first = yield* firstDue(m.ord)
        if (first !== undefined && K.bucketOf(first.ref.at) <= m.bucket) return Math.max(0, now - first.ref.at)
      }
      return 0
    })

  const counters = (ord: number) => store.getCounters("counters", Counters.keysOf(ord)).pipe(Effect.map(Counters.fromTotals))

  const dead: QueueShape["dead"] = ({ ords, limit, before }) =>
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
        items.push({ ord: t.ord, ...t.ref, sourceId: v.sourceId, id: v.id })
      })
      return { items, cursor: taken.length === n ? taken[n - 1]!.ref : undefined }
    })

  const deadPage: QueueShape["deadPage"] = ({ ord, limit, cursor, maxScanned = DEAD_PAGE_MAX_SCANNED }) =>
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
            items.push({ ord: v.ord ?? 0, ...ref, sourceId: v.sourceId, id: v.id })
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

  const purgePendingChunk = (ord: number, lo: Uint8Array, chunk: number) =>
    withTenant(
      ord,
      Effect.gen(function* () {
        const page = yield* store.scan("index", { lo, hi: Deliveries.tenantDueRange(ord).hi }, { limit: chunk })
        if (page.length === 0) return { purged: 0, scanned: 0, next: lo }
        const ts = page.map((e) => Deliveries.purgeDue(K.decodeDueKey(e.key), K.decodeDueValue(e.value)))
        yield* store.write(Deliveries.batch(ts), { sync: true })
        return { purged: page.length, scanned: page.length, next: keyAfter(page[page.length - 1]!.key) }
      })
    )

  const purgeDeadChunk = (ord: number, lo: Uint8Array, chunk: number) =>
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
        return { purged: ts.length, scanned: page.length, next: keyAfter(page[page.length - 1]!.key) }
      })
    )

  const purgeTenant: QueueShape["purgeTenant"] = (ord, kinds, options) =>
    Effect.gen(function* () {
      const chunk = Math.max(1, options?.chunk ?? PURGE_CHUNK)
      const maxChunks = options?.maxChunks ?? Infinity
      let chunks = 0
      let pending = 0
      let dead = 0
      // One pass over each range with a cursor: never re-reads the purged keys (tombstones in RocksDB)
      // nor rows left behind (a broken mirror). A row enqueued behind the cursor meanwhile survives;
      // calling again purges it.
      if (kinds.includes("pending")) {
        let lo = Deliveries.tenantDueRange(ord).lo
        for (;;) {
          if (chunks >= maxChunks) return { pending, dead, done: false }
          const r = yield* purgePendingChunk(ord, lo, chunk)
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
          const r = yield* purgeDeadChunk(ord, lo, chunk)
          chunks++
          dead += r.purged
          lo = r.next
          if (r.scanned < chunk) break
        }
      }
      return { pending, dead, done: true }
    })

  // TEN-1 §6: a fixed-tenant source folds only its tenant's ranges; a shared source is O(backlog).
  const pendingForSource = (sourceId: string, fixedOrd?: number) =>
    Effect.gen(function* () {
      const [due, inflight] =
        fixedOrd === undefined
          ? [K.familyDataRange(K.Families.due), K.familyDataRange(K.Families.inflight)]
          : [Deliveries.tenantDueRange(fixedOrd), Deliveries.tenantInflightRange(fixedOrd)]
      const fold = (range: Range, f: (e: Entry) => "pending" | "scheduled" | "inflight", seqOf: (k: Uint8Array) => number) =>
        store.stream("index", range, { chunk: SOURCE_FOLD_CHUNK }).pipe(
          Stream.grouped(SOURCE_FOLD_CHUNK),
          Stream.runFoldEffect(() => ({ pending: 0, scheduled: 0, inflight: 0 }), (acc, rows) =>
            Effect.gen(function* () {
              const seqs = [...new Set(rows.map((e) => seqOf(e.key)))]
              const hooks = yield* store.multiGet("hooks", seqs.map(K.hookKey))
              const ofSource = new Set(seqs.filter((_, i) => decodeEnvelope(hooks[i])?.sourceId === sourceId))
              const out = { ...acc }
              for (const e of rows) if (ofSource.has(seqOf(e.key))) out[f(e)]++
              return out
            })
          )
        )
      const a = yield* fold(due, (e) => (K.decodeDueValue(e.value).kind === 0 ? "pending" : "scheduled"), (k) => K.decodeDueKey(k).seq)
      const b = yield* fold(inflight, () => "inflight", (k) => K.decodeInflightKey(k).seq)
      return { pending: a.pending, scheduled: a.scheduled, inflight: b.inflight }
    })

  // Boot only, before the pipeline runs: every ?F row back to due, kind 0, in synced chunks.
  const recoverInflight = (now: number) =>
    familyRows(store, K.Families.inflight, { chunk: RECOVER_CHUNK }).pipe(
      Stream.grouped(RECOVER_CHUNK),
      Stream.runFoldEffect(() => 0, (n, rows) => {
        const ts = rows.map((e) => Deliveries.recover(K.decodeInflightKey(e.key), K.decodeSizeValue(e.value), now))
        return store.write(Deliveries.batch(ts), { sync: true }).pipe(Effect.as(n + ts.length))
      })
    )

  return {
    activeTenants,
    dueForTenant,
    firstDue,
    cleanupMarkers,
    cleanupMarkersOf,
    oldestDueAge,
    counters,
    pendingForTenant: (ord) =>
      counters(ord).pipe(Effect.map((c) => ({ pending: c.pending, scheduled: c.scheduled, inflight: c.inflight, bytes: c.bytes }))),
    deadForTenant: (ord) => counters(ord).pipe(Effect.map((c) => ({ dead: c.dead }))),
    aggregate: counters(Counters.AGGREGATE),
    dead,
    deadPage,
    purgeTenant,
    pendingForSource,
    recoverInflight,
    withTenant
  }
}

export const layer: Layer.Layer<Queue, never, Store> = Layer.effect(Queue, Effect.map(Store, make))
