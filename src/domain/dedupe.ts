/**
 * Idempotency keys (product.md, ingest): deduplicated per tenant for a window.
 *
 * `?u <<tenant, 0, key>>` holds the first hook's answer and its expiry,
 * `<<1::8, seq::64, expiresAt::64, id (utf8)>>`; `?e <<expiresAt::64, tenant, 0, key>>`
 * (empty value) orders the keys by expiry for the sweep. A `?u` row past its
 * expiry counts as absent even before the sweep removes it, and a key reused
 * after expiry gets a new `?e`: so the sweep deletes a `?u` only when its
 * stored expiry is the one of the `?e` it visits.
 */
import { asBuffer, dedupeKey, expiryKey, readU64, writeU64, zeroed } from "./keys.js"
import { type Op, put } from "./ops.js"

export const DEFAULT_WINDOW_MS = 24 * 60 * 60 * 1000
/** Longest idempotency key accepted, in UTF-8 bytes. */
export const MAX_KEY_BYTES = 256

export interface First {
  readonly seq: number
  readonly id: string
  readonly expiresAt: number
}

export const encodeValue = (v: First): Uint8Array => {
  const id = Buffer.from(v.id, "utf8")
  const b = zeroed(17 + id.length)
  b[0] = 1
  writeU64(b, v.seq, 1)
  writeU64(b, v.expiresAt, 9)
  id.copy(b, 17)
  return b
}

/** undefined for a value this build does not understand (treated as absent). */
export const decodeValue = (v: Uint8Array): First | undefined =>
  v.length >= 17 && v[0] === 1 ? { seq: readU64(v, 1), expiresAt: readU64(v, 9), id: asBuffer(v).toString("utf8", 17) } : undefined

/** Whether a stored `?u` value still answers for its key at `now`. */
export const live = (v: Uint8Array | undefined, now: number): First | undefined => {
  const first = v === undefined ? undefined : decodeValue(v)
  return first !== undefined && first.expiresAt > now ? first : undefined
}

/** The `?u` and `?e` puts recording `first` as the answer for (tenant, key). */
export const record = (tenant: string, key: string, first: First): ReadonlyArray<Op> => [
  put("index", dedupeKey(tenant, key), encodeValue(first)),
  put("index", expiryKey(first.expiresAt, tenant, key))
]

export const validKey = (key: string): boolean => key.length > 0 && Buffer.byteLength(key, "utf8") <= MAX_KEY_BYTES
