/**
 * The in-memory `Store`: an ordered map per column family with the same
 * semantics as RocksDB (atomic batches, signed 64-bit merges, bounded scans,
 * sentinels, the format stamp). For fast domain and property tests; it must
 * pass the same conformance suite as the RocksDB layer.
 */
import { Effect, Layer, Option, Stream } from "effect"
import { compare, familyOf } from "../domain/keys.js"
import { type Batch, type ColumnFamily, ColumnFamilies, decodeInt64LE, encodeInt64LE } from "../domain/ops.js"
import { CURRENT_FORMAT, initialize } from "./open.js"
import { type Entry, type Range, Store, StoreError, type StoreFormatNewer, type StoreHealth, type StoreShape } from "./store.js"
import { makeStats } from "./stats.js"
import { makeWriteMarks } from "./write-marks.js"

interface Row {
  readonly key: Buffer
  value: Buffer
}

/** A sorted array of rows per column family. Kept across "reopens" of the same `MemoryDb`. */
export class MemoryDb {
  readonly cfs = new Map<ColumnFamily, Array<Row>>(ColumnFamilies.map((cf) => [cf, []]))
  /** Make the next write fail (tests of commit failures). */
  failNextWrite = 0

  rows(cf: ColumnFamily): Array<Row> {
    return this.cfs.get(cf)!
  }

