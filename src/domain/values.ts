/** Values of the index families (TEN-1 §3): due, inflight, dead and archive rows. */
import { asBuffer, corrupt, encodeU32, readU32, zeroed } from "./bytes.js"

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

/** Dead value. Version byte = the format that wrote it: 2 `{sourceId, id}`, 3 `{sourceId, id, ord}`. */
export interface DeadValue {
  readonly sourceId: string
  readonly id: string
  /** undefined only in a format 2 value. */
  readonly ord: number | undefined
}

const writeStr16 = (parts: Array<Buffer>, s: string) => {
  const body = Buffer.from(s, "utf8")
  const len = zeroed(2)
  len.writeUInt16BE(body.length, 0)
  parts.push(len, body)
}

export const deadValue = (v: { readonly sourceId: string; readonly id: string; readonly ord: number }): Uint8Array => {
  const head = zeroed(5)
  head[0] = 3
  head.writeUInt32BE(v.ord, 1)
  const parts = [head]
  writeStr16(parts, v.sourceId)
  writeStr16(parts, v.id)
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
  if (off + 2 + idLen !== b.length) return corrupt("dead value", v)
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
