/**
 * One dispatch tick (TEN-1 §5, TEN-3; docs/delivery.md "Fair dispatch"): find the tenants with
 * work (the Writer's hints and a slice of the active index), claim from them by deficit
 * round-robin within the free inflight slots (fair.ts plans, the Queue claims), hand the rows to
 * their sinks, then clean up the markers of every tenant visited and move its cursor.
 */
import { Clock, Effect, Metric } from "effect"
import type * as K from "../domain/keys.js"
import { bucketOf } from "../domain/keys.js"
import * as M from "../observability/delivery-metrics.js"
import { type Claimed, type SinkCalls } from "./calls.js"
import type { Cursors } from "./cursors.js"
import type { Fair, Got, TenantLimits } from "./fair.js"
import { CLAIM_PASSES, DISCOVERY_MARKERS, type PipelineOptions, type PipelineState } from "./options.js"
import { type DueEntry, type QueueShape } from "../queue/queue.js"
import type { WakeShape } from "../queue/wake.js"
import type { StoreError } from "../store/store.js"

export interface TickReport {
  /** Tenants visited, in visit (round-robin) order. */
  readonly visited: ReadonlyArray<number>
  /** Rows claimed, in claim order. */
  readonly claimed: ReadonlyArray<K.DueRef>
}

interface Visit {
  readonly ord: number
  readonly markers: ReadonlyArray<number>
  readonly rows: ReadonlyArray<DueEntry>
  /** The tenant's next due row after `rows` (read, not claimed); undefined when it drained. */
  readonly next: DueEntry | undefined
}

/** The limits of the tenants a tick may serve, read once per tick (a cache hit each, src/queue/limits.ts). */
export type LimitsOf = (ords: ReadonlyArray<number>) => Effect.Effect<ReadonlyArray<TenantLimits>, StoreError>

/** A visit's candidate stale markers: those the scan saw for its tenant and the buckets of the rows it claimed. */
const markersOf = (v: Visit): ReadonlyArray<number> => {
  if (v.rows.length === 0) return v.markers
  const out = new Set(v.markers)
  for (const r of v.rows) out.add(bucketOf(r.ref.at))
  return [...out]
}

