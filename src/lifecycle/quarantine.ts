/**
 * The `Quarantine` service: keeps requests that failed verification (never
 * delivered, no tenant ordinal allocated), bounded by count and bytes with
 * the oldest dropped first, pruned by retention, listed newest first within
 * a token's scope and deleted by tenant. The only writer of `?q` rows; it
 * keeps the family's count and bytes in memory (folded once at start, at most
 * `maxCount` rows), so a bound check costs no read.
 */
import { Clock, Context, Duration, Effect, Layer, Metric, Semaphore } from "effect"
import {
  cursorKey,
  decodeRecord,
  encodeCursor,
  encodeRecord,
  type QuarantineInput,
  type QuarantineRecord,
  recordBytes,
  tenantOfValue,
  visibleTo
} from "../domain/quarantine.js"
import { decodeQuarantineKey, Families, familyDataRange, quarantineKey } from "../domain/keys.js"
import { del, type Op, put } from "../domain/ops.js"
import { TenantErased } from "../domain/tenants.js"
import { quarantined, quarantineDropped, withReason } from "../observability/lifecycle-metrics.js"
import { type Entry, Store, type StoreCorrupt, type StoreError } from "../store/store.js"
import { scheduled } from "./scheduled.js"
import { foldFamily } from "../store/family.js"

export interface QuarantineOptions {
  /** Most records kept; past it the oldest are dropped. */
  readonly maxCount: number
  /** Most bytes kept (key + value of every record); past it the oldest are dropped. */
  readonly maxBytes: number
  /** Records older than this are pruned. */
  readonly retention: Duration.Input
  readonly pruneInterval: Duration.Input
  /** Rows per delete batch (prune, delete by tenant) and per read page. */
  readonly chunk: number
}

export const QuarantineDefaults: QuarantineOptions = {
  maxCount: 10_000,
  maxBytes: 64 * 1024 * 1024,
  retention: Duration.days(7),
  pruneInterval: Duration.minutes(5),
  chunk: 500
}

/** Largest page a list call returns. */
export const MAX_LIST_LIMIT = 500

export interface QuarantineListQuery {
  /** The token's tenants; null for a global token. */
  readonly scope: ReadonlyArray<string> | null
  /** Only this tenant's records (must be within the scope; the edge refuses otherwise). */
  readonly tenant?: string
  readonly limit: number
  readonly cursor?: string
}

export interface QuarantinePage {
  readonly records: ReadonlyArray<QuarantineRecord>
  readonly cursor: string | null
}

export interface QuarantineShape {
  /**
   * Keep a request; undefined when it alone is larger than maxBytes (counted as dropped) or maxCount is 0. Unsynced.
   * `erased` (the Writer's refusal, TEN-5) is asked inside the same lock as `deleteTenant`: a request
   * whose tenant an erase refused after the edge let it through fails `TenantErased` and is not kept,
   * and one kept before the refusal is there for the erase's step 6 to delete.
   */
  readonly put: (input: QuarantineInput, erased?: (tenant: string) => boolean) => Effect.Effect<QuarantineRecord | undefined, StoreError | TenantErased>
  readonly list: (q: QuarantineListQuery) => Effect.Effect<QuarantinePage, StoreError>
  /** Delete every record of a tenant (synced batches); returns how many. */
  readonly deleteTenant: (tenant: string) => Effect.Effect<number, StoreError>
  /** Delete records older than the retention; returns how many. */
  readonly prune: Effect.Effect<number, StoreError>
  readonly size: Effect.Effect<{ readonly count: number; readonly bytes: number }>
}

export class Quarantine extends Context.Service<Quarantine, QuarantineShape>()("ankusa/Quarantine") {}

const DATA = familyDataRange(Families.quarantine)

