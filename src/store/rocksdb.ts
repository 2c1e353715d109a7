/**
 * The RocksDB `Store` (on `@nxtedition/rocksdb`): one column family per
 * `ColumnFamily`, atomic WriteBatches, signed 64-bit counters through the
 * `uint64add` merge operator, and reads with the binding's synchronous calls
 * (its async get/getMany can throw uncaught). Same semantics as the memory
 * layer; both pass test/store-conformance.ts. Commits run where
 * `commitThread` says (rocksdb-commit.ts); open and the format fence
 * are in rocksdb-open.ts, the health read in rocksdb-health.ts.
 */
import type { ColumnHandle, RocksLevel } from "@nxtedition/rocksdb"
import { Array as Arr, Cause, Effect, Layer, Stream } from "effect"
import { asBuffer, compare, decodeU32, familyOf, Meta } from "../domain/keys.js"
import { type Batch, type ColumnFamily, decodeInt64LE, type Op } from "../domain/ops.js"
import { type Entry, type Range, Store, StoreError, storeErrorOf as fail, type StoreOpenError, type StoreShape } from "./store.js"
import { type CommitThread, mainCommitter, workerCommitter } from "./rocksdb-commit.js"
import { readHealth } from "./rocksdb-health.js"
import { closeDb, columnFamiliesOf, type OpenTuning, openDb } from "./rocksdb-open.js"
import { encodeBatch } from "./rocksdb-wire.mjs"
import { CURRENT_FORMAT, initialize } from "./open.js"
import { makeStats } from "./stats.js"
import { makeWriteMarks, summarize } from "./write-marks.js"

export interface RocksDbOptions extends OpenTuning {
  /** The highest store format this build supports (a format 2 build opens only format 2's column families). */
  readonly supportedFormat?: number
  /** Where commits run; see docs/architecture.md "Where commits run". */
  readonly commitThread?: CommitThread
  /** Bound on the point deletes one batch's deleteRange ops may expand to (docs/storage.md). */
  readonly maxRangeDeleteKeys?: number
}

export const DEFAULT_COMMIT_THREAD: CommitThread = "worker"
export const DEFAULT_MAX_RANGE_DELETE_KEYS = 100_000

export const makeRocksDbStore = (dir: string, options: RocksDbOptions = {}) =>
  Effect.gen(function* () {
    const supported = options.supportedFormat ?? CURRENT_FORMAT
    const names = columnFamiliesOf(supported)
    const maxRangeDeleteKeys = options.maxRangeDeleteKeys ?? DEFAULT_MAX_RANGE_DELETE_KEYS
    const db = yield* Effect.acquireRelease(openDb(dir, supported, options), closeDb)
    const columns = new Map<ColumnFamily, ColumnHandle>(names.map((n) => [n, db.columns[n]!]))
    const handles = names.map((n) => columns.get(n)!)
    // Acquired after the DB, so released before it: the worker never outlives the DB.
    const committer =
      (options.commitThread ?? DEFAULT_COMMIT_THREAD) === "worker"
        ? yield* workerCommitter(db, { names, maxRangeDeleteKeys })
        : mainCommitter(db, handles, { names, maxRangeDeleteKeys })
    return yield* makeStore(db, dir, columns, committer.commit, supported)
  })

