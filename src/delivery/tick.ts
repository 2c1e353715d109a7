/**
 * One dispatch tick (TEN-1 §5, TEN-3; docs/delivery.md "Fair dispatch"): find the tenants with
 * work (the Writer's hints, the tenants whose full sinks have room again, and a slice of the
 * active index), claim from them by deficit round-robin within the free inflight slots (fair.ts
 * plans, the Queue claims, each row only if its sink admits it), hand the rows to their sinks,
 * then clean up the markers of every tenant visited and move its cursor. A tick that fails while
 * claiming gives its rows back (due again) and everything it counted for them.
 */
import { Cause, Clock, Effect, Metric } from "effect"
import type { Envelope } from "../domain/envelope.js"
import type * as K from "../domain/keys.js"
import { bucketOf } from "../domain/keys.js"
import * as M from "../observability/delivery-metrics.js"
import { Spans } from "../observability/span-names.js"
import { nowNanos } from "../observability/trace-span.js"
import { batchSpan, type TracingShape } from "../observability/tracing.js"
import { parseTraceparent, storedSampled } from "../domain/trace-context.js"
import { type Claimed, type SinkCalls } from "./calls.js"
import type { Cursors } from "./cursors.js"
import type { Fair, Got, TenantLimits } from "./fair.js"
import { makeLingering } from "./lingering.js"
import { makeMarkerFloor } from "./marker-floor.js"
import { CLAIM_PASSES, CLAIM_REFUSE_MAX, DISCOVERY_MARKERS, LINGERING_MAX, type PipelineOptions, type PipelineState } from "./options.js"
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
  /** Each claimed row's hook, in `rows` order. */
  readonly envelopes: ReadonlyArray<Envelope | undefined>
  /** The first row its sink refused (still due, below `next`), and the last row read and decided. */
  readonly firstRefused: DueEntry | undefined
  readonly last: K.DueRef | undefined
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

/**
 * Tracing on: the claim as a span, in the trace of the first sampled hook it claimed and linked to
 * the others'. A claim of unsampled hooks only is no span, found without parsing their contexts.
 */