  /** Index of the first row with key >= `key`. */
  lowerBound(cf: ColumnFamily, key: Uint8Array): number {
    const rows = this.rows(cf)
    let lo = 0
    let hi = rows.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (compare(rows[mid]!.key, key) < 0) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  find(cf: ColumnFamily, key: Uint8Array): Row | undefined {
    const rows = this.rows(cf)
    const i = this.lowerBound(cf, key)
    const row = rows[i]
    return row !== undefined && compare(row.key, key) === 0 ? row : undefined
  }

  set(cf: ColumnFamily, key: Uint8Array, value: Buffer): void {
    const rows = this.rows(cf)
    const i = this.lowerBound(cf, key)
    const row = rows[i]
    if (row !== undefined && compare(row.key, key) === 0) row.value = value
    else rows.splice(i, 0, { key: Buffer.from(key), value })
  }

  delete(cf: ColumnFamily, key: Uint8Array): void {
    const rows = this.rows(cf)
    const i = this.lowerBound(cf, key)
    const row = rows[i]
    if (row !== undefined && compare(row.key, key) === 0) rows.splice(i, 1)
  }

  /** Apply a batch all at once (JavaScript is single-threaded: nothing interleaves). */
  apply(batch: Batch): void {
    for (const op of batch) {
      switch (op._tag) {
        case "put":
          this.set(op.cf, op.key, Buffer.from(op.value))
          break
        case "del":
          this.delete(op.cf, op.key)
          break
        case "merge": {
          const cur = this.find(op.cf, op.key)
          this.set(op.cf, op.key, Buffer.from(encodeInt64LE(decodeInt64LE(cur?.value) + op.delta)))
          break
        }
        case "deleteRange": {
          const rows = this.rows(op.cf)
          const a = this.lowerBound(op.cf, op.lo)
          const b = this.lowerBound(op.cf, op.hi)
          if (b > a) rows.splice(a, b - a)
          break
        }
      }
    }
  }

  /** Rows of a range, forward or reverse, at most `limit`, starting after `after` when given. */
  slice(cf: ColumnFamily, range: Range, limit: number, reverse: boolean, after?: Uint8Array): Array<Entry> {
    const rows = this.rows(cf)
    const out: Array<Entry> = []
    if (!reverse) {
      let i = this.lowerBound(cf, after === undefined ? range.lo : after)
      if (after !== undefined && rows[i] !== undefined && compare(rows[i]!.key, after) === 0) i++
      for (; i < rows.length && out.length < limit; i++) {
        const r = rows[i]!
        if (compare(r.key, range.hi) >= 0) break
        out.push({ key: r.key, value: r.value })
      }
    } else {
      let i = this.lowerBound(cf, after === undefined ? range.hi : after) - 1
      for (; i >= 0 && out.length < limit; i--) {
        const r = rows[i]!
        if (compare(r.key, range.lo) < 0) break
        out.push({ key: r.key, value: r.value })
      }
    }
    return out
  }
}

/** The memory store's health: writes never stall, no background work, no files. */
export const memoryHealth: StoreHealth = {
  writeStopped: false,
  delayedWriteRate: 0,
  backgroundErrors: 0,
  runningCompactions: 0,
  runningFlushes: 0,
  disk: { sst: 0, wal: 0, other: 0, files: 0, truncated: false }
}

export interface MemoryOptions {
  readonly db?: MemoryDb
  /** The highest format this "build" supports (tests of the format fence use 2). */
  readonly supportedFormat?: number
}

export const makeMemoryStore = (opts: MemoryOptions = {}): Effect.Effect<StoreShape, StoreError | StoreFormatNewer> =>
  Effect.gen(function* () {
    const db = opts.db ?? new MemoryDb()
    const stats = makeStats()
    const marks = makeWriteMarks()
    const write = (batch: Batch) =>
      marks.track(batch, Effect.suspend(() => {
        if (db.failNextWrite > 0) {
          db.failNextWrite--
          return Effect.fail(new StoreError({ op: "write", message: "injected write failure" }))
        }
        db.apply(batch)
        return Effect.void
      }))
    let format = yield* initialize(
      { get: (cf, key) => Effect.sync(() => db.find(cf, key)?.value), write },
      opts.supportedFormat ?? CURRENT_FORMAT
    )
    const readFormat = Effect.sync(() => {
      const v = db.find("default", Buffer.from("m:format"))?.value
      if (v !== undefined && v.length === 4) format = v.readUInt32BE(0)
      return format
    })
    const store: StoreShape = {
      write: (batch) => write(batch),
      get: (cf, key) =>
        Effect.sync(() => {
          stats.point(familyOf(cf, key), 1)
          return db.find(cf, key)?.value
        }),
      multiGet: (cf, keys) =>
        Effect.sync(() => {
          for (const k of keys) stats.point(familyOf(cf, k), 1)
          return keys.map((k) => db.find(cf, k)?.value)
        }),
      getCounters: (cf, keys) =>
        Effect.sync(() => {
          for (const k of keys) stats.point(familyOf(cf, k), 1)
          return keys.map((k) => decodeInt64LE(db.find(cf, k)?.value))
        }),
      scan: (cf, range, o) =>
        Effect.sync(() => {
          stats.scan(familyOf(cf, range.lo))
          return db.slice(cf, range, o.limit, o.reverse === true)
        }),
      stream: (cf, range, o) => {
        const chunk = o?.chunk ?? 1000
        const reverse = o?.reverse === true
        return Stream.suspend(() => {
          stats.scan(familyOf(cf, range.lo))
          return Stream.paginate(undefined as Uint8Array | undefined, (after) =>
            Effect.sync(() => {
              const page = db.slice(cf, range, chunk, reverse, after)
              const last = page[page.length - 1]
              return [
                page,
                page.length < chunk || last === undefined ? Option.none() : Option.some(last.key)
              ] as const
            })
          )
        })
      },
      first: (cf, range, o) =>
        Effect.sync(() => {
          stats.scan(familyOf(cf, range.lo))
          return db.slice(cf, range, 1, o?.reverse === true)[0]
        }),
      format: readFormat,
      stats: stats.snapshot,
      // Nothing stalls and nothing is on disk: a healthy, empty store.
      health: Effect.succeed(memoryHealth),
      resetStats: stats.reset,
      marks,
      scrub: Effect.void
    }
    return store
  })

export const layerMemory = (opts: MemoryOptions = {}): Layer.Layer<Store, StoreError | StoreFormatNewer> =>
  Layer.effect(Store, makeMemoryStore(opts))
