/**
 * Idempotency keys (product.md, ingest): deduplicated per tenant for a window.
 *
 * `?u <<tenant, 0, key>>` holds the first hook's answer and its expiry,
 * `<<1::8, seq::64, expiresAt::64, id (utf8)>>`; `?e <<expiresAt::64, tenant, 0, key>>`
 * (empty value) orders the keys by expiry for the sweep. A `?u` row past its
 * expiry counts as absent even before the sweep removes it, and a key reused
 * after expiry gets a new `?e`: so the sweep deletes a `?u` only when its
 * stored expiry is the one of the `?e` it visits.
 *
 * A `?u` row may instead hold a request's answer (the Svix-compatible routes' `Idempotency-Key`,
 * src/http/svix/once.ts): `<<2::8, status::16, expiresAt::64, body>>`, under a key no hook's
 * idempotency key can take. The Writer reads only version 1 (`live`); the sweep and TEN-5 erase
 * read either version's expiry (`expiryOf`).
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

/** A request's first 2xx answer, kept under its `Idempotency-Key` (version 2 of the `?u` value). */
export interface Answer {
  readonly status: number
  readonly expiresAt: number
  readonly body: Uint8Array
}

/** Largest answer body kept; a larger answer is not kept, and a repeat runs again. */
export const ANSWER_MAX_BYTES = 16 * 1024

export const encodeAnswer = (a: Answer): Uint8Array => {
  const b = zeroed(11 + a.body.length)
  b[0] = 2
  b.writeUInt16BE(a.status, 1)
  writeU64(b, a.expiresAt, 3)
  b.set(a.body, 11)
  return b
}

export const decodeAnswer = (v: Uint8Array): Answer | undefined =>
  v.length >= 11 && v[0] === 2
    ? { status: asBuffer(v).readUInt16BE(1), expiresAt: readU64(v, 3), body: asBuffer(v).subarray(11) }
    : undefined

/** A stored answer still in force at `now`. */
export const liveAnswer = (v: Uint8Array | undefined, now: number): Answer | undefined => {
  const a = v === undefined ? undefined : decodeAnswer(v)
  return a !== undefined && a.expiresAt > now ? a : undefined
}

/** The expiry of either version of a `?u` value; undefined for one this build does not understand. */
export const expiryOf = (v: Uint8Array): number | undefined => decodeValue(v)?.expiresAt ?? decodeAnswer(v)?.expiresAt

/** The `?u` and `?e` puts keeping `answer` for (tenant, key). */
export const recordAnswer = (tenant: string, key: string, answer: Answer): ReadonlyArray<Op> => [
  put("index", dedupeKey(tenant, key), encodeAnswer(answer)),
  put("index", expiryKey(answer.expiresAt, tenant, key))
]
