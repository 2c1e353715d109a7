/**
 * Key layouts: the shape of a key after its family's prefix byte (TEN-1 §1, §3).
 *
 * A family names its layout in the family table (families.ts); every family of one layout
 * shares one codec (key-codec.ts). Fixed layouts are big-endian integer fields; the variable
 * ones carry UTF-8 strings, which never contain 0x00 or 0xFF.
 */

import { readU16, readU32, readU64, writeU64 } from "./bytes.js"

export type Width = 1 | 2 | 4 | 8

/** A fixed layout's fields in key order and its reader and writer, at `off` (after any prefix). */
export interface FixedLayout<V extends ReadonlyArray<number> = never, D extends object = object> {
  readonly _tag: "fixed"
  readonly name: string
  /** Bytes of each field, in key order. */
  readonly widths: ReadonlyArray<Width>
  /** Bytes after the prefix. */
  readonly width: number
  readonly write: (k: Buffer, off: number, ...values: V) => void
  readonly read: (k: Uint8Array, off: number) => D
}

export interface VariableLayout {
  readonly _tag: "variable"
  /** `tenantKey` <<tenant, 0, key>>, `atTenantKey` <<at::64, tenant, 0, key>>, `utf8` <<string>>. */
  readonly name: "tenantKey" | "atTenantKey" | "utf8"
}

export type Layout = FixedLayout | VariableLayout

// Reader and writer are written out per layout, not looped over the widths: keys are built and
// parsed on every hook and delivery, and a literal keeps decoded keys one shape.
const fixed = <V extends ReadonlyArray<number>, D extends object>(
  name: string,
  widths: ReadonlyArray<Width>,
  write: (k: Buffer, off: number, ...values: V) => void,
  read: (k: Uint8Array, off: number) => D
): FixedLayout<V, D> => ({ _tag: "fixed", name, widths, width: widths.reduce<number>((n, w) => n + w, 0), write, read })

const variable = (name: VariableLayout["name"]): VariableLayout => ({ _tag: "variable", name })

export const Layouts = {
  seq: fixed(
    "seq",
    [8],
    (k, o, seq: number) => writeU64(k, seq, o),
    (k, o) => ({ seq: readU64(k, o) })
  ),
  seqSink: fixed(
    "seqSink",
    [8, 2],
    (k, o, seq: number, sink: number) => (writeU64(k, seq, o), k.writeUInt16BE(sink, o + 8)),
    (k, o) => ({ seq: readU64(k, o), sink: readU16(k, o + 8) })
  ),
  ordAtSeqSink: fixed(
    "ordAtSeqSink",
    [4, 8, 8, 2],
    (k, o, ord: number, at: number, seq: number, sink: number) => (
      k.writeUInt32BE(ord, o), writeU64(k, at, o + 4), writeU64(k, seq, o + 12), k.writeUInt16BE(sink, o + 20)
    ),
    (k, o) => ({ ord: readU32(k, o), at: readU64(k, o + 4), seq: readU64(k, o + 12), sink: readU16(k, o + 20) })
  ),
  ordSeqSink: fixed(
    "ordSeqSink",
    [4, 8, 2],
    (k, o, ord: number, seq: number, sink: number) => (k.writeUInt32BE(ord, o), writeU64(k, seq, o + 4), k.writeUInt16BE(sink, o + 12)),
    (k, o) => ({ ord: readU32(k, o), seq: readU64(k, o + 4), sink: readU16(k, o + 12) })
  ),
  atSeqSink: fixed(
    "atSeqSink",
    [8, 8, 2],
    (k, o, at: number, seq: number, sink: number) => (writeU64(k, at, o), writeU64(k, seq, o + 8), k.writeUInt16BE(sink, o + 16)),
    (k, o) => ({ at: readU64(k, o), seq: readU64(k, o + 8), sink: readU16(k, o + 16) })
  ),
  bucketOrd: fixed(
    "bucketOrd",
    [8, 4],
    (k, o, bucket: number, ord: number) => (writeU64(k, bucket, o), k.writeUInt32BE(ord, o + 8)),
    (k, o) => ({ bucket: readU64(k, o), ord: readU32(k, o + 8) })
  ),
  atQid: fixed(
    "atQid",
    [8, 8],
    (k, o, at: number, qid: number) => (writeU64(k, at, o), writeU64(k, qid, o + 8)),
    (k, o) => ({ at: readU64(k, o), qid: readU64(k, o + 8) })
  ),
  seqAt: fixed(
    "seqAt",
    [8, 8],
    (k, o, seq: number, at: number) => (writeU64(k, seq, o), writeU64(k, at, o + 8)),
    (k, o) => ({ seq: readU64(k, o), at: readU64(k, o + 8) })
  ),
  ord: fixed(
    "ord",
    [4],
    (k, o, ord: number) => void k.writeUInt32BE(ord, o),
    (k, o) => ({ ord: readU32(k, o) })
  ),
  ordId: fixed(
    "ordId",
    [4, 8],
    (k, o, ord: number, id: number) => (k.writeUInt32BE(ord, o), writeU64(k, id, o + 4)),
    (k, o) => ({ ord: readU32(k, o), id: readU64(k, o + 4) })
  ),
  /** An ordering lane of a tenant (src/domain/ordering.ts): the heads family. */
  ordLane: fixed(
    "ordLane",
    [4, 8],
    (k, o, ord: number, lane: number) => (k.writeUInt32BE(ord, o), writeU64(k, lane, o + 4)),
    (k, o) => ({ ord: readU32(k, o), lane: readU64(k, o + 4) })
  ),
  /** A row waiting in its lane, in accepted order: the waiting family. */
  ordLaneSeqSink: fixed(
    "ordLaneSeqSink",
    [4, 8, 8, 2],
    (k, o, ord: number, lane: number, seq: number, sink: number) => (
      k.writeUInt32BE(ord, o), writeU64(k, lane, o + 4), writeU64(k, seq, o + 12), k.writeUInt16BE(sink, o + 20)
    ),
    (k, o) => ({ ord: readU32(k, o), lane: readU64(k, o + 4), seq: readU64(k, o + 12), sink: readU16(k, o + 20) })
  ),
  ordField: fixed(
    "ordField",
    [4, 1],
    (k, o, ord: number, field: number) => (k.writeUInt32BE(ord, o), (k[o + 4] = field)),
    (k, o) => ({ ord: readU32(k, o), field: k[o + 4]! })
  ),
  tenantKey: variable("tenantKey"),
  atTenantKey: variable("atTenantKey"),
  utf8: variable("utf8")
} as const
