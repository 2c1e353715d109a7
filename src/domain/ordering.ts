/**
 * Ordered delivery by key (docs/delivery.md "Ordered delivery"): the lane of a row, and the op
 * builders of the two ordering families. A lane is (tenant, destination, ordering key); its `?H`
 * row names its head, the one row of the lane that is due, inflight or (onDead hold) held dead;
 * every other row of the lane waits in `?W` in accepted order (seq). The only module that builds
 * `?W` and `?H` keys; the transitions that move rows between them and the due index are in
 * deliveries.ts, which owns the due keys. Pure.
 */
import { createHash } from "node:crypto"
import * as K from "./keys.js"
import { del, type Op, put } from "./ops.js"

/** Bytes of an ordering key at most (UTF-8); longer is 400 `invalid_ordering_key` at the edge. */
export const MAX_KEY_BYTES = 256

/** What an ordered destination does when its head is dead-lettered. */
export type OnDead = "skip" | "hold"
export const DEFAULT_ON_DEAD: OnDead = "skip"

/** Whether `key` can be an ordering key: 1 to MAX_KEY_BYTES UTF-8 bytes. */
export const validKey = (key: string): boolean => key.length > 0 && Buffer.byteLength(key, "utf8") <= MAX_KEY_BYTES

/**
 * The lane of (destination, key) within a tenant: 53 bits of SHA-256 (a JS-safe integer). Two
 * keys that collide share one lane: their hooks are ordered together, which delays, never reorders.
 */
export const laneOf = (destination: string, key: string): number => {
  const h = createHash("sha256").update(destination).update("\u0000").update(key).digest()
  return h.readUIntBE(0, 6) * 32 + (h[6]! >>> 3)
}

/** A lane's row as the Queue sees it: where it is and how big. */
export interface LaneRow {
  readonly ord: number
  readonly lane: number
  readonly seq: number
  readonly sink: number
}

export const waitPut = (r: LaneRow, size: number): Op => put("index", K.waitingKey(r.ord, r.lane, r.seq, r.sink), K.sizeValue(size))
export const waitDel = (r: LaneRow): Op => del("index", K.waitingKey(r.ord, r.lane, r.seq, r.sink))
/** `below`: a `?W` row of the lane sorts before the head's (seq, sink) (a replay put it there). */
export const headPut = (r: LaneRow, held: boolean, below = false): Op =>
  put("index", K.headKey(r.ord, r.lane), K.headValue({ seq: r.seq, sink: r.sink, held, below }))
export const headDel = (ref: K.LaneRef): Op => del("index", K.headKey(ref.ord, ref.lane))

/** The `?H` key of a lane (the Queue reads heads by it). */
export const headKey = (ref: K.LaneRef): Uint8Array => K.headKey(ref.ord, ref.lane)

export interface KeyRange {
  readonly lo: Uint8Array
  readonly hi: Uint8Array
}

/**
 * A lane's waiting rows, in accepted order: the first is its next head. With `from` (a settled
 * head's place, when no `?W` row sorts below it), those after it: the read starts past the
 * tombstones of the rows the lane already promoted, not at the lane's first key.
 */
export const laneWaitingRange = (ref: K.LaneRef, from?: { readonly seq: number; readonly sink: number }): KeyRange => {
  const r = K.range(K.waitingLanePrefix(ref.ord, ref.lane))
  return from === undefined ? r : { lo: K.waitingKey(ref.ord, ref.lane, from.seq, from.sink), hi: r.hi }
}
export const tenantWaitingRange = (ord: number): KeyRange => K.range(K.waitingPrefix(ord))
export const tenantHeadRange = (ord: number): KeyRange => K.range(K.headPrefix(ord))

/** Whether the waiting row (seq, sink) sorts before the head's place in its lane's `?W` keys. */
export const sortsBefore = (a: { readonly seq: number; readonly sink: number }, b: { readonly seq: number; readonly sink: number }): boolean =>
  a.seq < b.seq || (a.seq === b.seq && a.sink < b.sink)

/** Whether a head value names the row (seq, sink). */
export const isHead = (h: K.HeadValue | undefined, seq: number, sink: number): h is K.HeadValue =>
  h !== undefined && h.seq === seq && h.sink === sink
