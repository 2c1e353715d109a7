/**
 * TEN-3's claim scheduler (docs/delivery.md "Fair dispatch"): deficit round-robin over the tenants
 * with work, by weight, within each tenant's max inflight and rate. Pure state, no I/O: the tick
 * (tick.ts) asks it for a plan, claims through the Queue, and reports what each tenant got.
 *
 * - A round visits every member once. A member whose deficit is under one row is topped up by
 *   `weight × q` rows on its visit, q = max(quantumRows, budget / Σ weights), and is offered
 *   floor(deficit). The quantum keeps a tick's visits (each a locked range read and a marker
 *   cleanup) to about budget / quantum tenants, whatever the number of tenants with work.
 *   So while every member is backlogged each gets its weight's share of the rows, to within a row;
 *   a lone member gets the whole budget; and a member is offered at least one row per round.
 * - A pass walks round after round until its budget is spent (work-conserving); it may end inside
 *   a round, and the next pass resumes on the member it stopped on.
 * - A member that got less than it was offered has nothing more due: it leaves the ring (its
 *   deficit with it, as DRR drops an empty queue's deficit) and comes back when the Writer hints it
 *   or the marker scan finds it. A newcomer is next in turn (sparse tenants first, as fq_codel
 *   serves new flows): it gets one quantum at once, then goes round with the rest.
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

/** `floorOf`: where each tenant's due read starts (its scan cursor, cursors.ts). */
export const makeFair = (maxMembers: number, quantumRows = 1, floorOf: (ord: number) => number = () => 0) => {
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
      m = { ord, deficit: 0, buckets: new Set() }
      members.set(ord, m)
      // Next in turn: a tenant that just got work (often a row or two) is served by the next pass,
      // whatever the others hold; a backlogged one then goes round with the rest.
      ring.splice(pos, 0, ord)
      // A newcomer's markers are its cleanup candidates; a member's later ones are of seconds that
      // still hold rows (the claims' emptied seconds are candidates of their own, tick.ts).
      for (const b of markers) m.buckets.add(b)
    }
    return true
  }

  // The plan's bookkeeping until its `settle`: each offered member's deficit after the plan.
  let credits = new Map<number, number>()

  /**
   * One round's offers, one entry per member in visit order from where the last pass stopped: each
   * member's whole rows of deficit (topped up when under one), within its limits and `rows`. The
   * offers may add up to more than `rows`: the claim takes them in order until the budget is spent
   * (so a member with fewer rows than offered leaves its share to the next ones), and `settle`
   * gives back what a member was offered and did not get.
   */
  const plan = (rows: number, bytes: number, now: number, limitsOf: (ord: number) => TenantLimits): Array<Planned> => {
    credits = new Map()
    const out: Array<Planned> = []
    if (ring.length === 0 || rows <= 0) return out
    let weights = 0
    for (const ord of ring) weights += limitsOf(ord).weight
    const q = Math.max(quantumRows, rows / weights)
    for (let k = 0; k < ring.length; k++) {
      const m = members.get(ring[(pos + k) % ring.length]!)!
      const l = limitsOf(m.ord)
      let room = l.maxInflight > 0 ? l.maxInflight - (inflight.get(m.ord) ?? 0) : rows
      if (l.ratePerSec > 0) room = Math.min(room, Math.floor(tokensOf(m.ord, l.ratePerSec, now)))
      if (room <= 0) {
        throttled.set(m.ord, (throttled.get(m.ord) ?? 0) + 1)
        continue
      }
      const credit = m.deficit < 1 ? m.deficit + l.weight * q : m.deficit
      const want = Math.min(Math.floor(credit), rows, room)
      if (want <= 0) continue
      credits.set(m.ord, credit - want)
      out.push({ ord: m.ord, floorAt: floorOf(m.ord), limit: want, bytes: Math.min(bytes, Math.max(1, Math.ceil((bytes * want) / rows))) })
    }
    return out
  }

  /**
   * What each planned member got (`got` is in plan order and may be shorter: the members the budget
   * did not reach got nothing); `now` for the rate buckets. Moves the round on: the next pass
   * starts on the first member the budget cut short, else after the last one planned.
   */
  const settle = (planned: ReadonlyArray<Planned>, got: ReadonlyArray<Got>, now: number, limitsOf: (ord: number) => TenantLimits): void => {
    let at: number | undefined
    for (let i = 0; i < planned.length; i++) {
      const p = planned[i]!
      const g = got[i]
      const m = members.get(p.ord)
      if (m === undefined) continue
      const rows = g?.rows ?? 0
      // Rows offered and not taken (the budget ran out, or the bytes) stay owed.
      m.deficit = (credits.get(p.ord) ?? m.deficit) + (p.limit - rows)
      if (rows > 0) inflight.set(p.ord, (inflight.get(p.ord) ?? 0) + rows)
      const rate = limitsOf(p.ord).ratePerSec
      if (rate > 0 && rows > 0) buckets.set(p.ord, { tokens: tokensOf(p.ord, rate, now) - rows, at: now })
      if (g?.drained === true) members.delete(p.ord)
      else if (at === undefined && rows < p.limit) at = p.ord
      // The last member reached, still owed a row: the budget ended on it (its offer was cut to it).
      else if (at === undefined && i === got.length - 1 && m.deficit >= 1) at = p.ord
    }
    if (at === undefined && planned.length > 0) {
      // Everyone planned was served: after the last of them, skipping those that left.
      const from = ring.indexOf(planned[planned.length - 1]!.ord)
      for (let k = 1; k <= ring.length && at === undefined; k++) {
        const ord = ring[(from + k) % ring.length]!
        if (members.has(ord)) at = ord
      }
    }
    if (at === undefined) at = ring[pos]
    ring = ring.filter((o) => members.has(o))
    const i = at === undefined ? -1 : ring.indexOf(at)
    pos = i >= 0 ? i : 0
    credits = new Map()
  }

  return {
    join,
    plan,
    settle,
    members: (): ReadonlyArray<number> => ring,
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
