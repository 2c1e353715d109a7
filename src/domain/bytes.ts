/**
 * Fixed-width big-endian integers, small values and key ranges (TEN-1 §1).
 *
 * Big-endian so that byte order equals numeric order; every key codec is built on these.
 */

const TWO32 = 0x1_0000_0000

export const asBuffer = (b: Uint8Array): Buffer =>
  Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)

export const writeU64 = (b: Buffer, n: number, off: number): void => {
  b.writeUInt32BE(Math.floor(n / TWO32), off)
  b.writeUInt32BE(n >>> 0, off + 4)
}

export const readU64 = (b: Uint8Array, off: number): number => {
  const buf = asBuffer(b)
  return buf.readUInt32BE(off) * TWO32 + buf.readUInt32BE(off + 4)
}

export const readU32 = (b: Uint8Array, off: number): number => asBuffer(b).readUInt32BE(off)
export const readU16 = (b: Uint8Array, off: number): number => asBuffer(b).readUInt16BE(off)

/**
 * A zero-filled buffer for a key or a small value, cut from Node's shared 8 KiB pool
 * (`allocUnsafe`) rather than one ArrayBuffer each (`alloc`): a batch holds about 16 of them a
 * hook, and fewer ArrayBuffers make the young-generation GC cheaper. Every reader honours
 * `byteOffset`; nothing here transfers `.buffer`.
 */
export const zeroed = (n: number): Buffer => Buffer.allocUnsafe(n).fill(0)

/** A defect: a key or value that no codec wrote. */
export const corrupt = (what: string, bytes: Uint8Array): never => {
  throw new Error(`corrupt ${what}: ${asBuffer(bytes).toString("hex")}`)
}

export const encodeU32 = (n: number): Uint8Array => {
  const b = Buffer.allocUnsafe(4) // every byte written
  b.writeUInt32BE(n, 0)
  return b
}
export const decodeU32 = (b: Uint8Array): number => (b.length === 4 ? readU32(b, 0) : corrupt("u32 value", b))

export const encodeU64 = (n: number): Uint8Array => {
  const b = Buffer.allocUnsafe(8) // every byte written
  writeU64(b, n, 0)
  return b
}
export const decodeU64 = (b: Uint8Array): number => (b.length === 8 ? readU64(b, 0) : corrupt("u64 value", b))

// ---------------------------------------------------------------------------
// Ranges

export const compare = (a: Uint8Array, b: Uint8Array): number => Buffer.compare(a, b)

/** The smallest key greater than every key that starts with `prefix`, or undefined (all 0xFF). */
export const successor = (prefix: Uint8Array): Uint8Array | undefined => {
  for (let i = prefix.length - 1; i >= 0; i--) {
    if (prefix[i]! !== 0xff) {
      const out = Buffer.from(prefix.subarray(0, i + 1))
      out[i] = prefix[i]! + 1
      return out
    }
  }
  return undefined
}

const ZERO = Buffer.from([0])

/** The smallest key greater than `key`: where a paged scan resumes after its last key. */
export const keyAfter = (key: Uint8Array): Uint8Array => Buffer.concat([key, ZERO])

/** A key above every key of a column family (used when a prefix has no successor). */
export const CF_END: Uint8Array = Buffer.alloc(64, 0xff)

/** [lo, hi) bounds of every key starting with `prefix`. */
export const range = (prefix: Uint8Array): { readonly lo: Uint8Array; readonly hi: Uint8Array } => ({
  lo: prefix,
  hi: successor(prefix) ?? CF_END
})
