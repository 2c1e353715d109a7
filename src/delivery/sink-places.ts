/**
 * The sinks' places (docs/delivery.md "Fair dispatch", "A sink's places"): per sink, the rows
 * admitted and not done calling, at most `concurrency` calls plus `maxWaiting` waiting (or as many
 * as it started in about the last SINK_PACE_WINDOW_MS, when more), by tenant, and the tenants
 * parked for want of a place; over all sinks, the admission the claim asks row by row, its
 * reservations, and the parked tenants that may come back.
 */
import { admitted, allows, type Breaker, probeDue, released } from "./breaker.js"
import { SINK_PACE_WINDOW_MS } from "./options.js"

export interface Places {
  readonly concurrency: number
  readonly maxWaiting: number
  /** Rows admitted and not done calling (waiting or calling), and by tenant. */
  held: number
  readonly heldBy: Map<number, number>
  /** Calls started in the current SINK_PACE_WINDOW_MS window and the one before, and when the current one began. */
  readonly started: { cur: number; prev: number; since: number }
  /** Tenants refused a place, each with the lowest `at` refused (where its read resumes). */
  readonly parked: Map<number, number>
}

/** What the admission needs of a sink (calls.ts's `Sink`). */
export interface PlacedSink {
  readonly places: Places
  /** Open: nothing admitted; half-open: one probe (breaker.ts). */
  readonly breaker: Breaker
  readonly running: number
  readonly retired: boolean
  readonly options: { readonly name: string }
}

/**
 * A delivered row's place on an ordered destination, kept from its call's end until its outcome is
 * committed, for its lane's next head (handoff.ts): `passed` to that row, else given back (`releaseKept`).
 */
export interface KeptPlace {
  readonly ord: number
  readonly sink: PlacedSink
  /** How many hand-offs in a row brought the place to the row that kept it (0: the round's). */
  readonly runs: number
  passed: boolean
  released: boolean
}

/**
 * Whether a kept place may pass to its tenant's next row now: its sink still in force with its
 * breaker closed, and, while a tenant is parked on it waiting for a place, its tenant within its
 * share and the place passed fewer than HANDOFF_RUNS_WHILE_PARKED times in a row. Else the round
 * decides who gets it, as the claim's admission does.
 */
export const passable = (k: KeptPlace, now: number): boolean =>
  !k.passed &&
  !k.released &&
  !k.sink.retired &&
  k.sink.breaker.state === "closed" &&
  (k.sink.places.parked.size === 0 ||
    (k.runs < HANDOFF_RUNS_WHILE_PARKED && (k.sink.places.heldBy.get(k.ord) ?? 0) <= shareOf(k.sink.places, k.ord, capacityOf(k.sink.places, now))))

/**
 * While a tenant is parked on the sink, a place passes only within its tenant's fair share of the
 * sink (as the claim's admission counts it), and at most this many times in a row: then it goes
 * back to the round, so a parked tenant waits for at most this many more calls of a place's holder.
 */
export const HANDOFF_RUNS_WHILE_PARKED = 2

/** A kept place not passed on goes back to its sink (once). */
export const releaseKept = (k: KeptPlace): void => {
  if (k.passed || k.released) return
  k.released = true
  hold(k.sink.places, k.ord, -1)
}

/** A row admitted by a claim: its place on `sink` (none once a reload removed it), and whether it is the probe. */
interface Reservation<S> {
  readonly sink: S | undefined
  readonly ord: number
  readonly probe: boolean
}

export interface Parked {
  readonly ord: number
  readonly at: number
}

export const makePlaces = (concurrency: number, maxWaiting: number): Places => ({
  concurrency,
  maxWaiting,
  held: 0,
  heldBy: new Map(),
  started: { cur: 0, prev: 0, since: 0 },
  parked: new Map()
})

export const hold = (p: Places, ord: number, n: number): void => {
  p.held += n
  const v = (p.heldBy.get(ord) ?? 0) + n
  if (v > 0) p.heldBy.set(ord, v)
  else p.heldBy.delete(ord)
}