const makeStore = (
  db: RocksLevel,
  dir: string,
  columns: ReadonlyMap<ColumnFamily, ColumnHandle>,
  commit: (buffer: ArrayBuffer, sync: boolean) => Effect.Effect<void, StoreError>,
  supported: number
) =>
  Effect.gen(function* () {
    const stats = makeStats()
    const names = [...columns.keys()]

    const column = (cf: ColumnFamily): ColumnHandle => {
      const c = columns.get(cf)
      if (c === undefined) throw new Error(`column family ${cf} is not open in a format ${supported} build`)
      return c
    }

    // Checked before anything reaches RocksDB: a merge into a family without a merge
    // operator fails *after* the WAL write, half-applied, and stops the DB (measured).
    const check = (op: Op): string | undefined =>
      !columns.has(op.cf)
        ? `column family ${op.cf} is not open in a format ${supported} build`
        : op._tag === "merge" && op.cf !== "counters"
          ? `merge into ${op.cf}: only counters has a merge operator`
          : undefined
    // The wire's family index of each open family.
    const cfIndex = new Map<string, number>(names.map((n, i) => [n, i]))
    const indexOf = (cf: string) => cfIndex.get(cf)!

    const marks = makeWriteMarks()
    const write = (batch: Batch, sync: boolean) =>
      Effect.suspend(() => {
        // One pass: the checks above and what the write marks (write-marks.ts).
        const summary = summarize(batch, check)
        if (typeof summary === "string") return Effect.fail(new StoreError({ op: "write", message: summary }))
        if (batch.length === 0) return Effect.void
        return marks.trackSummary(summary, commit(encodeBatch(batch, indexOf), sync))
      })

    const getMany = (cf: ColumnFamily, keys: ReadonlyArray<Uint8Array>) =>
      Effect.try({
        try: () => {
          const out = db._getManySync(keys.map(asBuffer), { column: column(cf) })
          if (out.some((v) => v === null)) throw new Error("read aborted or timed out")
          return out as ReadonlyArray<Uint8Array | undefined>
        },
        catch: fail("get")
      })

    const iterator = (cf: ColumnFamily, range: Range, reverse: boolean, limit: number) =>
      db.iterator({
        column: column(cf),
        gte: asBuffer(range.lo),
        lt: asBuffer(range.hi),
        reverse,
        limit,
        keyEncoding: "buffer",
        valueEncoding: "buffer"
      })
    type It = ReturnType<typeof iterator>
    const close = (it: It) => {
      it._closeSync()
      db.detachResource(it)
    }
    const entries = (rows: ReadonlyArray<Buffer | undefined>, out: Array<Entry>) => {
      for (let i = 0; i < rows.length; i += 2) out.push({ key: rows[i]!, value: rows[i + 1]! })
      return out
    }
    const isEmpty = (range: Range) => compare(range.lo, range.hi) >= 0

    /** At most `limit` entries, read synchronously with one iterator. */
    const page = (cf: ColumnFamily, range: Range, limit: number, reverse: boolean): Array<Entry> => {
      const out: Array<Entry> = []
      if (limit <= 0 || isEmpty(range)) return out
      const it = iterator(cf, range, reverse, limit)
      try {
        for (;;) {
          const { rows, finished } = it._nextvSync(limit - out.length)
          entries(rows, out)
          if (finished || out.length >= limit) return out
        }
      } finally {
        close(it)
      }
    }

    const readFormat = Effect.map(getMany("default", [Meta.format]), ([v]) => (v === undefined ? supported : decodeU32(v)))

    yield* initialize({ get: (cf, key) => Effect.map(getMany(cf, [key]), (vs) => vs[0]), write: (b) => write(b, true) }, supported)

    const store: StoreShape = {
      write: (batch, opts) => write(batch, opts.sync),
      get: (cf, key) =>
        Effect.suspend(() => {
          stats.point(familyOf(cf, key), 1)
          return Effect.map(getMany(cf, [key]), (vs) => vs[0])
        }),
      multiGet: (cf, keys) =>
        Effect.suspend(() => {
          for (const k of keys) stats.point(familyOf(cf, k), 1)
          return getMany(cf, keys)
        }),
      getCounters: (cf, keys) =>
        Effect.suspend(() => {
          for (const k of keys) stats.point(familyOf(cf, k), 1)
          return Effect.flatMap(getMany(cf, keys), (vs) => Effect.try({ try: () => vs.map(decodeInt64LE), catch: fail("getCounters") }))
        }),
      scan: (cf, range, o) =>
        Effect.suspend(() => {
          stats.scan(familyOf(cf, range.lo))
          return Effect.try({ try: () => page(cf, range, o.limit, o.reverse === true), catch: fail("scan") })
        }),
      stream: (cf, range, o) =>
        Stream.suspend(() => {
          stats.scan(familyOf(cf, range.lo))
          if (isEmpty(range)) return Stream.empty
          const chunk = Math.max(1, o?.chunk ?? 1000)
          // The iterator lives in the stream's scope: closed when the stream ends, fails or is interrupted.
          return Stream.scoped(
            Stream.fromPull(
              Effect.map(
                Effect.acquireRelease(
                  Effect.try({ try: () => iterator(cf, range, o?.reverse === true, -1), catch: fail("stream") }),
                  (it) => Effect.sync(() => close(it))
                ),
                (it) => {
                  let finished = false
                  const pull: Effect.Effect<Arr.NonEmptyReadonlyArray<Entry>, StoreError | Cause.Done> = Effect.suspend(() => {
                    if (finished) return Cause.done()
                    return Effect.flatMap(
                      Effect.try({
                        try: () => {
                          const next = it._nextvSync(chunk)
                          finished = next.finished
                          return entries(next.rows, [])
                        },
                        catch: fail("stream")
                      }),
                      (rows) => (Arr.isArrayNonEmpty(rows) ? Effect.succeed(rows) : pull)
                    )
                  })
                  return pull
                }
              )
            )
          )
        }),
      first: (cf, range, o) =>
        Effect.suspend(() => {
          stats.scan(familyOf(cf, range.lo))
          return Effect.try({ try: () => page(cf, range, 1, o?.reverse === true)[0], catch: fail("first") })
        }),
      format: readFormat,
      stats: stats.snapshot,
      health: readHealth(db, dir),
      resetStats: stats.reset,
      marks,
      scrub: Effect.void
    }
    return store
  })

/** The RocksDB store in `dir`, open for the layer's scope (closed, worker first, when it ends). */
export const layerRocksDb = (dir: string, options: RocksDbOptions = {}): Layer.Layer<Store, StoreOpenError> =>
  Layer.effect(Store, makeRocksDbStore(dir, options))
