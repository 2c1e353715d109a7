/**
 * The part of `@nxtedition/rocksdb` 12.2.12 that Ankusa uses (the package ships no types).
 * Read from its index.js, chained-batch.js, iterator.js and binding.cc. The underscore
 * methods are the binding's synchronous calls; we use them on purpose (see
 * src/store/rocksdb.ts) and never the abstract-level async wrappers.
 */
declare module "@nxtedition/rocksdb" {
  /** A native column family handle (a napi external); pass it as `{ column }`. */
  export interface ColumnHandle {
    readonly __rocksdbColumn: unique symbol
  }

  /** Per column family (and DB-wide) options read by `InitOptions` in binding.cc. */
  export interface ColumnOptions {
    /** Only with `compaction`: write_buffer_size = budget / 4 (default 256 MiB). */
    readonly memtableMemoryBudget?: number
    /** "level" also sets ZSTD on levels >= 2, overriding `compression: false`. */
    readonly compaction?: "level" | "universal"
    /** ZSTD when true (the default); RocksDB's default (none in this build) when false. */
    readonly compression?: boolean
    /** e.g. "uint64add" (8-byte little-endian add) or "maxRev". */
    readonly mergeOperator?: string
    readonly prefixExtractor?: string
    readonly comparator?: string
    /** Block cache per column family, bytes (default 8 MiB; 0 disables it). */
    readonly cacheSize?: number
    readonly cacheIndexAndFilterBlocks?: boolean
    readonly optimize?: "point-lookup" | "range-lookup"
    readonly filterPolicy?: string
    readonly blockSize?: number
    readonly blockRestartInterval?: number
    readonly optimizeFiltersForMemory?: boolean
  }

  export interface OpenOptions extends ColumnOptions {
    readonly createIfMissing?: boolean
    readonly errorIfExists?: boolean
    readonly parallelism?: number
    readonly pipelinedWrite?: boolean
    readonly walCompression?: boolean
    readonly infoLogLevel?: "debug" | "info" | "warn" | "error" | "fatal" | "header"
    /** Every existing column family must be listed, or open fails ("Column families not opened: ..."). */
    readonly columns?: Readonly<Record<string, ColumnOptions>>
  }

  export interface ColumnOption {
    readonly column?: ColumnHandle
  }

  export interface RangeOptions extends ColumnOption {
    readonly gt?: Buffer
    readonly gte?: Buffer
    readonly lt?: Buffer
    readonly lte?: Buffer
    readonly reverse?: boolean
    /** -1 (the default) is unbounded. */
    readonly limit?: number
  }

  export interface IteratorOptions extends RangeOptions {
    readonly keys?: boolean
    readonly values?: boolean
    /** The default is "utf8": always pass "buffer". */
    readonly keyEncoding: "buffer"
    readonly valueEncoding: "buffer"
    readonly highWaterMarkBytes?: number
    readonly fillCache?: boolean
  }

  export interface GetManyOptions extends ColumnOption {
    readonly fillCache?: boolean
  }

  export class ChainedBatch {
    _put(key: Buffer, value: Buffer, options: ColumnOption): void
    _del(key: Buffer, options: ColumnOption): void
    /** Only on a column family opened with a merge operator: otherwise the write fails part-applied. */
    _merge(key: Buffer, value: Buffer, options: ColumnOption): void
    /** Synchronous on the calling thread, fsync included when `sync`. */
    _writeSync(options: { readonly sync?: boolean; readonly lowPriority?: boolean }): void
    _closeSync(): void
    readonly length: number
  }

  export class Iterator {
    /** rows = [key, value, key, value, ...] (undefined for a side not requested). */
    _nextvSync(size: number, options?: object): { readonly rows: Array<Buffer | undefined>; readonly finished: boolean }
    _seekSync(target: Buffer): void
    _closeSync(): void
  }

  export class RocksLevel {
    /** A path, or `db.handle` of an open DB (e.g. in a worker thread: shares that DB). */
    constructor(locationOrHandle: string | bigint, options?: object)
    readonly status: "opening" | "open" | "closing" | "closed"
    /** Column family handles by name, after open. */
    readonly columns: Readonly<Record<string, ColumnHandle>>
    /** A pointer to the native DB; throws unless open. */
    readonly handle: bigint
    readonly location: string
    readonly sequence: number
    open(options?: OpenOptions): Promise<void>
    close(): Promise<void>
    batch(): ChainedBatch
    iterator(options: IteratorOptions): Iterator
    /** Range delete outside any batch. */
    clear(options: RangeOptions): Promise<void>
    /**
     * Synchronous `DB::GetProperty` on the DEFAULT column family (binding.cc `db_get_property`):
     * per-family properties describe that family only; DB-wide ones (e.g. "rocksdb.is-write-stopped")
     * the whole DB. The value as text; "" for an unknown property. Throws unless open.
     */
    getProperty(property: string): string
    /** abstract-level: forget a batch or iterator closed with `_closeSync` (which does not, and would leak). */
    detachResource(resource: ChainedBatch | Iterator): void
    _getManySync(keys: ReadonlyArray<Buffer>, options?: GetManyOptions): Array<Buffer | undefined | null>
  }
}
