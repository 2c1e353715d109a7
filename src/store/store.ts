/**
 * The `Store` service: atomic batches over column families, point reads,
 * bounded scans and counters. Three layers implement it and pass one
 * conformance suite (test/store-conformance.ts): RocksDB
 * (`src/store/rocksdb.ts`), PostgreSQL (`src/store/postgres.ts`) and an
 * ordered in-memory map (`src/store/memory.ts`).
 */
import { Context, Data, type Effect, type Stream } from "effect"
import type { Batch, ColumnFamily } from "../domain/ops.js"
import type { WriteMarks } from "./write-marks.js"

export interface Entry {
  readonly key: Uint8Array
  readonly value: Uint8Array
}

/** Keys k with lo <= k < hi (byte order). */
export interface Range {
  readonly lo: Uint8Array
  readonly hi: Uint8Array
}

export interface ScanOptions {
  /** Upper bound on entries returned; every scan is bounded. */
  readonly limit: number
  /** Newest (highest key) first. */
  readonly reverse?: boolean
}

export interface StreamOptions {
  readonly reverse?: boolean
  /** Entries read from the store per chunk (default 1,000). */
  readonly chunk?: number
}

/** Reads served since the last reset, by logical family name (see `Keys.familyOf`). */
export interface StoreStats {
  readonly scans: Readonly<Record<string, number>>
  readonly pointReads: Readonly<Record<string, number>>
}

/** The store directory's files, bytes by kind (RocksDB: `*.sst`, `*.log` = the WAL, the rest). */
export interface StoreDisk {
  readonly sst: number
  readonly wal: number
  readonly other: number
  /** Files counted: at most the listing's bound. */
  readonly files: number
  /** The listing stopped at its bound: the sizes are those of the first `files` files. */
  readonly truncated: boolean
}

/** What the store says of its own health (docs/api.md "Store health"). */
export interface StoreHealth {
  /** Writes are stopped (a write stall: too many L0 files, memtables or pending compaction bytes). */
  readonly writeStopped: boolean
  /** Writes are being slowed to this many bytes a second; 0 when they are not. */
  readonly delayedWriteRate: number
  /** Background (flush or compaction) errors since open; past a hard one the store refuses writes. */
  readonly backgroundErrors: number
  readonly runningCompactions: number
  readonly runningFlushes: number
  readonly disk: StoreDisk
  /** A store in a database server (PostgreSQL): its round trips, pool, errors and replication. */
  readonly database?: DatabaseHealth
}

/** The lease of a shared store (src/ha/lease.ts drives it; docs/architecture.md "High availability"). */
export interface LeaseOps {
  /** Take the lease if it expired, has no holder, or its holder's session ended: the new epoch, or undefined. */
  readonly tryAcquire: (holder: string, leaseMs: number) => Effect.Effect<bigint | undefined, StoreError>
  /** Extend the lease by `leaseMs` from now (the server's clock); false once another node took it. */
  readonly renew: (holder: string, epoch: bigint, leaseMs: number) => Effect.Effect<boolean, StoreError>
  /** Give the lease up (shutdown): a standby takes it at its next try. */
  readonly release: (holder: string, epoch: bigint) => Effect.Effect<void, StoreError>
  /** From now on every batch commits only while `epoch` is the lease's: after a takeover each one fails. */
  readonly fence: (epoch: bigint) => Effect.Effect<void>
}

/** What a database-backed store's errors are counted as. */
export type ErrorKind = "connection" | "timeout" | "deadlock" | "fenced" | "server" | "other"

export interface DatabaseHealth {
  /** Connections the pool may open. */
  readonly poolMax: number
  /** Statements in flight now (each holds a connection). */
  readonly inflight: number
  /** Round trips since open, and their total time. */
  readonly roundTrips: number
  readonly roundTripSeconds: number
  /** Batches this node committed since open (a standby's stays 0). */
  readonly commits: number
  /** The slowest round trip since the last reading. */
  readonly slowestSeconds: number
  /** Failed round trips since open, by kind. */
  readonly errors: Readonly<Record<ErrorKind, number>>
  /** The standbys the server streams to (`pg_stat_replication`): state, sync state and bytes of WAL not replayed yet. */
  readonly replicas: ReadonlyArray<{ readonly name: string; readonly state: string; readonly syncState: string; readonly replayLagBytes: number }>
}

