/**
 * TEN-3's claim scheduler (docs/delivery.md "Fair dispatch"): deficit round-robin over the tenants
 * with work, by weight, within each tenant's max inflight and rate. Pure state, no I/O: the tick
 * (tick.ts) asks it for a plan, claims through the Queue, and reports what each tenant got.
 *
 * - A round visits every member once. A member whose deficit is under one row is topped up by
 *   `weight × q` rows on its visit, q = max(1, budget / Σ weights), and is offered floor(deficit).
 *   So while every member is backlogged each gets its weight's share of the rows, to within a row;
 *   a lone member gets the whole budget; and a member is offered at least one row per round.
 * - A pass walks round after round until its budget is spent (work-conserving); it may end inside
 *   a round, and the next pass resumes on the member it stopped on.
 * - A member that got less than it was offered has nothing more due: it leaves the ring (its
 *   deficit with it, as DRR drops an empty queue's deficit) and comes back when the Writer hints it
 *   or the marker scan finds it. A newcomer joins at the end of the current round.
 * - Limits hold a member back without spending its deficit: `maxInflight` (rows claimed and not
 *   settled, counted here) and `ratePerSec` (a token bucket holding RATE_BURST_SECONDS of tokens).
 */

import { DEFAULT_LIMITS, type TenantLimits } from "../domain/limits.js"

export { DEFAULT_LIMITS, type TenantLimits }

/** A tenant's rate bucket holds this many seconds of tokens (at least one): a burst of one tick period. */
export const RATE_BURST_SECONDS = 0.1

const capacityOf = (rate: number): number => Math.max(1, rate * RATE_BURST_SECONDS)

interface Member {
  readonly ord: number
  deficit: number
  /** The tenant's scan floor (TEN-1 §5 cursor), 0 when none. */
  cursorAt: number
  /** Markers the discovery scan saw for it since its last visit (cleanup candidates). */
  readonly buckets: Set<number>
}

interface Bucket {
  tokens: number
  at: number
}

export interface Planned {
  readonly ord: number
  readonly floorAt: number
  readonly limit: number
  readonly bytes: number
}

export interface Got {
  readonly ord: number
  readonly rows: number
  readonly drained: boolean
}

