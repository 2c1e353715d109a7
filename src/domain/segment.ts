/**
 * Archive segment format (pure codecs; docs/storage.md "Archive segments").
 *
 * A segment `<firstSeq:16 hex>.seg` is the 8-byte magic `ANKSEG\0\1` then
 * frames; its index `<firstSeq:16 hex>.idx` is `ANKIDX\0\1` then frames.
 * A frame is `<<len::32, crc32(payload)::32, payload>>`, so a torn or
 * damaged tail is detected rather than trusted.
 * - segment frame payload: gzip of a block `<<count::32, record*>>`,
 *   record = `<<seq::64, ord::32, envLen::32, envelope>>` (seq order);
 * - index frame payload: entries `<<seq::64, frameOffset::64, idLen::16, id>>`,
 *   one per record of the segment frame at `frameOffset`.
 * The compactor's progress cursor (default family, `m:cursor:archive`):
 * `<<1::8, segment firstSeq::64, segment end::64, index end::64, lastSeq::64>>`
 * marks the committed prefix of the current segment and its index.
 */
import { crc32 } from "node:zlib"
import { readU64, writeU64 } from "./keys.js"

export const SEGMENT_MAGIC = Buffer.from("ANKSEG\u0000\u0001", "latin1")
export const INDEX_MAGIC = Buffer.from("ANKIDX\u0000\u0001", "latin1")
export const HEADER_BYTES = 8
export const FRAME_HEAD_BYTES = 8
/** A frame longer than this is garbage (a torn length field), not a frame. */
export const MAX_FRAME_BYTES = 256 * 1024 * 1024

export const segmentName = (firstSeq: number): string => `${firstSeq.toString(16).padStart(16, "0")}.seg`
export const indexName = (firstSeq: number): string => `${firstSeq.toString(16).padStart(16, "0")}.idx`
/** firstSeq of a `.seg` or `.idx` file name; undefined for anything else. */
export const parseName = (name: string): { readonly firstSeq: number; readonly kind: "seg" | "idx" } | undefined => {
  const m = /^([0-9a-f]{16})\.(seg|idx)$/.exec(name)
  return m === null ? undefined : { firstSeq: parseInt(m[1]!, 16), kind: m[2] as "seg" | "idx" }
}

// ---------------------------------------------------------------------------
// Frames

export const frame = (payload: Uint8Array): Buffer => {
  const head = Buffer.alloc(FRAME_HEAD_BYTES)
  head.writeUInt32BE(payload.length, 0)
  head.writeUInt32BE(crc32(payload), 4)
  return Buffer.concat([head, payload])
}

export type FrameRead =
  | { readonly _tag: "frame"; readonly offset: number; readonly payload: Buffer; readonly end: number }
  /** Not enough bytes for the head or the payload: a torn write. */
  | { readonly _tag: "torn"; readonly offset: number }
  /** A length out of bounds or a CRC mismatch. */
  | { readonly _tag: "bad"; readonly offset: number; readonly reason: string }
  | { readonly _tag: "end"; readonly offset: number }

/** The frame at `offset` of `buf` (the file's bytes up to some end). */
export const readFrame = (buf: Buffer, offset: number): FrameRead => {
  if (offset === buf.length) return { _tag: "end", offset }
  if (offset + FRAME_HEAD_BYTES > buf.length) return { _tag: "torn", offset }
  const len = buf.readUInt32BE(offset)
  if (len > MAX_FRAME_BYTES) return { _tag: "bad", offset, reason: `frame length ${len}` }
  const end = offset + FRAME_HEAD_BYTES + len
  if (end > buf.length) return { _tag: "torn", offset }
  const payload = buf.subarray(offset + FRAME_HEAD_BYTES, end)
  if (crc32(payload) !== buf.readUInt32BE(offset + 4)) return { _tag: "bad", offset, reason: "crc mismatch" }
  return { _tag: "frame", offset, payload, end }
}