/** Calls started in about the last SINK_PACE_WINDOW_MS (the window before, weighted by how much of it that covers). */
const startedRecently = (p: Places, at: number): number => {
  const w = p.started
  if (at - w.since >= 2 * SINK_PACE_WINDOW_MS) {
    w.prev = 0
    w.cur = 0
    w.since = at
  } else if (at - w.since >= SINK_PACE_WINDOW_MS) {
    w.prev = w.cur
    w.cur = 0
    w.since += SINK_PACE_WINDOW_MS
  }
  return w.cur + w.prev * (1 - (at - w.since) / SINK_PACE_WINDOW_MS)
}

/** A call started at `at`. */
export const started = (p: Places, at: number): void => {
  startedRecently(p, at)
  p.started.cur += 1
}

/** Rows a sink may hold: its calls, and `maxWaiting` waiting, or as many as it started lately if more. */
export const capacityOf = (p: Places, at: number): number => p.concurrency + Math.max(p.maxWaiting, Math.floor(startedRecently(p, at)))

export const park = (p: Places, ord: number, at: number): false => {
  const was = p.parked.get(ord)
  if (was === undefined || at < was) p.parked.set(ord, at)
  return false
}

/** One row of tenant `ord` due at `at`: a place held (true), or the tenant parked (false). */
const admitTo = (p: Places, ord: number, at: number, now: number): boolean => {
  const capacity = capacityOf(p, now)
  if (p.held >= capacity) {
    // A tenant holding none of the sink's places takes one past its capacity, `concurrency` such at
    // most (fq_codel's new flows, RFC 8290 §4.1): a sparse tenant waits one slot turn, not a backlog.
    if (!p.heldBy.has(ord) && p.held < capacity + p.concurrency) {
      hold(p, ord, 1)
      return true
    }
    return park(p, ord, at)
  }
  // While other tenants wait for room (parked), a tenant holds at most its fair share of the
  // sink's places.
  if (p.parked.size > (p.parked.has(ord) ? 1 : 0) && (p.heldBy.get(ord) ?? 0) >= shareOf(p, ord, capacity)) return park(p, ord, at)
  hold(p, ord, 1)
  return true
}

/** A tenant's fair share of a sink's places: the capacity over the tenants holding or wanting some (it among them), at least one. */
const shareOf = (p: Places, ord: number, capacity: number): number => {
  let contenders = p.heldBy.size
  for (const o of p.parked.keys()) if (!p.heldBy.has(o)) contenders++
  if (!p.heldBy.has(ord) && !p.parked.has(ord)) contenders++
  return Math.max(1, Math.floor(capacity / contenders))
}

/**
 * The destinations the admission sees: the sinks and open endpoint pools in force (changed by
 * reloads and endpoint changes), and the places of endpoint pools not open yet.
 */
export interface Placed<S extends PlacedSink> {
  readonly get: (name: string) => S | undefined
  readonly all: () => Iterable<S>
  /** No destination at all (no sink, no endpoints): every row is settled without a call. */
  readonly none: () => boolean
  readonly unopened: () => number
  /** `unopened() > 0`, stopping at the first. */
  readonly anyUnopened: () => boolean
}

const NO_NAMES: ReadonlySet<string> = new Set()