export const makeFair = (maxMembers: number) => {
  const members = new Map<number, Member>()
  let ring: Array<number> = []
  let pos = 0
  /** Rows claimed and not settled, by tenant (members or not); entries leave at 0. */
  const inflight = new Map<number, number>()
  /** Rate buckets of limited tenants; a full bucket is the same as none, so it is dropped. */
  const buckets = new Map<number, Bucket>()
  /** Rows the limits held back, by tenant, since the last `takeThrottled`. */
  let throttled = new Map<number, number>()

  const tokensOf = (ord: number, rate: number, now: number): number => {
    const b = buckets.get(ord)
    if (b === undefined) return capacityOf(rate)
    return Math.min(capacityOf(rate), b.tokens + ((now - b.at) / 1000) * rate)
  }

  const join = (ord: number, markers: ReadonlyArray<number> = []): boolean => {
    let m = members.get(ord)
    if (m === undefined) {
      if (members.size >= maxMembers) return false
      m = { ord, deficit: 0, cursorAt: 0, buckets: new Set() }
      members.set(ord, m)
      // The end of the current round: just before the member the next visit starts on.
      ring.splice(pos, 0, ord)
      pos = ring.length === 1 ? 0 : pos + 1
    }
    for (const b of markers) m.buckets.add(b)
    return true
  }

  // The plan's bookkeeping until its `settle`: each offered member's deficit after the plan, and
  // the member the next pass starts on.
  let credits = new Map<number, number>()
  let resumeOn: number | undefined

  /**
   * The rows each member is offered this pass, one entry per member in first-visit order, within
   * `rows` and (pro rata) `bytes`. The walk goes round the ring from where the last pass stopped,
   * round after round, until the budget is spent or every member is held back by its limits.
   */
  const plan = (rows: number, bytes: number, now: number, limitsOf: (ord: number) => TenantLimits): Array<Planned> => {
    credits = new Map()
    resumeOn = undefined
    const offered = new Map<number, number>()
    if (ring.length === 0 || rows <= 0) return []
    let weights = 0
    for (const ord of ring) weights += limitsOf(ord).weight
    const q = Math.max(1, rows / weights)
    let left = rows
    let stoppedAt = pos
    for (let k = 0, idle = 0; left > 0 && idle < ring.length; k++) {
      const at = (pos + k) % ring.length
      const m = members.get(ring[at]!)!
      const l = limitsOf(m.ord)
      const given = offered.get(m.ord) ?? 0
      let room = l.maxInflight > 0 ? l.maxInflight - (inflight.get(m.ord) ?? 0) - given : left
      if (l.ratePerSec > 0) room = Math.min(room, Math.floor(tokensOf(m.ord, l.ratePerSec, now)) - given)
      if (room <= 0) {
        if (given === 0) throttled.set(m.ord, (throttled.get(m.ord) ?? 0) + 1)
        idle++
        continue
      }
      let credit = credits.get(m.ord) ?? m.deficit
      if (credit < 1) credit += l.weight * q
      const want = Math.min(Math.floor(credit), left, room)
      credits.set(m.ord, credit - want)
      offered.set(m.ord, given + want)
      left -= want
      stoppedAt = at
      idle = 0
    }
    // The budget ended on a member still owed a row: the next pass starts on it, else after it.
    const last = ring[stoppedAt]!
    resumeOn = (credits.get(last) ?? 0) >= 1 ? last : ring[(stoppedAt + 1) % ring.length]
    return [...offered].map(([ord, limit]) => ({ ord, floorAt: members.get(ord)!.cursorAt, limit, bytes: Math.max(1, Math.ceil((bytes * limit) / rows)) }))
  }

  /** What each planned member got; `now` for the rate buckets. Moves the round on. */
  const settle = (planned: ReadonlyArray<Planned>, got: ReadonlyArray<Got>, now: number, limitsOf: (ord: number) => TenantLimits): void => {
    for (let i = 0; i < planned.length; i++) {
      const p = planned[i]!
      const g = got[i]
      const m = members.get(p.ord)
      if (m === undefined) continue
      const rows = g?.rows ?? 0
      // Rows offered and not taken (the byte budget, or a claim cut short) stay owed.
      m.deficit = (credits.get(p.ord) ?? m.deficit) + (p.limit - rows)
      if (rows > 0) inflight.set(p.ord, (inflight.get(p.ord) ?? 0) + rows)
      const rate = limitsOf(p.ord).ratePerSec
      if (rate > 0 && rows > 0) buckets.set(p.ord, { tokens: tokensOf(p.ord, rate, now) - rows, at: now })
      if (g?.drained === true) members.delete(p.ord)
    }
    let at = resumeOn
    if (at !== undefined && !members.has(at)) {
      // It left the ring: the first member after it, in ring order, that stays.
      const from = ring.indexOf(at)
      at = undefined
      for (let k = 1; k < ring.length && at === undefined; k++) {
        const ord = ring[(from + k) % ring.length]!
        if (members.has(ord)) at = ord
      }
    }
    ring = ring.filter((o) => members.has(o))
    const i = at === undefined ? -1 : ring.indexOf(at)
    pos = i >= 0 ? i : 0
    credits = new Map()
    resumeOn = undefined
  }

  return {
    join,
    plan,
    settle,
    has: (ord: number) => members.has(ord),
    size: () => members.size,
    members: (): ReadonlyArray<number> => ring,
    cursorOf: (ord: number) => members.get(ord)?.cursorAt ?? 0,
    setCursor: (ord: number, at: number) => {
      const m = members.get(ord)
      if (m !== undefined) m.cursorAt = at
    },
    /** Cleanup candidates seen by the discovery scan since the last visit; cleared by the call. */
    takeMarkers: (ord: number): Array<number> => {
      const m = members.get(ord)
      if (m === undefined || m.buckets.size === 0) return []
      const out = [...m.buckets]
      m.buckets.clear()
      return out
    },
    /** Claimed rows of `ord` settled (or given up on). */
    released: (ord: number, n: number) => {
      const v = (inflight.get(ord) ?? 0) - n
      if (v > 0) inflight.set(ord, v)
      else inflight.delete(ord)
    },
    inflightOf: (ord: number) => inflight.get(ord) ?? 0,
    inflight: (): ReadonlyMap<number, number> => inflight,
    takeThrottled: (): ReadonlyMap<number, number> => {
      const t = throttled
      throttled = new Map()
      return t
    },
    /** Drop the rate buckets that have refilled (they equal a fresh one). */
    sweepBuckets: (now: number, limitsOf: (ord: number) => TenantLimits | undefined) => {
      for (const [ord] of buckets) {
        // Not a member (nothing due): its next claim starts from a full bucket anyway after a second.
        const rate = limitsOf(ord)?.ratePerSec ?? 0
        if (rate <= 0 || tokensOf(ord, rate, now) >= capacityOf(rate)) buckets.delete(ord)
      }
    }
  }
}

export type Fair = ReturnType<typeof makeFair>
