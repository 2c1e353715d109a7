/**
 * Per-tenant scan cursors (TEN-1 §5; docs/delivery.md "Scan cursors"): where a tenant's next due
 * read starts, and when a visit last checked it against the tenant's first due row.
 *
 * A claim deletes the due rows it takes, and RocksDB keeps a tombstone for each until compaction,
 * so a read from the start of a tenant's range steps over every row claimed since: its cost grows
 * with the tenant's recent throughput. Reads start at the cursor instead, and the cursor is kept
 * (bounded) when the tenant drains, so a tenant that keeps up with its arrivals does not read from
 * the start on every visit. A row can still land below a cursor (a commit that took its `at` before
 * a claim and landed after it): the Writer's hints lower the cursor to their `at` (tick.ts), and at
 * most every CURSOR_VERIFY_MS a visit reads the tenant's first due row from the start and lowers the
 * cursor to it, so any other such row waits at most that long past its turn.
 */

/** A visit reads a tenant's first due row from the start at most this often (ms). */
export const CURSOR_VERIFY_MS = 1_000
/** Tenants whose cursors are kept; past it the map is cleared whole (cursors back to 0, which is always correct). */
export const CURSORS_MAX = 65_536

interface Cursor {
  at: number
  /** Set when the last visit ended on refused rows (sinks full): the read resumes after this row of `at`. */
  after: { readonly seq: number; readonly sink: number } | undefined
  verifiedAt: number
}

export interface Cursors {
  /** Where the tenant's next due read starts (0: its first row). */
  readonly floorOf: (ord: number) => number
  /** The row of `floorOf` after which the read resumes (rows refused for full sinks before it); undefined: from `floorOf` on. */
  readonly afterOf: (ord: number) => { readonly seq: number; readonly sink: number } | undefined
  readonly set: (ord: number, at: number, after?: { readonly seq: number; readonly sink: number }) => void
  /** Lower the tenant's cursor to `at` (a row committed there, or refused rows whose sink has room again); never raises it. */
  readonly lower: (ord: number, at: number) => void
  /** Whether this visit reads the tenant's first due row from the start; true at most once per CURSOR_VERIFY_MS. */
  readonly verify: (ord: number, now: number) => boolean
}

export const makeCursors = (max = CURSORS_MAX): Cursors => {
  const cursors = new Map<number, Cursor>()
  const entry = (ord: number): Cursor => {
    let c = cursors.get(ord)
    if (c === undefined) {
      if (cursors.size >= max) cursors.clear()
      c = { at: 0, after: undefined, verifiedAt: Number.NEGATIVE_INFINITY }
      cursors.set(ord, c)
    }
    return c
  }
  return {
    floorOf: (ord) => cursors.get(ord)?.at ?? 0,
    afterOf: (ord) => cursors.get(ord)?.after,
    set: (ord, at, after) => {
      const c = entry(ord)
      c.at = at
      c.after = after
    },
    lower: (ord, at) => {
      const c = cursors.get(ord)
      if (c === undefined || at > c.at) return
      c.at = at
      c.after = undefined
    },
    verify: (ord, now) => {
      const c = entry(ord)
      if (now - c.verifiedAt < CURSOR_VERIFY_MS) return false
      c.verifiedAt = now
      return true
    }
  }
}
