/** Values of the index families (TEN-1 §3): due, inflight, dead and archive rows. */
import { asBuffer, corrupt, encodeU32, readU16, readU32, readU64, writeU64, zeroed } from "./bytes.js"

/** Due value <<size::32, kind::8>>. */
export type DueKind = 0 | 1
export interface DueValue {
  readonly size: number
  readonly kind: DueKind
}
export const dueValue = (size: number, kind: DueKind): Uint8Array => {
  const b = Buffer.allocUnsafe(5) // every byte written
  b.writeUInt32BE(size, 0)
  b[4] = kind
  return b
}
export const decodeDueValue = (v: Uint8Array): DueValue =>
  v.length === 5 && (v[4] === 0 || v[4] === 1) ? { size: readU32(v, 0), kind: v[4] } : corrupt("due value", v)

/** Inflight value <<size::32>>. */
export const sizeValue = (size: number): Uint8Array => encodeU32(size)
export const decodeSizeValue = (v: Uint8Array): number => (v.length === 4 ? readU32(v, 0) : corrupt("size value", v))

/**
 * Dead value. Version byte = the format that wrote it: 2 `{sourceId, id}`, 3 `{sourceId, id, ord}`,
 * then in format 3 an optional lane byte: 1 its ordered lane was skipped past it (onDead skip), 2 it
 * holds its lane (onDead hold). docs/delivery.md "Ordered delivery".
 */
export interface DeadValue {
  readonly sourceId: string
  readonly id: string
  /** undefined only in a format 2 value. */
  readonly ord: number | undefined
  /** The head of an ordered lane when it died: its lane moved on without it, or waits for it. */
  readonly lane?: DeadLane | undefined
}
export type DeadLane = "skipped" | "held"
const DEAD_LANE: Record<DeadLane, number> = { skipped: 1, held: 2 }

const writeStr16 = (parts: Array<Buffer>, s: string) => {
  const body = Buffer.from(s, "utf8")
  const len = zeroed(2)
  len.writeUInt16BE(body.length, 0)
  parts.push(len, body)
}

export const deadValue = (v: { readonly sourceId: string; readonly id: string; readonly ord: number; readonly lane?: DeadLane | undefined }): Uint8Array => {
  const head = zeroed(5)
  head[0] = 3
  head.writeUInt32BE(v.ord, 1)
  const parts = [head]
  writeStr16(parts, v.sourceId)
  writeStr16(parts, v.id)
  if (v.lane !== undefined) parts.push(Buffer.from([DEAD_LANE[v.lane]]))
  return Buffer.concat(parts)
}

export const deadValueV2 = (v: { readonly sourceId: string; readonly id: string }): Uint8Array => {
  const parts = [Buffer.from([2])]
  writeStr16(parts, v.sourceId)
  writeStr16(parts, v.id)
  return Buffer.concat(parts)
}

export const decodeDeadValue = (v: Uint8Array): DeadValue => {
  const b = asBuffer(v)
  const version = b[0]
  let off: number
  let ord: number | undefined
  if (version === 3 && b.length >= 9) {
    ord = b.readUInt32BE(1)
    off = 5
  } else if (version === 2 && b.length >= 5) {
    ord = undefined
    off = 1
  } else return corrupt("dead value", v)
  const srcLen = b.readUInt16BE(off)
  const sourceId = b.toString("utf8", off + 2, off + 2 + srcLen)
  off += 2 + srcLen
  const idLen = b.readUInt16BE(off)
  const id = b.toString("utf8", off + 2, off + 2 + idLen)
  const end = off + 2 + idLen
  if (version === 3 && end + 1 === b.length && (b[end] === 1 || b[end] === 2)) return { sourceId, id, ord, lane: b[end] === 1 ? "skipped" : "held" }
  if (end !== b.length) return corrupt("dead value", v)
  return { sourceId, id, ord }
}

/** Archive obligation value: format 3 <<size::32, ord::32>>, format 2 <<size::32>>. */
export const archiveValue = (size: number, ord: number): Uint8Array => {
  const b = zeroed(8)
  b.writeUInt32BE(size, 0)
  b.writeUInt32BE(ord, 4)
  return b
}
export const decodeArchiveValue = (v: Uint8Array): { readonly size: number; readonly ord: number } =>
  v.length === 8 ? { size: readU32(v, 0), ord: readU32(v, 4) } : corrupt("archive value", v)

/**
 * Head value <<seq::64, sink::16, flags::8>>: the lane's one live row (due, inflight) or, held, its
 * dead row (onDead hold). Flags: 1 held; 2 `below`, a replay put a `?W` row below the head's
 * (seq, sink), so its successor is sought from the lane's first `?W` key, not from the head's.
 */
export interface HeadValue {
  readonly seq: number
  readonly sink: number
  readonly held: boolean
  readonly below: boolean
}
export const headValue = (h: HeadValue): Uint8Array => {
  const b = zeroed(11)
  writeU64(b, h.seq, 0)
  b.writeUInt16BE(h.sink, 8)
  b[10] = (h.held ? 1 : 0) | (h.below ? 2 : 0)
  return b
}
export const decodeHeadValue = (v: Uint8Array): HeadValue =>
  v.length === 11 && v[10]! <= 3 ? { seq: readU64(v, 0), sink: readU16(v, 8), held: (v[10]! & 1) === 1, below: (v[10]! & 2) === 2 } : corrupt("head value", v)
