/**
 * One batch as one buffer, and the routine that commits it. Plain JavaScript
 * because the commit worker (rocksdb-worker.mjs) loads it without a
 * TypeScript loader; the in-thread commit path runs the very same code, so
 * both paths build byte-identical WriteBatches. Types: rocksdb-wire.d.mts.
 *
 * Wire format (in-process transport, never persisted; integers little-endian):
 *   batch := op*
 *   op    := tag:u8 cf:u8 keyLen:u32 key body
 *   body  := put: valueLen:u32 value | del: - | merge: delta:i64 | deleteRange: hiLen:u32 hi (key is lo)
 * `cf` is an index into the column family list the committer was given.
 */

export const PUT = 1
export const DEL = 2
export const MERGE = 3
export const DELETE_RANGE = 4

const TAGS = { put: PUT, del: DEL, merge: MERGE, deleteRange: DELETE_RANGE }

/** A commit failure with a stable code (RANGE_TOO_LARGE, BAD_BATCH, or the binding's). */
export class CommitError extends Error {
  constructor(code, message) {
    super(message)
    this.code = code
  }
}

const keyOf = (op) => (op._tag === "deleteRange" ? op.lo : op.key)

// Short keys and values are copied byte by byte: TypedArray#set costs more than the copy below ~32 bytes.
const copy = (out, src, off) => {
  const n = src.length
  if (n > 32) out.set(src, off)
  else for (let i = 0; i < n; i++) out[off + i] = src[i]
  return off + n
}

/** Encode ops into one fresh (transferable) ArrayBuffer. `cfIndex` maps a column family name to its index. */
export const encodeBatch = (ops, cfIndex) => {
  let size = 0
  for (const op of ops) {
    size += 6 + keyOf(op).length
    if (op._tag === "put") size += 4 + op.value.length
    else if (op._tag === "merge") size += 8
    else if (op._tag === "deleteRange") size += 4 + op.hi.length
  }
  const ab = new ArrayBuffer(size)
  const out = new Uint8Array(ab)
  const view = new DataView(ab)
  let off = 0
  for (const op of ops) {
    const key = keyOf(op)
    out[off] = TAGS[op._tag]
    out[off + 1] = cfIndex(op.cf)
    view.setUint32(off + 2, key.length, true)
    off = copy(out, key, off + 6)
    if (op._tag === "put") {
      view.setUint32(off, op.value.length, true)
      off = copy(out, op.value, off + 4)
    } else if (op._tag === "merge") {
      view.setBigInt64(off, BigInt.asIntN(64, op.delta), true)
      off += 8
    } else if (op._tag === "deleteRange") {
      view.setUint32(off, op.hi.length, true)
      off = copy(out, op.hi, off + 4)
    }
  }
  return ab
}

/** Call `visit(tag, cf, key, body, start)` for each op of an encoded batch; `body` is the value, delta bytes or hi. */
export const decodeBatch = (bytes, visit, end = bytes.length) => {
  let off = 0
  while (off < end) {
    const start = off
    const tag = bytes[off]
    const cf = bytes[off + 1]
    const keyLen = bytes.readUInt32LE(off + 2)
    const key = bytes.subarray(off + 6, off + 6 + keyLen)
    off += 6 + keyLen
    let body
    if (tag === PUT || tag === DELETE_RANGE) {
      const len = bytes.readUInt32LE(off)
      body = bytes.subarray(off + 4, off + 4 + len)
      off += 4 + len
    } else if (tag === MERGE) {
      body = bytes.subarray(off, off + 8)
      off += 8
    } else if (tag !== DEL) {
      throw new CommitError("BAD_BATCH", `unknown op tag ${tag} at byte ${start}`)
    }
    visit(tag, cf, key, body, start)
  }
}

const inRange = (key, lo, hi) => Buffer.compare(key, lo) >= 0 && Buffer.compare(key, hi) < 0

/**
 * Build a WriteBatch from an encoded batch and write it, synchronously.
 *
 * RocksDB's WriteBatch has no DeleteRange in this binding, so a deleteRange op
 * becomes point deletes of (1) the keys of that range present in the store now
 * and (2) the keys that earlier ops of this batch wrote into it. The scan and
 * the write run in the same synchronous call on the only thread that commits,
 * so no commit can slip in between: the expansion is exact and atomic with the
 * batch. It is bounded: more than `maxRangeDeleteKeys` deletes in one batch
 * fails the batch with RANGE_TOO_LARGE, before anything is written.
 */
export const commitEncoded = (db, columns, buffer, opts) => {
  const bytes = Buffer.isBuffer(buffer) ? buffer : Buffer.from(buffer)
  const batch = db.batch()
  let budget = opts.maxRangeDeleteKeys
  const spend = (cf) => {
    if (--budget < 0) {
      throw new CommitError(
        "RANGE_TOO_LARGE",
        `deleteRange on ${opts.names?.[cf] ?? cf} expands past maxRangeDeleteKeys (${opts.maxRangeDeleteKeys} keys per batch); split it`
      )
    }
  }
  try {
    decodeBatch(bytes, (tag, cf, key, body, start) => {
      const column = columns[cf]
      if (column === undefined) throw new CommitError("BAD_BATCH", `unknown column family index ${cf}`)
      const o = { column }
      if (tag === PUT) batch._put(key, body, o)
      else if (tag === DEL) batch._del(key, o)
      else if (tag === MERGE) batch._merge(key, body, o)
      else {
        const lo = key
        const hi = body
        if (Buffer.compare(lo, hi) >= 0) return
        decodeBatch(
          bytes,
          (t, c, k) => {
            if (c === cf && t !== DELETE_RANGE && inRange(k, lo, hi)) {
              spend(cf)
              batch._del(k, o)
            }
          },
          start
        )
        const it = db.iterator({ column, gte: lo, lt: hi, keys: true, values: false, keyEncoding: "buffer", valueEncoding: "buffer" })
        try {
          for (;;) {
            const { rows, finished } = it._nextvSync(1000)
            for (let i = 0; i < rows.length; i += 2) {
              spend(cf)
              batch._del(rows[i], o)
            }
            if (finished) break
          }
        } finally {
          it._closeSync()
          // _closeSync does not detach from abstract-level's resource set; without this every scan would leak.
          db.detachResource(it)
        }
      }
    })
    batch._writeSync({ sync: opts.sync })
  } finally {
    batch._closeSync()
    db.detachResource(batch)
  }
}
