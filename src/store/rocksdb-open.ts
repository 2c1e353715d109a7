/**
 * Opening and closing the RocksDB database: the column families and their
 * options, the format fence at the column family level (TEN-1 §8) and the
 * mapping of the binding's open errors to typed ones.
 */
import { type ColumnOptions, RocksLevel } from "@nxtedition/rocksdb"
import { Effect } from "effect"
import { decodeU32, Meta } from "../domain/keys.js"
import { type ColumnFamily, ColumnFamilies, ColumnFamiliesV2 } from "../domain/ops.js"
import { StoreError, StoreFormatNewer, StoreLocked, StorePermissionDenied } from "./store.js"

const MiB = 1024 * 1024

/**
 * Options by column family (docs/storage.md). With this binding a write buffer
 * size can only be set through `compaction` (write_buffer_size =
 * memtableMemoryBudget / 4, at most 6 buffers), and "level" also turns
 * compression off on L0-L1 and forces ZSTD on levels >= 2, so counters use
 * "universal" to stay uncompressed at every level.
 *
 * Every family has an explicit budget: left to the binding's defaults, a
 * family's memtables are 64 MiB buffers (two of them), and a restart replays
 * the WAL into them, so a node's memory after a restart depended on how much
 * was unflushed when it stopped (docs/storage.md "Memory").
 */
export const columnOptions: Readonly<Record<ColumnFamily, ColumnOptions>> = {
  default: { compaction: "level", memtableMemoryBudget: 8 * MiB },
  hooks: { compaction: "level", memtableMemoryBudget: 64 * MiB },
  deliveries: { compaction: "level", memtableMemoryBudget: 32 * MiB },
  index: { compaction: "level", memtableMemoryBudget: 64 * MiB },
  audit: { compaction: "level", memtableMemoryBudget: 8 * MiB },
  tenants: { compaction: "level", memtableMemoryBudget: 8 * MiB },
  counters: { mergeOperator: "uint64add", compression: false, compaction: "universal", memtableMemoryBudget: 4 * MiB }
}

/** Block cache of each column family (the binding's default, set here so the bound is ours). */
export const BLOCK_CACHE_BYTES = 8 * MiB

/** Write buffers a family may hold at once ("level" and "universal" both set 6). */
export const MAX_WRITE_BUFFERS = 6

/** The most RocksDB's memtables and block caches may hold, summed over the families (docs/storage.md "Memory"). */
export const storeMemoryBound = (families: ReadonlyArray<ColumnFamily>): number =>
  families.reduce((n, f) => n + ((columnOptions[f].memtableMemoryBudget ?? 0) / 4) * MAX_WRITE_BUFFERS + BLOCK_CACHE_BYTES, 0)

/** The column families a build of `format` opens (and creates when missing). */
export const columnFamiliesOf = (format: number): ReadonlyArray<ColumnFamily> =>
  format >= 3 ? ColumnFamilies : ColumnFamiliesV2

export interface OpenTuning {
  /** Block cache per column family, bytes (binding default 8 MiB). */
  readonly cacheSize?: number
  /** RocksDB background threads (binding default: cores / 2). */
  readonly parallelism?: number
}

const nativeMessage = (e: unknown): string => {
  const err = e as { message?: string; cause?: { message?: string } } | undefined
  return err?.cause?.message ?? err?.message ?? String(e)
}

const UNOPENED = /Column families not opened: (.*)$/

const columnsFor = (names: ReadonlyArray<string>, tuning: OpenTuning): Record<string, ColumnOptions> =>
  Object.fromEntries(
    names.map((name) => [
      name,
      {
        ...(columnOptions[name as ColumnFamily] ?? {}),
        cacheSize: tuning.cacheSize ?? BLOCK_CACHE_BYTES
      }
    ])
  )

const rawOpen = (dir: string, names: ReadonlyArray<string>, tuning: OpenTuning) =>
  Effect.tryPromise({
    try: async () => {
      const db = new RocksLevel(dir)
      await db.open({
        createIfMissing: true,
        columns: columnsFor(names, tuning),
        ...(tuning.parallelism === undefined ? {} : { parallelism: tuning.parallelism })
      })
      return db
    },
    catch: nativeMessage
  })

/**
 * Run `effect` with the event loop held. Neither a terminating worker nor the binding's
 * close keeps the process alive on its own, so a process with nothing else to do would
 * exit in the middle of a store's close, the DB never closed.
 */
export const holdingLoop = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(
    Effect.sync(() => setInterval(() => {}, 60_000)),
    () => effect,
    (timer) => Effect.sync(() => clearInterval(timer))
  )

export const closeDb = (db: RocksLevel): Effect.Effect<void> => holdingLoop(Effect.promise(() => db.close().catch(() => undefined)))

/**
 * The store holds column families this build does not know: a newer format.
 * Open it once more listing them too, read the stamp, close, and report.
 */
const probeNewer = (dir: string, names: ReadonlyArray<string>, extra: ReadonlyArray<string>, supported: number, tuning: OpenTuning) =>
  Effect.acquireUseRelease(
    rawOpen(dir, [...names, ...extra], tuning).pipe(Effect.mapError((m) => openError(dir, m))),
    (db) =>
      Effect.gen(function* () {
        const stamp = yield* Effect.try({
          try: () => db._getManySync([Buffer.from(Meta.format)], { column: db.columns["default"]! })[0],
          catch: (e) => new StoreError({ op: "open", message: nativeMessage(e) })
        })
        const found = stamp ? decodeU32(stamp) : undefined
        if (found !== undefined && found > supported) return yield* Effect.fail(new StoreFormatNewer({ found, supported }))
        return yield* Effect.fail(
          new StoreError({ op: "open", message: `${dir} has column families this build does not know: ${extra.join(", ")} (format ${found ?? "unstamped"})` })
        )
      }),
    closeDb
  )

/** Permission first: RocksDB's "While open a file for lock: …/LOCK: Permission denied" names the LOCK file too. */
const openError = (dir: string, message: string): StoreError | StoreLocked | StorePermissionDenied =>
  /Permission denied|Operation not permitted|\bEACCES\b|\bEPERM\b/.test(message)
    ? new StorePermissionDenied({ dir, message: `store ${dir}: permission denied: ${message}` })
    : /\bLOCK\b|lock hold by current process/.test(message)
      ? new StoreLocked({ dir, message: `store ${dir} is already open (by another process or handle): ${message}` })
      : new StoreError({ op: "open", message: `${dir}: ${message}` })

/** Open `dir` with the column families of format `supported`, creating what is missing. */
export const openDb = (
  dir: string,
  supported: number,
  tuning: OpenTuning
): Effect.Effect<RocksLevel, StoreError | StoreLocked | StorePermissionDenied | StoreFormatNewer> => {
  const names = columnFamiliesOf(supported)
  return rawOpen(dir, names, tuning).pipe(
    Effect.catch((message) => {
      const unopened = UNOPENED.exec(message)
      return unopened === null
        ? Effect.fail(openError(dir, message))
        : probeNewer(dir, names, unopened[1]!.split(", ").map((s) => s.trim()), supported, tuning)
    })
  )
}