const claimSpan = (tracing: TracingShape, visits: ReadonlyArray<Visit>, startedAt: bigint) => {
  if (!visits.some((v) => v.envelopes.some((e) => storedSampled(e?.traceparent)))) return
  const members = visits.flatMap((v) => v.envelopes.map((e) => parseTraceparent(e?.traceparent, e?.tracestate)))
  const span = batchSpan(tracing, Spans.claim, members, startedAt)
  if (span === undefined) return
  span.attribute("ankusa.rows", members.length)
  span.endNow()
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
  calls: SinkCalls,
  tracing?: TracingShape | undefined
): Effect.Effect<TickReport, StoreError> => {
  // Where the next slice of the active index starts (memory only; a restart scans from the first marker).
  let sliceFrom: Uint8Array | undefined
  // Where a slice pass over the active index starts: past the seconds whose markers are all deleted.
  const floor = makeMarkerFloor()
  // The tenants whose visits left this second's marker: they come back once it has passed (lingering.ts).
  const lingering = makeLingering(LINGERING_MAX)

  /** New members: the Writer's hints, the tenants parked on sinks with room again, then one bounded slice of the markers due by now (DISCOVERY_MARKERS). */
  const discover = (now: number) =>
    Effect.gen(function* () {
      // A hinted row may sit below the tenant's cursor (its commit took its `at` before our last claim).
      for (const h of wake.takeHints()) {
        fair.join(h.ord)
        cursors.lower(h.ord, h.at)
        floor.lower(h.at)
      }
      for (const [ord, bucket] of lingering.due(bucketOf(now))) fair.lingering(ord, bucket)
      // Their refused rows are below their cursors: the read resumes at the first of them.
      for (const p of calls.unparked()) {
        fair.join(p.ord)
        cursors.lower(p.ord, p.at)
      }
      const pass = sliceFrom === undefined
      const slice = yield* queue.markerSlice(now, sliceFrom, DISCOVERY_MARKERS, pass ? floor.from(now) : 0)
      // The slice is in marker order: a new pass's first marker is the lowest at or above where it started.
      if (pass) floor.passed(slice.first, now)
      sliceFrom = slice.next
      for (const t of slice.tenants) fair.join(t.ord, t.buckets)
    })

  /** Each row only if its sink has room for it (calls.ts); a visit reads on past refused rows while another sink has room. */
  const admission = {
    visit: () => {
      const refused = new Set<string>()
      return {
        admit: (row: DueEntry, env: Envelope | undefined) => {
          const name = env?.sinks[row.ref.sink]
          const a = calls.admit(row.ref.ord, name, row.ref.at)
          if (a === false) refused.add(name!)
          return a
        },
        more: () => calls.roomBesides(refused)
      }
    },
    open: () => calls.anyRoom() || calls.spare() > 0,
    refuseMax: CLAIM_REFUSE_MAX
  }

  /** Claimed rows given back: due again, uncounted, their sinks' places freed. Best effort: if the write fails they stay ?F (boot recovery). */
  const giveBack = (taken: ReadonlyArray<DueEntry>) =>
    Effect.gen(function* () {
      calls.endClaim(false)
      for (const d of taken) {
        fair.released(d.ref.ord, 1)
        // A later pass's read started past them.
        cursors.lower(d.ref.ord, d.ref.at)
        floor.lower(d.ref.at)
      }
      yield* queue.unclaim(taken).pipe(
        Effect.catchCause((cause) =>
          Effect.logError("pipeline: claimed rows not given back; left inflight for boot recovery", { rows: taken.length, cause: Cause.pretty(cause) })
        )
      )
    })

  /** Up to CLAIM_PASSES plans and claims: a pass whose tenants drained leaves budget for the next. */
  const claim = (now: number, rows: number, bytes: number, limits: (ord: number) => TenantLimits) => {
    const visits: Array<Visit> = []
    // Rows claimed (written) by the passes so far: given back if a later pass fails.
    const taken: Array<DueEntry> = []
    // Every sink has room for the whole budget and no tenant waits for one: no row can be refused,
    // so the claim reads no hooks, and one multi-get after it reads the claimed rows' (docs/delivery.md).
    const open = calls.roomForAll(rows)
    return Effect.gen(function* () {
      const startedAt = tracing === undefined ? undefined : nowNanos()
      let rowsLeft = rows
      let bytesLeft = bytes
      for (let pass = 0; pass < CLAIM_PASSES && rowsLeft > 0 && bytesLeft > 0; pass++) {
        const planned = fair.plan(rowsLeft, bytesLeft, now, limits)
        if (planned.length === 0) {
          // Everyone held back by their limits: the round still turns (tenants waiting for a place take theirs).
          fair.settle(planned, [], now, limits)
          break
        }
        const requests = planned.map((p) => ({ ...p, floorAfter: cursors.afterOf(p.ord) }))
        const claimed = yield* queue.claim(now, requests, rowsLeft, bytesLeft, open ? undefined : admission)
        const got: Array<Got> = []
        for (const v of claimed) {
          const a = v.admitted
          got.push({ ord: v.ord, rows: v.rows.length, drained: v.drained, refused: a?.refused ?? 0 })
          const last = a === undefined ? v.rows[v.rows.length - 1]?.ref : a.last
          visits.push({ ord: v.ord, markers: fair.takeMarkers(v.ord), rows: v.rows, next: v.next, envelopes: a?.envelopes ?? [], firstRefused: a?.firstRefused, last })
          taken.push(...v.rows)
          rowsLeft -= v.rows.length
          for (const r of v.rows) bytesLeft -= r.value.size
          // The next pass reads on from where this one stopped (the cursor is set for good below).
          if (a?.last !== undefined) cursors.set(v.ord, a.last.at, { seq: a.last.seq, sink: a.last.sink })
        }
        fair.settle(planned, got, now, limits)
        // Budget left means every offer was met or its tenant drained: another round may claim more.
      }
      if (open && taken.length > 0) {
        const envs = yield* queue.envelopes([...new Set(taken.map((d) => d.ref.seq))])
        for (let i = 0; i < visits.length; i++) {
          const v = visits[i]!
          const envelopes = v.rows.map((d) => envs.get(d.ref.seq))
          // Their places, which the room checked above guarantees.
          v.rows.forEach((d, j) => calls.admit(d.ref.ord, envelopes[j]?.sinks[d.ref.sink], d.ref.at))
          visits[i] = { ...v, envelopes }
        }
      }
      calls.endClaim(true)
      if (tracing !== undefined && taken.length > 0) claimSpan(tracing, visits, startedAt!)
      return visits
    }).pipe(Effect.onError(() => giveBack(taken)))
  }

  return Effect.gen(function* () {
    // The sinks' free places cap it too: a claim never runs ahead of what they can hold.
    // Full sinks still take a row of each tenant holding none of their places (sink-places.ts): the
    // tick runs for those, within their spare places.
    const room = calls.room()
    const free = Math.min(o.claimLimit, o.maxInflight - state.inflight, room > 0 ? room : calls.spare())
    // The bytes held in memory are bounded too (the claim takes a tenant's first row even past it).
    const freeBytes = Math.min(o.claimBytes, o.maxInflightBytes - state.inflightBytes)
    // Saturated: visit nothing, and leave the active-tenants gauge at the last real visit.
    if (free <= 0 || freeBytes <= 0 || state.stopping) return { visited: [], claimed: [] }
    const now = yield* Clock.currentTimeMillis
    yield* discover(now)
    const members = fair.members()
    const read = yield* limitsOf(members)
    const byOrd = new Map<number, TenantLimits>()
    members.forEach((ord, i) => byOrd.set(ord, read[i]!))
    const visits = yield* claim(now, free, freeBytes, (ord) => byOrd.get(ord)!)
    fair.sweepBuckets(now)
    state.inflight += visits.reduce((n, v) => n + v.rows.length, 0)
    state.inflightBytes += visits.reduce((n, v) => v.rows.reduce((m, r) => m + r.value.size, n), 0)
    const claimed: Array<Claimed> = []
    for (const v of visits) {
      for (let i = 0; i < v.rows.length; i++) {
        const entry = v.rows[i]!
        const c: Claimed = { entry, ref: { ord: entry.ref.ord, seq: entry.ref.seq, sink: entry.ref.sink } }
        claimed.push(c)
        const unroutable = calls.route(c, v.envelopes[i])
        if (unroutable !== undefined) yield* unroutable
      }
    }

    // TEN-1 §5 cleanup for every tenant visited (an empty visit means a stale marker to remove),
    // over the markers scanned and those of the seconds just claimed from. One write deletes the
    // stale markers of every tenant visited.
    const byTenant = new Map<number, Visit>()
    for (const v of visits) {
      const seen = byTenant.get(v.ord)
      byTenant.set(
        v.ord,
        seen === undefined
          ? v
          : {
              ord: v.ord,
              markers: [...seen.markers, ...v.markers],
              rows: [...seen.rows, ...v.rows],
              next: v.next,
              envelopes: [...seen.envelopes, ...v.envelopes],
              firstRefused: seen.firstRefused ?? v.firstRefused,
              last: v.last ?? seen.last
            }
      )
    }
    const tenants = [...byTenant.values()]
    yield* Metric.update(M.activeTenants, tenants.length)
    // Step 1 of the cleanup is this visit's own read (its next row; none when it drained) unless the
    // tenant's cursor is due a check: then it reads the first due row from the start (cursors.ts).
    const verified = tenants.map((v) => cursors.verify(v.ord, now))
    const refused = calls.refusedTenants()
    // A refused row is still due and lies below `next`: it is the tenant's first due row the claim saw.
    const candidates = tenants.map(markersOf)
    lingering.left(bucketOf(now), tenants.map((v, i) => ({ ord: v.ord, markers: candidates[i]! })))
    const cleaned = yield* queue.cleanupMarkersOf(
      tenants.map((v, i) => {
        if (verified[i]) return { ord: v.ord, markers: candidates[i]! }
        // A tenant with rows refused in earlier visits (parked on a destination) may hold due rows below
        // this visit's read, so step 1 reads its first due row, from the lowest of those refused rows or the
        // cursor the visit started at: below both lie only the rows a late commit put there, and step 3
        // puts back any marker of theirs step 2 deletes (TEN-1 §5). Not from the start: that read steps
        // over the tombstone of every row the tenant had claimed since the last compaction.
        const parkedAt = refused.get(v.ord)
        return parkedAt === undefined
          ? { ord: v.ord, markers: candidates[i]!, known: { first: v.firstRefused ?? v.next } }
          : { ord: v.ord, markers: candidates[i]!, from: Math.min(parkedAt, cursors.floorOf(v.ord)) }
      }),
      now
    )
    for (let i = 0; i < tenants.length; i++) {
      const v = tenants[i]!
      const first = cleaned[i]!.first
      // The floor moves past the last row the claim decided (drained or not: below it nothing is
      // left but rows refused for full sinks, whose sinks lower it again when they have room), and
      // down to the tenant's first due row when a check found one below.
      const last = v.last
      if (verified[i] && first !== undefined && (last === undefined || first.ref.at < last.at)) cursors.set(v.ord, first.ref.at)
      else if (last !== undefined) cursors.set(v.ord, last.at, v.firstRefused === undefined ? undefined : { seq: last.seq, sink: last.sink })
    }
    return { visited: tenants.map((v) => v.ord), claimed: claimed.map((c) => c.entry.ref) }
  })
}
