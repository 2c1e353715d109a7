/**
 * The op algebra: what a transition asks the store to do, as plain data.
 * A batch is a list of ops that the `Store` commits atomically (all or none).
 * Nothing here does I/O.
 */
import { zeroed } from "./keys.js"

/** RocksDB column families of format 3 (format 2 lacks `tenants` and `counters`). */
export const ColumnFamilies = ["default", "hooks", "deliveries", "index", "audit", "tenants", "counters"] as const
export type ColumnFamily = (typeof ColumnFamilies)[number]

/** Column families of a format 2 store. */
export const ColumnFamiliesV2: ReadonlyArray<ColumnFamily> = ["default", "hooks", "deliveries", "index", "audit"]

export interface Put {
  readonly _tag: "put"
  readonly cf: ColumnFamily
  readonly key: Uint8Array
  readonly value: Uint8Array
}

export interface Del {
  readonly _tag: "del"
  readonly cf: ColumnFamily
  readonly key: Uint8Array
}

/** A blind 64-bit signed add into `key` (only on the counters family). Needs no read. */
export interface Merge {
  readonly _tag: "merge"
  readonly cf: ColumnFamily
  readonly key: Uint8Array
  readonly delta: bigint
}

/** Delete every key in [lo, hi). Atomic with the rest of its batch; see docs/storage.md for its bound. */
export interface DeleteRange {
  readonly _tag: "deleteRange"
  readonly cf: ColumnFamily
  readonly lo: Uint8Array
  readonly hi: Uint8Array
}

export type Op = Put | Del | Merge | DeleteRange
export type Batch = ReadonlyArray<Op>

const EMPTY = new Uint8Array(0)

export const put = (cf: ColumnFamily, key: Uint8Array, value: Uint8Array = EMPTY): Put => ({ _tag: "put", cf, key, value })
export const del = (cf: ColumnFamily, key: Uint8Array): Del => ({ _tag: "del", cf, key })
export const merge = (cf: ColumnFamily, key: Uint8Array, delta: bigint): Merge => ({ _tag: "merge", cf, key, delta })
export const deleteRange = (cf: ColumnFamily, lo: Uint8Array, hi: Uint8Array): DeleteRange => ({
  _tag: "deleteRange",
  cf,
  lo,
  hi
})

/** Counter values are stored as 8-byte little-endian two's complement (RocksDB's `uint64add` operand). */
export const encodeInt64LE = (n: bigint): Uint8Array => {
  const b = zeroed(8)
  b.writeBigInt64LE(BigInt.asIntN(64, n))
  return b
}

export const decodeInt64LE = (bytes: Uint8Array | undefined): bigint => {
  if (bytes === undefined || bytes.length === 0) return 0n
  if (bytes.length !== 8) throw new Error(`counter value has ${bytes.length} bytes, expected 8`)
  return Buffer.from(bytes.buffer, bytes.byteOffset, 8).readBigInt64LE(0)
}
