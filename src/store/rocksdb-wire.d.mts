/** Types of rocksdb-wire.mjs (plain JavaScript so the commit worker can load it). */
import type { ColumnHandle, RocksLevel } from "@nxtedition/rocksdb"
import type { Op } from "../domain/ops.js"

export declare const PUT: 1
export declare const DEL: 2
export declare const MERGE: 3
export declare const DELETE_RANGE: 4

export declare class CommitError extends Error {
  constructor(code: string, message: string)
  readonly code: string
}

export declare const encodeBatch: (ops: ReadonlyArray<Op>, cfIndex: (cf: string) => number) => ArrayBuffer

export declare const decodeBatch: (
  bytes: Buffer,
  visit: (tag: number, cf: number, key: Buffer, body: Buffer | undefined, start: number) => void,
  end?: number
) => void

export interface CommitOptions {
  readonly sync: boolean
  readonly maxRangeDeleteKeys: number
  /** Column family names by index, for error messages. */
  readonly names?: ReadonlyArray<string>
}

export declare const commitEncoded: (
  db: RocksLevel,
  columns: ReadonlyArray<ColumnHandle>,
  buffer: ArrayBuffer | Buffer,
  opts: CommitOptions
) => void
