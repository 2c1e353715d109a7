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
 * - A member that drains keeps its place, at the back of the round, with its deficit dropped (as
 *   DRR drops an empty queue's); it leaves only when a visit finds it empty (fq_codel's old-flows
 *   rule, RFC 8290 §4.2), so a tenant that drains every round cannot come back ahead of the rest.
 *   A newcomer is next in turn (sparse tenants first, as fq_codel serves new flows): it gets one
 *   quantum at once, then goes round with the rest.
 * - At most `maxMembers` members: a tenant found while the round is full waits in a FIFO, and while
 *   any waits each member served in full, or held back by its limits, gives its place to the first
 *   of them (and waits behind the rest if it still has work). So with N tenants with work, a known
 *   one is served within N visits (its limits permitting).
 * - A member whose sinks refused rows (no free place, calls.ts) ends its turn with its deficit
 *   dropped: rows it could not take are not owed.
 * - Limits hold a member back without spending its deficit: `maxInflight` (rows claimed and not
 *   settled, counted here) and `ratePerSec` (a token bucket holding RATE_BURST_SECONDS of tokens,
 *   kept until it has refilled, whether its tenant is a member or not).
 * - And the pipeline's: a member holds at most its share of `pipeline.maxInflight` (`shareOf`), so
 *   one tenant's slow or many destinations cannot take the slots another tenant's rows need.
 */

import { DEFAULT_LIMITS, type TenantLimits } from "../domain/limits.js"

export { DEFAULT_LIMITS, type TenantLimits }

/** A tenant's rate bucket holds this many seconds of tokens (at least one): a burst of one tick period. */
export const RATE_BURST_SECONDS = 0.1
/** Tenants waiting for a place in a full round at most; past it a found tenant is found again by a later slice. */
export const WAITING_MAX = 100_000

const capacityOf = (rate: number): number => Math.max(1, rate * RATE_BURST_SECONDS)

interface Member {
  readonly ord: number
  deficit: number
  /** Drained on its last visit: it keeps its place but is not offered rows until it has work again. */
  idle: boolean
  /** Markers the discovery scan saw for it since its last visit (cleanup candidates). */
  readonly buckets: Set<number>
}

interface Bucket {
  tokens: number
  at: number
  /** The rate it fills at, for the sweep of tenants that are not members. */
  rate: number
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
  /** Rows its sinks had no place for (calls.ts): it could take no more now. */
  readonly refused?: number
}

/**
 * The pipeline's inflight slots a tenant's share is taken of (`pipeline.maxInflight`), and the most
 * of them one tenant holds even alone, in percent (`pipeline.tenantSharePercent`).
 */
export interface SharedPool {
  readonly slots: number
  readonly maxPercent: number
}
const UNSHARED: SharedPool = { slots: Number.POSITIVE_INFINITY, maxPercent: 100 }

/**
 * A tenant's share of the pool (docs/delivery.md "A tenant's share"): its weight's part of the
 * slots over the tenants that want rows (`weights`), but never less than its claim quantum
 * (`quantum`, rows per unit of weight), and never more than `maxPercent` of the slots; at least one.
 * The quantum is the floor because a claim costs a visit of the tenant (its lock, a due read, its
 * markers) whatever it takes: a share of a few rows would make every claim a few rows.
 */
export const shareOf = (pool: SharedPool, weight: number, weights: number, quantum = 1): number => {
  const part = pool.slots * (weights > 0 ? weight / weights : 1)
  return Math.max(1, Math.floor(Math.min((pool.slots * pool.maxPercent) / 100, Math.max(part, quantum * weight))))
}

/**
 * `floorOf`: where each tenant's due read starts (its scan cursor, cursors.ts). Over 80 lines
 * because every part (join, plan, settle, the waiting line, the rate buckets) shares the round's
 * state; each is a named function here.
 */