export class StoreError extends Data.TaggedError("StoreError")<{
  readonly op: string
  readonly message: string
}> {}

/** A thrown error of store operation `op` as a `StoreError` (the `catch` of an `Effect.try`). */
export const storeErrorOf = (op: string) => (e: unknown): StoreError =>
  new StoreError({ op, message: e instanceof Error ? e.message : String(e) })

/** A scan of a whole family did not reach its hi sentinel (or lacked its lo sentinel). */
export class StoreCorrupt extends Data.TaggedError("StoreCorrupt")<{
  readonly family: string
  readonly lastKey: string
  readonly message: string
}> {}

/**
 * The store was written by a newer build: format `found` > `supported`. Nothing was opened.
 * `of` names a version other than the store format (the PostgreSQL layer's schema).
 */
export class StoreFormatNewer extends Data.TaggedError("StoreFormatNewer")<{
  readonly found: number
  readonly supported: number
  readonly of?: string
}> {
  override get message() {
    return `${this.of ?? "store format"} ${this.found} is newer than this build supports (${this.supported})`
  }
}

/** Another process (or another handle in this one) holds the store's lock. */
export class StoreLocked extends Data.TaggedError("StoreLocked")<{
  readonly dir: string
  readonly message: string
}> {}

/** The store directory or one of its files may not be opened or written by this process (never reported as `StoreLocked`). */
export class StorePermissionDenied extends Data.TaggedError("StorePermissionDenied")<{
  readonly dir: string
  readonly message: string
}> {}

export type StoreOpenError = StoreError | StoreFormatNewer | StoreLocked | StorePermissionDenied

export interface StoreShape {
  /** Commit every op atomically. `sync: true`: durable (fsync'd) before the effect succeeds. */
  readonly write: (batch: Batch, opts: { readonly sync: boolean }) => Effect.Effect<void, StoreError>
  readonly get: (cf: ColumnFamily, key: Uint8Array) => Effect.Effect<Uint8Array | undefined, StoreError>
  readonly multiGet: (
    cf: ColumnFamily,
    keys: ReadonlyArray<Uint8Array>
  ) => Effect.Effect<ReadonlyArray<Uint8Array | undefined>, StoreError>
  /** Read merged counters: signed 64-bit totals (0 for a missing key). */
  readonly getCounters: (
    cf: ColumnFamily,
    keys: ReadonlyArray<Uint8Array>
  ) => Effect.Effect<ReadonlyArray<bigint>, StoreError>
  /** One bounded page of a range, in key order (or reverse). */
  readonly scan: (cf: ColumnFamily, range: Range, opts: ScanOptions) => Effect.Effect<ReadonlyArray<Entry>, StoreError>
  /** A whole range in chunks; never holds more than one chunk in memory. */
  readonly stream: (cf: ColumnFamily, range: Range, opts?: StreamOptions) => Stream.Stream<Entry, StoreError>
  /** The first entry of a range (or the last, with reverse): one seek. */
  readonly first: (
    cf: ColumnFamily,
    range: Range,
    opts?: { readonly reverse?: boolean }
  ) => Effect.Effect<Entry | undefined, StoreError>
  /** The store's format stamp as read at open (after migrations it is re-read). */
  readonly format: Effect.Effect<number, StoreError>
  readonly stats: Effect.Effect<StoreStats>
  /** Write stalls, background work and the size on disk, read now. */
  readonly health: Effect.Effect<StoreHealth, StoreError>
  readonly resetStats: Effect.Effect<void>
  /**
   * Rewrite the store's files so that values deleted so far leave them (TEN-5 physical erasure,
   * docs/storage.md). RocksDB and memory: nothing here (RocksDB's bound is a restart and the
   * compactions it starts); PostgreSQL: `VACUUM FULL` of each table, one at a time.
   */
  readonly scrub: Effect.Effect<void, StoreError>
  /** A store several nodes may open (PostgreSQL): the lease that makes one of them the writer. RocksDB's own lock does that for it. */
  readonly lease?: LeaseOps
  /** Which tenants' counters the writes since a mark merged (write-marks.ts: the live store check). */
  readonly marks: WriteMarks
}

export class Store extends Context.Service<Store, StoreShape>()("ankusa/Store") {}
