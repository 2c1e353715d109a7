/**
 * One dispatch tick (TEN-1 §5; docs/delivery.md "Dispatch tick and claim
 * order"): claim due rows tenant by tenant from the active index within the
 * free inflight slots, hand them to their sinks, then clean up the markers
 * of every tenant visited and move the tenants' cursors.
 */
import { Clock, Effect, Metric } from "effect"
import * as K from "../domain/keys.js"
import * as M from "../observability/delivery-metrics.js"
import { type Claimed, type SinkCalls } from "./calls.js"
import { FIRST_SCAN_TENANTS, type PipelineOptions, type PipelineState } from "./options.js"
import { type ActiveTenant, type DueEntry, type QueueShape } from "../queue/queue.js"
import type { StoreError } from "../store/store.js"

export interface TickReport {
  /** Tenants visited, in visit (marker) order. */
  readonly visited: ReadonlyArray<number>
  /** Rows claimed, in claim order. */
  readonly claimed: ReadonlyArray<K.DueRef>
}

interface Visit {
  readonly ord: number
  readonly buckets: ReadonlyArray<number>
  readonly rows: ReadonlyArray<DueEntry>
}

const refOf = (d: DueEntry): K.InflightRef => ({ ord: d.ref.ord, seq: d.ref.seq, sink: d.ref.sink })

/** A visit's candidate stale markers: the buckets scanned for its tenant and the buckets of the rows it claimed. */
const markersOf = (v: Visit): ReadonlyArray<number> => {
  if (v.rows.length === 0) return v.buckets
  const out = new Set(v.buckets)
  for (const r of v.rows) out.add(K.bucketOf(r.ref.at))
  return [...out]
}

/** The tick, unguarded: the caller keeps ticks from overlapping. */
export const makeTick = (
  o: PipelineOptions,
  queue: QueueShape,
  state: PipelineState,
  calls: SinkCalls
): Effect.Effect<TickReport, StoreError> => {
  // TEN-1 §5: per-tenant scan floors, memory only; evicted when a tenant drains.
  const cursors = new Map<number, number>()

  /**
   * Visit tenants in marker order and claim (TEN-1 §5, §6; the queue locks and writes). No more
   * tenants than rows to claim: every visit with due rows takes at least one. And first only
   * FIRST_SCAN_TENANTS of them: the scan reads markers until it has seen one tenant more than it
   * was asked for, and a tenant with a backlog often fills the tick on its own. Only a tick left
   * with rows to claim after those tenants scans again for the rest (a second claim batch).
   */
  const claim = (now: number, rowsBudget: number) =>
    Effect.gen(function* () {
      const cap = Math.min(o.activeTenants, rowsBudget)
      const asked = Math.min(cap, FIRST_SCAN_TENANTS)
      const first = yield* queue.activeTenants(now, asked)
      const visits: Array<Visit> = []
      const claimFrom = (tenants: ReadonlyArray<ActiveTenant>, rows: number, bytes: number) =>
        queue.claim(now, tenants.map((t) => ({ ord: t.ord, floorAt: cursors.get(t.ord) ?? 0, limit: rows })), rows, bytes).pipe(
          Effect.map((claimed) => {
            claimed.forEach((v, i) => visits.push({ ord: v.ord, buckets: tenants[i]!.buckets, rows: v.rows }))
          })
        )
      yield* claimFrom(first, rowsBudget, o.claimBytes)
      const rowsLeft = rowsBudget - visits.reduce((n, v) => n + v.rows.length, 0)
      const bytesLeft = o.claimBytes - visits.reduce((n, v) => n + v.rows.reduce((b, r) => b + r.value.size, 0), 0)
      if (first.length === asked && asked < cap && rowsLeft > 0 && bytesLeft > 0) {
        const seen = new Set(first.map((t) => t.ord))
        const rest = (yield* queue.activeTenants(now, cap)).filter((t) => !seen.has(t.ord))
        yield* claimFrom(rest, rowsLeft, bytesLeft)
      }
      return visits
    })

  return Effect.gen(function* () {
    const free = Math.min(o.claimLimit, o.maxInflight - state.inflight)
    // Saturated: visit nothing, and leave the active-tenants gauge at the last real visit.
    if (free <= 0 || state.stopping) return { visited: [], claimed: [] }
    const now = yield* Clock.currentTimeMillis
    const visits = yield* claim(now, free)
    const claimed: Array<Claimed> = visits.flatMap((v) => v.rows.map((entry) => ({ entry, ref: refOf(entry) })))
    state.inflight += claimed.length
    yield* Metric.update(M.activeTenants, visits.length)

    if (claimed.length > 0) {
      const envs = yield* queue.envelopes([...new Set(claimed.map((c) => c.ref.seq))]).pipe(
        // The rows are claimed: if the reads fail they must still be counted down (they stay ?F for recovery).
        Effect.tapError(() => Effect.sync(() => {
          state.inflight -= claimed.length
        }))
      )
      for (let i = 0; i < claimed.length; i++) {
        const c = claimed[i]!
        const unroutable = calls.route(c, envs.get(c.ref.seq))
        if (unroutable !== undefined) yield* unroutable
      }
    }

    // TEN-1 §5 cleanup for every tenant visited (an empty visit means a stale marker to remove),
    // over the markers scanned and those of the seconds just claimed from: the scan stops early
    // (above), so the claims may have emptied seconds whose markers it did not read.
    // One write deletes the stale markers of every tenant visited.
    const cleaned = yield* queue.cleanupMarkersOf(visits.map((v) => ({ ord: v.ord, markers: markersOf(v) })), now)
    for (let i = 0; i < visits.length; i++) {
      const v = visits[i]!
      const r = cleaned[i]!
      const last = v.rows[v.rows.length - 1]
      // Drained (or nothing due from the cursor): forget the floor. Otherwise the floor is the last
      // claimed `at`, lowered to the tenant's first due row when a late commit landed below it.
      if (last === undefined || r.first === undefined) cursors.delete(v.ord)
      else cursors.set(v.ord, Math.min(last.ref.at, r.first.ref.at))
    }
    return { visited: visits.map((v) => v.ord), claimed: claimed.map((c) => c.entry.ref) }
  })
}