/** The tick, unguarded: the caller keeps ticks from overlapping. */
export const makeTick = (
  o: PipelineOptions,
  queue: QueueShape,
  wake: WakeShape,
  fair: Fair,
  cursors: Cursors,
  limitsOf: LimitsOf,
  state: PipelineState,
  calls: SinkCalls
): Effect.Effect<TickReport, StoreError> => {
  // Where the next slice of the active index starts (memory only; a restart scans from the first marker).
  let sliceFrom: Uint8Array | undefined

  /** New members: the Writer's hints, then one bounded slice of the markers due by now (DISCOVERY_MARKERS). */
  const discover = (now: number) =>
    Effect.gen(function* () {
      // A hinted row may sit below the tenant's cursor (its commit took its `at` before our last claim).
      for (const h of wake.takeHints()) {
        fair.join(h.ord)
        cursors.lower(h.ord, h.at)
      }
      const slice = yield* queue.markerSlice(now, sliceFrom, DISCOVERY_MARKERS)
      sliceFrom = slice.next
      for (const t of slice.tenants) fair.join(t.ord, t.buckets)
    })

  /** Up to CLAIM_PASSES plans and claims: a pass whose tenants drained leaves budget for the next. */
  const claim = (now: number, rows: number, limits: (ord: number) => TenantLimits) =>
    Effect.gen(function* () {
      const visits: Array<Visit> = []
      let rowsLeft = rows
      let bytesLeft = o.claimBytes
      for (let pass = 0; pass < CLAIM_PASSES && rowsLeft > 0 && bytesLeft > 0; pass++) {
        const planned = fair.plan(rowsLeft, bytesLeft, now, limits)
        if (planned.length === 0) break
        const claimed = yield* queue.claim(now, planned, rowsLeft, bytesLeft)
        const got: Array<Got> = []
        for (const v of claimed) {
          got.push({ ord: v.ord, rows: v.rows.length, drained: v.drained })
          visits.push({ ord: v.ord, markers: fair.takeMarkers(v.ord), rows: v.rows, next: v.next })
          rowsLeft -= v.rows.length
          for (const r of v.rows) bytesLeft -= r.value.size
        }
        fair.settle(planned, got, now, limits)
        // Budget left means every offer was met or its tenant drained: another round may claim more.
      }
      return visits
    })

  return Effect.gen(function* () {
    const free = Math.min(o.claimLimit, o.maxInflight - state.inflight)
    // Saturated: visit nothing, and leave the active-tenants gauge at the last real visit.
    if (free <= 0 || state.stopping) return { visited: [], claimed: [] }
    const now = yield* Clock.currentTimeMillis
    yield* discover(now)
    const members = fair.members()
    const read = yield* limitsOf(members)
    const byOrd = new Map<number, TenantLimits>()
    members.forEach((ord, i) => byOrd.set(ord, read[i]!))
    const visits = yield* claim(now, free, (ord) => byOrd.get(ord)!)
    fair.sweepBuckets(now, (ord) => byOrd.get(ord))
    const claimed: Array<Claimed> = visits.flatMap((v) => v.rows.map((entry) => ({ entry, ref: { ord: entry.ref.ord, seq: entry.ref.seq, sink: entry.ref.sink } })))
    state.inflight += claimed.length

    if (claimed.length > 0) {
      const envs = yield* queue.envelopes([...new Set(claimed.map((c) => c.ref.seq))]).pipe(
        // The rows are claimed: if the reads fail they must still be counted down (they stay ?F for recovery).
        Effect.tapError(() => Effect.sync(() => {
          state.inflight -= claimed.length
          for (const c of claimed) fair.released(c.ref.ord, 1)
        }))
      )
      for (let i = 0; i < claimed.length; i++) {
        const c = claimed[i]!
        const unroutable = calls.route(c, envs.get(c.ref.seq))
        if (unroutable !== undefined) yield* unroutable
      }
    }

    // TEN-1 §5 cleanup for every tenant visited (an empty visit means a stale marker to remove),
    // over the markers scanned and those of the seconds just claimed from. One write deletes the
    // stale markers of every tenant visited.
    const byTenant = new Map<number, Visit>()
    for (const v of visits) {
      const seen = byTenant.get(v.ord)
      byTenant.set(v.ord, seen === undefined ? v : { ord: v.ord, markers: [...seen.markers, ...v.markers], rows: [...seen.rows, ...v.rows], next: v.next })
    }
    const tenants = [...byTenant.values()]
    yield* Metric.update(M.activeTenants, tenants.length)
    // Step 1 of the cleanup is this visit's own read (its next row; none when it drained) unless the
    // tenant's cursor is due a check: then it reads the first due row from the start (cursors.ts).
    const verified = tenants.map((v) => cursors.verify(v.ord, now))
    const cleaned = yield* queue.cleanupMarkersOf(
      tenants.map((v, i) => (verified[i] ? { ord: v.ord, markers: markersOf(v) } : { ord: v.ord, markers: markersOf(v), known: { first: v.next } })),
      now
    )
    for (let i = 0; i < tenants.length; i++) {
      const v = tenants[i]!
      const first = cleaned[i]!.first
      const last = v.rows[v.rows.length - 1]
      // The floor moves to the last claimed `at` (drained or not: nothing is left below it), and
      // down to the tenant's first due row when a check found one below.
      let at = last === undefined ? cursors.floorOf(v.ord) : last.ref.at
      if (verified[i] && first !== undefined) at = Math.min(at, first.ref.at)
      cursors.set(v.ord, at)
    }
    return { visited: tenants.map((v) => v.ord), claimed: claimed.map((c) => c.entry.ref) }
  })
}