/** The admission over `sinks`, read at `now()`. */
export const makeAdmission = <S extends PlacedSink>(sinks: Placed<S>, now: () => number) => {
  /** Rows admitted by the claim in progress (`probe`: its sink's breaker's probe), given back if it fails. */
  let reserved: Array<Reservation<S>> = []
  /** The last kept claim's, in force: for the probes its routed rows take and the rows dropped before a call. */
  let routing: Array<Reservation<S>> = []
  /** Tenants parked on sinks a reload removed: back to the round at the next tick. */
  let orphaned: Array<Parked> = []
  const free = (s: S, at: number) => (s.breaker.state === "closed" || probeDue(s.breaker, at) ? Math.max(0, capacityOf(s.places, at) - s.places.held) : 0)
  const roomBesides = (names: ReadonlySet<string>): boolean => {
    if (sinks.anyUnopened()) return true
    const at = now()
    for (const s of sinks.all()) if (!names.has(s.options.name) && free(s, at) > 0) return true
    return false
  }

  return {
    /** A row of tenant `ord` for `sink` (resolved by the caller): a place held, the tenant parked, or the row moved to the breaker's probe time. */
    admit: (sink: S, ord: number, at: number): boolean | number => {
      // An open breaker admits nothing and no attempt is used: the row's due time follows the breaker
      // (moved to when it admits its probe). Half-open with its probe out: the tenant waits, parked.
      if (!allows(sink.breaker, now())) return sink.breaker.state === "open" ? sink.breaker.openUntil : park(sink.places, ord, at)
      if (!admitTo(sink.places, ord, at, now())) return false
      reserved.push({ sink, ord, probe: admitted(sink.breaker) })
      return true
    },
    roomBesides,
    anyRoom: (): boolean => sinks.none() || roomBesides(NO_NAMES),
    room: (): number => {
      // No destination: every row is settled without a call, none needs a place.
      if (sinks.none()) return Number.POSITIVE_INFINITY
      const at = now()
      let n = sinks.unopened()
      for (const s of sinks.all()) n += free(s, at)
      return n
    },
    /** Places past every full sink's capacity for tenants holding none there (`admitTo`); the room when none is free. */
    spare: (): number => {
      const at = now()
      let n = 0
      for (const s of sinks.all()) {
        if (s.breaker.state !== "closed" && !probeDue(s.breaker, at)) continue
        const c = capacityOf(s.places, at)
        n += Math.max(0, c + s.places.concurrency - Math.max(c, s.places.held))
      }
      return n
    },
    roomForAll: (rows: number): boolean => {
      const at = now()
      for (const s of sinks.all()) if (s.places.parked.size > 0 || free(s, at) < rows) return false
      return orphaned.length === 0
    },
    capacity: (): number => {
      if (sinks.none()) return Number.POSITIVE_INFINITY
      const at = now()
      let n = sinks.unopened()
      for (const s of sinks.all()) n += capacityOf(s.places, at)
      return n
    },
    endClaim: (kept: boolean): void => {
      for (let i = 0; i < reserved.length; i++) {
        const r = reserved[i]!
        if (!kept || r.sink!.retired) hold(r.sink!.places, r.ord, -1)
        // A probe never called: the breaker admits its next probe.
        if (!kept && r.probe) released(r.sink!.breaker)
        if (!kept || !r.sink!.retired) continue
        // A reload replaced the sink during the claim: the row's place is on the sink now in force.
        const current = sinks.get(r.sink!.options.name)
        if (current !== undefined) hold(current.places, r.ord, 1)
        reserved[i] = { sink: current, ord: r.ord, probe: r.probe }
      }
      routing = kept ? reserved : []
      reserved = []
    },
    /** Whether the row of tenant `ord` routed to `sink` is the probe its half-open breaker admitted (its job holds it then). */
    probeOf: (sink: S, ord: number): boolean => {
      const i = routing.findIndex((r) => r.probe && r.ord === ord && r.sink?.breaker === sink.breaker)
      if (i < 0) return false
      routing[i] = { sink: routing[i]!.sink, ord, probe: false }
      return true
    },
    /** A row of tenant `ord` admitted for `name` and dropped before its call (its destination went away): its place and probe are given back. */
    dropped: (name: string, ord: number): void => {
      // Most such rows were never admitted (gone at their admission too): no place of theirs to find.
      if (sinks.get(name)?.places.heldBy.has(ord) !== true) return
      const i = routing.findIndex((r) => r.ord === ord && r.sink?.options.name === name)
      if (i < 0) return
      const r = routing[i]!
      routing[i] = { sink: undefined, ord, probe: false }
      hold(r.sink!.places, ord, -1)
      if (r.probe) released(r.sink!.breaker)
    },
    unparked: (): Array<Parked> => {
      const out = orphaned
      orphaned = []
      const at = now()
      for (const s of sinks.all()) {
        const p = s.places
        if (p.parked.size === 0) continue
        // Behind an open breaker they wait for its probe (then one of them is claimed for it).
        if (s.breaker.state !== "closed" && !probeDue(s.breaker, at)) continue
        const capacity = capacityOf(p, at)
        if (p.held - s.running > Math.floor((capacity - p.concurrency) / 2) || p.held >= capacity) continue
        for (const [ord, a] of p.parked) out.push({ ord, at: a })
        p.parked.clear()
      }
      return out
    },
    /** A reload removed a sink: its parked tenants come back at the next tick. */
    orphan: (p: Places): void => {
      for (const [ord, at] of p.parked) orphaned.push({ ord, at })
      p.parked.clear()
    }
  }
}