/** Every good frame from the header on, and where the good prefix ends (with why, if not at the end). */
export const scanFrames = (
  buf: Buffer,
  magic: Buffer
): { readonly frames: ReadonlyArray<{ readonly offset: number; readonly payload: Buffer }>; readonly goodEnd: number; readonly stop: FrameRead } => {
  if (buf.length < HEADER_BYTES || !buf.subarray(0, HEADER_BYTES).equals(magic)) {
    return { frames: [], goodEnd: 0, stop: { _tag: "bad", offset: 0, reason: "bad magic" } }
  }
  const frames: Array<{ offset: number; payload: Buffer }> = []
  let offset = HEADER_BYTES
  for (;;) {
    const r = readFrame(buf, offset)
    if (r._tag !== "frame") return { frames, goodEnd: offset, stop: r }
    frames.push({ offset, payload: r.payload })
    offset = r.end
  }
}

// ---------------------------------------------------------------------------
// Blocks (segment frame payload, before compression)

export interface ArchivedHook {
  readonly seq: number
  readonly ord: number
  /** The hook row's value as stored (src/domain/envelope.ts). */
  readonly envelope: Uint8Array
}

export const encodeBlock = (hooks: ReadonlyArray<ArchivedHook>): Buffer => {
  const parts: Array<Uint8Array> = []
  const head = Buffer.alloc(4)
  head.writeUInt32BE(hooks.length, 0)
  parts.push(head)
  for (const h of hooks) {
    const r = Buffer.alloc(16)
    writeU64(r, h.seq, 0)
    r.writeUInt32BE(h.ord, 8)
    r.writeUInt32BE(h.envelope.length, 12)
    parts.push(r, h.envelope)
  }
  return Buffer.concat(parts)
}

export const decodeBlock = (b: Buffer): Array<ArchivedHook> => {
  const count = b.readUInt32BE(0)
  const out: Array<ArchivedHook> = []
  let off = 4
  for (let i = 0; i < count; i++) {
    const seq = readU64(b, off)
    const ord = b.readUInt32BE(off + 8)
    const len = b.readUInt32BE(off + 12)
    off += 16
    if (off + len > b.length) throw new Error(`archive block truncated at record ${i} of ${count}`)
    out.push({ seq, ord, envelope: b.subarray(off, off + len) })
    off += len
  }
  if (off !== b.length) throw new Error(`archive block has ${b.length - off} trailing bytes`)
  return out
}

// ---------------------------------------------------------------------------
// Index entries

export interface IndexEntry {
  readonly seq: number
  /** Offset of the segment frame that holds the hook. */
  readonly frameOffset: number
  /** The hook's public id. */
  readonly id: string
}

export const encodeIndex = (entries: ReadonlyArray<IndexEntry>): Buffer =>
  Buffer.concat(
    entries.flatMap((e) => {
      const id = Buffer.from(e.id, "utf8")
      const h = Buffer.alloc(18)
      writeU64(h, e.seq, 0)
      writeU64(h, e.frameOffset, 8)
      h.writeUInt16BE(id.length, 16)
      return [h, id]
    })
  )

export const decodeIndex = (b: Buffer): Array<IndexEntry> => {
  const out: Array<IndexEntry> = []
  let off = 0
  while (off < b.length) {
    const seq = readU64(b, off)
    const frameOffset = readU64(b, off + 8)
    const idLen = b.readUInt16BE(off + 16)
    off += 18
    out.push({ seq, frameOffset, id: b.toString("utf8", off, off + idLen) })
    off += idLen
  }
  return out
}

// ---------------------------------------------------------------------------
// The compactor's cursor

export interface Cursor {
  /** The current segment (its name is `segmentName(segment)`). */
  readonly segment: number
  /** Committed end of the current segment file. */
  readonly segmentEnd: number
  /** Committed end of its index file. */
  readonly indexEnd: number
  /** Highest seq written to any segment (0 before the first). */
  readonly lastSeq: number
}

export const encodeCursor = (c: Cursor): Uint8Array => {
  const b = Buffer.alloc(33)
  b[0] = 1
  writeU64(b, c.segment, 1)
  writeU64(b, c.segmentEnd, 9)
  writeU64(b, c.indexEnd, 17)
  writeU64(b, c.lastSeq, 25)
  return b
}

export const decodeCursor = (v: Uint8Array): Cursor => {
  if (v.length !== 33 || v[0] !== 1) throw new Error(`corrupt archive cursor: ${Buffer.from(v).toString("hex")}`)
  return { segment: readU64(v, 1), segmentEnd: readU64(v, 9), indexEnd: readU64(v, 17), lastSeq: readU64(v, 25) }
}
