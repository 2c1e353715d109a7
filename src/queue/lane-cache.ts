/**
 * The successors' cache of the ordered lanes (docs/delivery.md "Finding the successor"): per lane,
 * the `?W` rows its last read found after the row it promoted, in order (a prefix of the lane's
 * waiting rows then), and `end` when that read reached the lane's last row.
 *
 * Why it holds: the Writer only appends later rows to a lane, and asks for their lanes' promotion
 * after each commit (lanes.ts `promote`, which calls `grew` first), so the first row left is the
 * lane's next, and with none left and `end` the lane is free. Every other change of a lane's
 * waiting rows goes through lanes.ts, which forgets: a replay its lanes, a purge or an erase of
 * waiting rows every lane, a failed transition every lane; a head marked `below` forgets its lane.
 *
 * Bounded: at most `lanes` lanes (the oldest read forgotten first), each at most `ahead` rows, kept
 * as two numbers a row (16 bytes): its seq, and its sink index and size packed.
 */
import type * as K from "../domain/keys.js"
import { decodeSizeValue, decodeWaitingKey } from "../domain/keys.js"

/** Lanes whose next waiting rows are remembered, at most; past it the oldest is forgotten. */
export const LANE_CACHE_LANES = 16_384
/** Waiting rows a lane's read takes beyond the one it promotes, remembered for the lane's next settles. */
export const LANE_CACHE_AHEAD = 32

/** A lane's next head: its waiting row and size. */
export interface Next {
  readonly row: K.WaitingRef
  readonly size: number
}

interface Entry {
  readonly ord: number
  readonly lane: number
  /** seq, then sink × 2³² + size, per row. */
  readonly rows: Float64Array
  at: number
  readonly count: number
  end: boolean
}

const SINK_SHIFT = 2 ** 32

export const laneId = (r: K.LaneRef) => `${r.ord}:${r.lane}`

export const makeLaneCache = (lanes = LANE_CACHE_LANES, ahead = LANE_CACHE_AHEAD) => {
  const cache = new Map<string, Entry>()
  const rowOf = (e: Entry, i: number): Next => {
    const packed = e.rows[2 * i + 1]!
    const sink = Math.floor(packed / SINK_SHIFT)
    return { row: { ord: e.ord, lane: e.lane, seq: e.rows[2 * i]!, sink }, size: packed - sink * SINK_SHIFT }
  }
  return {
    /** Rows a lane's read asks for: the next head and those remembered after it. */
    limit: 1 + ahead,
    forget: (): void => cache.clear(),
    drop: (ref: K.LaneRef): void => void cache.delete(laneId(ref)),
    /** A read of the lane's waiting rows (at most `limit`, in order): its first row, the next head, and the rest remembered. */
    read: (ref: K.LaneRef, page: ReadonlyArray<{ readonly key: Uint8Array; readonly value: Uint8Array }>): Next | undefined => {
      const id = laneId(ref)
      cache.delete(id)
      const first = page[0]
      if (first === undefined) return undefined
      const end = page.length < 1 + ahead
      if (page.length > 1 || end) {
        if (cache.size >= lanes) cache.delete(cache.keys().next().value!)
        const rows = new Float64Array(2 * (page.length - 1))
        for (let i = 1; i < page.length; i++) {
          const w = decodeWaitingKey(page[i]!.key)
          rows[2 * (i - 1)] = w.seq
          rows[2 * (i - 1) + 1] = w.sink * SINK_SHIFT + decodeSizeValue(page[i]!.value)
        }
        cache.set(id, { ord: ref.ord, lane: ref.lane, rows, at: 0, count: page.length - 1, end })
      }
      return { row: decodeWaitingKey(first.key), size: decodeSizeValue(first.value) }
    },
    /** What is known of a settled head's lane: its next row (taken), "free" (nothing waits), or undefined (read it). */
    next: (ref: K.LaneRef, below: boolean): Next | "free" | undefined => {
      const id = laneId(ref)
      const e = cache.get(id)
      if (e === undefined) return undefined
      if (below) return void cache.delete(id)
      if (e.at < e.count) {
        const n = rowOf(e, e.at++)
        if (e.at === e.count && !e.end) cache.delete(id)
        return n
      }
      cache.delete(id)
      return e.end ? "free" : undefined
    },
    /** Lanes the Writer added rows to: their `end` no longer holds. */
    grew: (ids: Iterable<string>): void => {
      for (const id of ids) {
        const e = cache.get(id)
        if (e === undefined) continue
        if (e.at === e.count) cache.delete(id)
        else e.end = false
      }
    }
  }
}