export const makeFair = (maxMembers: number, quantumRows = 1, floorOf: (ord: number) => number = () => 0, pool: SharedPool = UNSHARED) => {
  const members = new Map<number, Member>()
  let ring: Array<number> = []
  let pos = 0
  /** Rows claimed and not settled, by tenant (members or not); entries leave at 0. */
  const inflight = new Map<number, number>()
  /** Tenants found while the round was full, first found first; `waitingSet` dedupes. */
  let waiting: Array<number> = []
  const waitingSet = new Set<number>()
  /** Rate buckets of limited tenants; a full bucket is the same as none, so it is dropped. */
  const buckets = new Map<number, Bucket>()
  /** Rows the limits held back, by tenant, since the last `takeThrottled`. */
  let throttled = new Map<number, number>()

  const tokensOf = (ord: number, rate: number, now: number): number => {
    const b = buckets.get(ord)
    if (b === undefined) return capacityOf(rate)
    return Math.min(capacityOf(rate), b.tokens + ((now - b.at) / 1000) * rate)
  }

  const wait = (ord: number): void => {
    if (waitingSet.has(ord) || waitingSet.size >= WAITING_MAX) return
    waitingSet.add(ord)
    waiting.push(ord)
  }

  const add = (ord: number, markers: ReadonlyArray<number>): Member => {
    const m: Member = { ord, deficit: 0, idle: false, buckets: new Set() }
    members.set(ord, m)
    // A newcomer's markers are its cleanup candidates; a member's later ones are of seconds that
    // still hold rows (the claims' emptied seconds are candidates of their own, tick.ts).
    for (const b of markers) m.buckets.add(b)
    return m
  }

  /** A tenant with work: false when it waits for a place in the round. */
  const join = (ord: number, markers: ReadonlyArray<number> = []): boolean => {
    const known = members.get(ord)
    if (known !== undefined) {
      known.idle = false
      return true
    }
    // Nobody passes the tenants already waiting for a place.
    if (members.size >= maxMembers || waiting.length > 0) {
      wait(ord)
      return false
    }
    add(ord, markers)
    // Next in turn: a tenant that just got work (often a row or two) is served by the next pass,
    // whatever the others hold; a backlogged one then goes round with the rest.
    ring.splice(pos, 0, ord)
    return true
  }

  // The plan's bookkeeping until its `settle`: each offered member's deficit after the plan.
  let credits = new Map<number, number>()
  // The plan's members its limits held back: while tenants wait for a place they give theirs up too.
  let held: Array<number> = []

  /**
   * One round's offers, one entry per member in visit order from where the last pass stopped: each
   * member's whole rows of deficit (topped up when under one), within its limits and `rows`. The
   * offers may add up to more than `rows`: the claim takes them in order until the budget is spent
   * (so a member with fewer rows than offered leaves its share to the next ones), and `settle`
   * gives back what a member was offered and did not get.
   */
  const plan = (rows: number, bytes: number, now: number, limitsOf: (ord: number) => TenantLimits): Array<Planned> => {
    credits = new Map()
    held = []
    const out: Array<Planned> = []
    if (ring.length === 0 || rows <= 0) return out
    let weights = 0
    for (const ord of ring) if (!members.get(ord)!.idle) weights += limitsOf(ord).weight
    if (weights === 0) return out
    const q = Math.max(quantumRows, rows / weights)
    // Tenants waiting for a place in the round want rows too: each at the default weight.
    const wanting = weights + waiting.length * DEFAULT_LIMITS.weight
    for (let k = 0; k < ring.length; k++) {
      const m = members.get(ring[(pos + k) % ring.length]!)!
      if (m.idle) continue
      const l = limitsOf(m.ord)
      const holds = inflight.get(m.ord) ?? 0
      // Over its share of the pipeline's slots, whatever its destinations would take: held back, not throttled.
      let own = l.maxInflight > 0 ? l.maxInflight - holds : rows
      if (l.ratePerSec > 0) own = Math.min(own, Math.floor(tokensOf(m.ord, l.ratePerSec, now)))
      const room = Math.min(own, shareOf(pool, l.weight, wanting, quantumRows) - holds)
      if (room <= 0) {
        if (own <= 0) throttled.set(m.ord, (throttled.get(m.ord) ?? 0) + 1)
        held.push(m.ord)
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
    /** Members that got their whole offer: each gives its place to a waiting tenant, if any. */
    const served: Array<number> = []
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
      if (rate > 0 && rows > 0) buckets.set(p.ord, { tokens: tokensOf(p.ord, rate, now) - rows, at: now, rate })
      if (g?.drained === true) {
        // Found empty on its turn: it leaves. Drained with rows: it keeps its place, owed nothing.
        if (rows === 0) members.delete(p.ord)
        else {
          m.deficit = 0
          m.idle = true
          served.push(p.ord)
        }
      } else if ((g?.refused ?? 0) > 0) {
        // What its sinks could not take is not owed: credit banked while a sink is full would let
        // it crowd the others out once the sink has room. Its turn is over, as a drained one's.
        m.deficit = 0
        served.push(p.ord)
      } else {
        if (at === undefined && rows < p.limit) at = p.ord
        // The last member reached, still owed a row: the budget ended on it (its offer was cut to it).
        else if (at === undefined && i === got.length - 1 && m.deficit >= 1) at = p.ord
        if (g !== undefined && rows === p.limit && at !== p.ord) served.push(p.ord)
      }
    }
    // Tenants wait for a place: the members served in full, or held back by their limits, give
    // theirs up, and wait again behind the others if they still have work (a drained one joins
    // again when it gets some).
    for (const ord of [...served, ...held]) {
      if (waiting.length === 0) break
      const drained = got.find((g) => g.ord === ord)?.drained === true
      members.delete(ord)
      if (!drained) wait(ord)
    }
    // Idle members the round passed over had their turn with nothing due: they leave (RFC 8290 §4.2).
    if (got.length > 0) {
      const last = ring.indexOf(got[got.length - 1]!.ord)
      for (let k = 0; k < ring.length; k++) {
        const idx = (pos + k) % ring.length
        const m = members.get(ring[idx]!)
        if (m?.idle === true && !got.some((g) => g.ord === m.ord)) members.delete(m.ord)
        if (idx === last) break
      }
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
    admitWaiting()
    credits = new Map()
  }

  /** Waiting tenants take the free places, at the back of the round (just before `pos`). */
  const admitWaiting = (): void => {
    let n = 0
    while (members.size < maxMembers && n < waiting.length) {
      const ord = waiting[n++]!
      waitingSet.delete(ord)
      if (members.has(ord)) continue
      add(ord, [])
      ring.splice(pos, 0, ord)
      pos = (pos + 1) % ring.length
    }
    if (n > 0) waiting = waiting.slice(n)
  }

  return {
    join,
    /**
     * A marker of a second now past that a visit in that second left (TEN-1 §5 never deletes the
     * current second's): a cleanup candidate of the tenant's next visit, which it is given now.
     */
    lingering: (ord: number, bucket: number): void => {
      const m = members.get(ord)
      if (m === undefined) {
        join(ord, [bucket])
        return
      }
      m.buckets.add(bucket)
      m.idle = false
    },
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
    /**
     * The hand-off (docs/delivery.md "The hand-off"): one row of `ord` taken outside the round, in place
     * of one of its `freed` rows settling now, when no tenant waits for a place in the round and its
     * limits allow one more (its `maxInflight` once those rows are gone, a token of its rate); counted when so.
     */
    handOff: (ord: number, freed: number, now: number, l: TenantLimits): boolean => {
      if (waiting.length > 0 || freed <= 0) return false
      const holds = inflight.get(ord) ?? 0
      if (l.maxInflight > 0 && holds - freed >= l.maxInflight) return false
      if (l.ratePerSec > 0) {
        const tokens = tokensOf(ord, l.ratePerSec, now)
        // Not counted as throttled: the row goes due, where the round's plan holds it back.
        if (tokens < 1) return false
        buckets.set(ord, { tokens: tokens - 1, at: now, rate: l.ratePerSec })
      }
      inflight.set(ord, holds + 1)
      return true
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
    /** Tenants waiting for a place in the round. */
    waiting: (): number => waiting.length,
    /** Drop the rate buckets that have refilled (they equal a fresh one), members or not. */
    sweepBuckets: (now: number) => {
      for (const [ord, b] of buckets) if (tokensOf(ord, b.rate, now) >= capacityOf(b.rate)) buckets.delete(ord)
    }
  }
}

export type Fair = ReturnType<typeof makeFair>
