/**
 * One dispatch tick (TEN-1 §5; docs/delivery.md "Dispatch tick and claim
 * order"): claim due rows tenant by tenant from the active index within the
 * free inflight slots, hand them to their sinks, then clean up the markers
 * of every tenant visited and move the tenants' cursors.
 */
import { Clock, Effect, Metric } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import { decodeEnvelope } from "../domain/envelope.js"
import * as K from "../domain/keys.js"
import * as M from "../observability/delivery-metrics.js"
import { type Claimed, type SinkCalls } from "./calls.js"
import { FIRST_SCAN_TENANTS, type PipelineOptions, type PipelineState } from "./options.js"
import { type ActiveTenant, type DueEntry, type QueueShape } from "../queue/queue.js"
import { type StoreError, type StoreShape } from "../store/store.js"

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
  store: StoreShape,
  queue: QueueShape,
  state: PipelineState,
  calls: SinkCalls
): Effect.Effect<TickReport, StoreError> => {
  // TEN-1 §5: per-tenant scan floors, memory only; evicted when a tenant drains.
  const cursors = new Map<number, number>()

  /** Visit tenants in marker order, each under its lock (TEN-1 §6: claim reads then deletes due rows), and claim in one batch. */
  const claim = (now: number, rowsBudget: number) =>
    Effect.gen(function* () {
      // No more tenants than rows to claim: every visit with due rows takes at least one. And first
      // only FIRST_SCAN_TENANTS of them: the scan reads markers until it has seen one tenant more
      // than it was asked for, and a tenant with a backlog often fills the tick on its own. Only a
      // tick left with rows to claim after those tenants scans again for the rest.
      const cap = Math.min(o.activeTenants, rowsBudget)
      const asked = Math.min(cap, FIRST_SCAN_TENANTS)
      let tenants: ReadonlyArray<ActiveTenant> = yield* queue.activeTenants(now, asked)
      let complete = tenants.length < asked || asked === cap
      const more = Effect.suspend(() => {
        const seen = new Set(tenants.map((t) => t.ord))
        return queue.activeTenants(now, cap).pipe(
          Effect.map((all) => {
            tenants = [...tenants, ...all.filter((t) => !seen.has(t.ord))]
            complete = true
          })
        )
      })
      const visits: Array<Visit> = []
      const visit = (i: number, rowsLeft: number, bytesLeft: number): Effect.Effect<void, StoreError> => {
        const t = tenants[i]
        if (t === undefined && !complete && rowsLeft > 0 && bytesLeft > 0) return more.pipe(Effect.andThen(Effect.suspend(() => visit(i, rowsLeft, bytesLeft))))
        if (t === undefined || rowsLeft <= 0 || bytesLeft <= 0) {
          const rows = visits.flatMap((v) => v.rows)
          return rows.length === 0 ? Effect.void : store.write(Deliveries.batch(rows.map((r) => Deliveries.claim(r.ref, r.value))), { sync: false })
        }
        return queue.withTenant(
          t.ord,
          Effect.suspend(() => queue.dueForTenant(t.ord, now, cursors.get(t.ord) ?? 0, rowsLeft, bytesLeft)).pipe(
            Effect.flatMap((rows) => {
              visits.push({ ord: t.ord, buckets: t.buckets, rows })
              const bytes = rows.reduce((n, r) => n + r.value.size, 0)
              return visit(i + 1, rowsLeft - rows.length, bytesLeft - bytes)
            })
          )
        )
      }
      yield* visit(0, rowsBudget, o.claimBytes)
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
      const seqs = [...new Set(claimed.map((c) => c.ref.seq))]
      const hooks = yield* store.multiGet("hooks", seqs.map(K.hookKey)).pipe(
        // The rows are claimed: if the reads fail they must still be counted down (they stay ?F for recovery).
        Effect.tapError(() => Effect.sync(() => {
          state.inflight -= claimed.length
        }))
      )
      const envs = new Map(seqs.map((s, i) => [s, decodeEnvelope(hooks[i])]))
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
