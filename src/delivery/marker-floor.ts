/**
 * Where the tick's discovery scan of the active index starts (docs/delivery.md "The discovery floor").
 *
 * The cleanup deletes markers, and RocksDB keeps a tombstone for each until compaction, so a scan
 * from the start of `?A` steps over every marker deleted since: after a drain of many tenants an
 * idle tick's scan cost tens of milliseconds. The floor is the lowest second that may hold a marker:
 * a pass from it sees the same markers as one from the start. A pass that starts at the floor raises
 * it to its first marker's second, but never past FLOOR_SLACK_MS before now (a commit that took its
 * `at` a moment before the scan lands above it). Rows that land lower lower it (`lower`: the
 * Writer's hints, rows given back); and at most every FLOOR_VERIFY_MS a pass starts at the index's
 * start, so a marker put below the floor by anything else waits at most that long.
 */
import { bucketOf } from "../domain/keys.js"

/** A pass raises the floor to at most this long before now (ms). */
export const FLOOR_SLACK_MS = 2_000
/** A pass starts at the index's start at most this often (ms). */
export const FLOOR_VERIFY_MS = 5_000

export interface MarkerFloor {
  /** The second a pass starting now reads from (0: the index's start, at most every FLOOR_VERIFY_MS). */
  readonly from: (now: number) => number
  /** That pass saw its first marker in second `first` (undefined: none at or before now). */
  readonly passed: (first: number | undefined, now: number) => void
  /** A row due at `at` was written: its marker may be below the floor. */
  readonly lower: (at: number) => void
}

export const makeMarkerFloor = (): MarkerFloor => {
  let floor = 0
  let verifiedAt = Number.NEGATIVE_INFINITY
  return {
    from: (now) => {
      if (now - verifiedAt < FLOOR_VERIFY_MS) return floor
      verifiedAt = now
      return 0
    },
    passed: (first, now) => {
      floor = Math.max(0, Math.min(first ?? Number.POSITIVE_INFINITY, bucketOf(now - FLOOR_SLACK_MS)))
    },
    lower: (at) => {
      floor = Math.max(0, Math.min(floor, bucketOf(at)))
    }
  }
}