export const make = (options: Partial<QuarantineOptions> = {}) =>
  Effect.gen(function* () {
    const o = { ...QuarantineDefaults, ...options }
    const store = yield* Store
    const retentionMs = Duration.toMillis(o.retention)
    const totals = yield* foldFamily(store, Families.quarantine, { count: 0, bytes: 0, lastQid: 0 }, (acc, e) => ({
      count: acc.count + 1,
      bytes: acc.bytes + recordBytes(e.key, e.value),
      lastQid: Math.max(acc.lastQid, decodeQuarantineKey(e.key).qid)
    }))
    let count = totals.count
    let bytes = totals.bytes
    // qid orders records of one millisecond and makes keys unique across restarts.
    let nextQid = totals.lastQid + 1
    // One writer at a time keeps the in-memory totals equal to the family.
    const lock = yield* Semaphore.make(1)

    const deleteAll = (entries: ReadonlyArray<Entry>, sync: boolean) =>
      entries.length === 0
        ? Effect.void
        : store.write(entries.map((e) => del("index", e.key)), { sync }).pipe(
            Effect.tap(() =>
              Effect.sync(() => {
                count -= entries.length
                for (const e of entries) bytes -= recordBytes(e.key, e.value)
              })
            )
          )

    /** The oldest records to drop so that `extraCount`/`extraBytes` more fit in the bounds. */
    const oldestToDrop = (extraCount: number, extraBytes: number) =>
      Effect.gen(function* () {
        const out: Array<Entry> = []
        let c = count + extraCount
        let b = bytes + extraBytes
        let lo = DATA.lo
        while (c > o.maxCount || b > o.maxBytes) {
          const page = yield* store.scan("index", { lo, hi: DATA.hi }, { limit: o.chunk })
          if (page.length === 0) break
          for (const e of page) {
            if (c <= o.maxCount && b <= o.maxBytes) break
            out.push(e)
            c--
            b -= recordBytes(e.key, e.value)
          }
          lo = Buffer.concat([page[page.length - 1]!.key, Buffer.from([0])])
        }
        return out
      })

    const put_ = (input: QuarantineInput, erased?: (tenant: string) => boolean) =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          if (erased?.(input.tenant) === true) return yield* Effect.fail(new TenantErased({ tenant: input.tenant }))
          const at = yield* Clock.currentTimeMillis
          const qid = nextQid++
          const key = quarantineKey(at, qid)
          const value = encodeRecord(input)
          const size = recordBytes(key, value)
          // maxCount 0 keeps nothing (failures are only refused); a record larger than the whole bound is dropped.
          if (o.maxCount < 1) return undefined
          if (size > o.maxBytes) {
            yield* Metric.update(withReason(quarantineDropped, "oversize"), 1)
            return undefined
          }
          const drop = yield* oldestToDrop(1, size)
          const ops: Array<Op> = [...drop.map((e) => del("index", e.key)), put("index", key, value)]
          // Unsynced: a failed verification is answered 401, nothing was accepted, and a synced
          // write per bad request would let a flood of them cost an fsync each.
          yield* store.write(ops, { sync: false })
          const countBefore = count
          count = count - drop.length + 1
          for (const e of drop) bytes -= recordBytes(e.key, e.value)
          bytes += size
          yield* Metric.update(quarantined, 1)
          if (drop.length > 0) {
            // Attribute drops to the bound that forced them: count first, the rest to bytes.
            const byCount = Math.max(0, Math.min(drop.length, countBefore + 1 - o.maxCount))
            if (byCount > 0) yield* Metric.update(withReason(quarantineDropped, "count"), byCount)
            if (drop.length > byCount) yield* Metric.update(withReason(quarantineDropped, "bytes"), drop.length - byCount)
          }
          return { ...input, at, qid } satisfies QuarantineRecord
        })
      )

    const list = (q: QuarantineListQuery) =>
      Effect.gen(function* () {
        const limit = Math.max(1, Math.min(q.limit, MAX_LIST_LIMIT))
        let hi = cursorKey(q.cursor) ?? DATA.hi
        const records: Array<QuarantineRecord> = []
        // The family is bounded by maxCount: one call may walk all of it to fill a scoped page.
        for (;;) {
          const page = yield* store.scan("index", { lo: DATA.lo, hi }, { limit: o.chunk, reverse: true })
          for (const e of page) {
            const tenant = tenantOfValue(e.value)
            if (!visibleTo(tenant, q.scope) || (q.tenant !== undefined && tenant !== q.tenant)) continue
            const r = decodeRecord(e.key, e.value)
            records.push(r)
            if (records.length === limit) return { records, cursor: encodeCursor(r) }
          }
          if (page.length < o.chunk) return { records, cursor: null }
          hi = page[page.length - 1]!.key
        }
      })

    const deleteTenant = (tenant: string) =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          let lo = DATA.lo
          let deleted = 0
          for (;;) {
            const page = yield* store.scan("index", { lo, hi: DATA.hi }, { limit: o.chunk })
            const mine = page.filter((e) => tenantOfValue(e.value) === tenant)
            yield* deleteAll(mine, true)
            deleted += mine.length
            if (page.length < o.chunk) return deleted
            lo = Buffer.concat([page[page.length - 1]!.key, Buffer.from([0])])
          }
        })
      )

    const prune = lock.withPermits(1)(
      Effect.gen(function* () {
        const cutoff = (yield* Clock.currentTimeMillis) - retentionMs
        const hi = quarantineKey(Math.max(0, cutoff), 0)
        let pruned = 0
        for (;;) {
          const page = yield* store.scan("index", { lo: DATA.lo, hi }, { limit: o.chunk })
          // Unsynced: a crash only repeats the work.
          yield* deleteAll(page, false)
          pruned += page.length
          if (page.length < o.chunk) break
        }
        if (pruned > 0) yield* Metric.update(withReason(quarantineDropped, "retention"), pruned)
        return pruned
      })
    )

    return {
      put: put_,
      list,
      deleteTenant,
      prune,
      size: Effect.sync(() => ({ count, bytes }))
    } satisfies QuarantineShape
  })

export const layer = (options: Partial<QuarantineOptions> = {}): Layer.Layer<Quarantine, StoreError | StoreCorrupt, Store> =>
  Layer.effect(Quarantine, make(options))

/** The retention pruner: a scoped fiber, interrupted at shutdown. */
export const layerPruner = (options: Partial<QuarantineOptions> = {}): Layer.Layer<never, never, Quarantine> =>
  scheduled(Quarantine, "quarantine prune", options.pruneInterval ?? QuarantineDefaults.pruneInterval, (q) => q.prune)
