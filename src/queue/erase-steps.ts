/**
 * The steps 2 to 7 of a tenant's erase (TEN-5; docs/storage.md "Erasing a
 * tenant"). Each call does ONE bounded unit of work and commits it with the
 * job's record (its step and cursor) in one synced batch, so a kill between
 * any two calls resumes at the next unit and never counts a row twice: a
 * purged row's deltas and the cursor past it commit together.
 */
import { Effect } from "effect"
import * as Counters from "../domain/counters.js"
import * as Dedupe from "../domain/dedupe.js"
import * as Deliveries from "../domain/deliveries.js"
import * as LaneMoves from "../domain/lane-moves.js"
import { decodeEnvelope, tenantOf } from "../domain/envelope.js"
import * as E from "../domain/erase.js"
import * as K from "../domain/keys.js"
import * as Ordering from "../domain/ordering.js"
import { del, deleteRange, type Op } from "../domain/ops.js"
import type { EndpointsShape } from "./endpoints.js"
import type { LimitsShape } from "./limits.js"
import type { QueueShape } from "./queue.js"
import type { StoreError, StoreShape } from "../store/store.js"
import type { ArchiveShape } from "../lifecycle/archive.js"
import type { ArchiveError } from "../lifecycle/archive-files.js"
import type { QuarantineShape } from "../lifecycle/quarantine.js"

export interface StepContext {
  readonly store: StoreShape
  readonly queue: QueueShape
  readonly archive: ArchiveShape
  readonly quarantine: QuarantineShape
  /** Rows per synced batch. */
  readonly chunk: number
  /** How long step 2 waits for inflight rows before taking them back. */
  readonly inflightTimeoutMs: number
  /** Step 2's poll interval. */
  readonly pollMs: number
  readonly now: () => number
  /** The services that keep a tenant's limits and endpoints in memory too (absent: their rows are deleted directly). */
  readonly limits: LimitsShape | undefined
  readonly endpoints: EndpointsShape | undefined
  /**
   * Step 6's plug-in for tenant families added after the endpoints: the ops that delete the
   * tenant's rows of them, at most `chunk` keys a call; `[]` once none is left.
   */
  readonly moreTenantRows: (ord: number, tenant: string, chunk: number) => Effect.Effect<ReadonlyArray<Op>, StoreError>
}

export type StepError = StoreError | ArchiveError

type Step = (c: StepContext, job: E.EraseJob) => Effect.Effect<E.EraseJob, StepError>

const hex = (k: Uint8Array) => K.asBuffer(k).toString("hex")
const unhex = (s: string) => Buffer.from(s, "hex")

/** Commit `ops` with the job moved to `step`/`cursor`; returns the job as committed. */
const commit = (c: StepContext, job: E.EraseJob, ops: ReadonlyArray<Op>, at: { step: number; cursor: E.EraseJob["cursor"]; add?: Record<string, number> }) =>
  Effect.gen(function* () {
    const next = E.advanced(job, { ...at, now: c.now() })
    yield* c.store.write([...ops, E.jobOp(next)], { sync: true })
    return next
  })

/** The phase of the cursor, or the step's first. */
const phaseOf = (job: E.EraseJob, first: string) => job.cursor?.phase ?? first
/** Where the phase's scan resumes: just after the last finished key. */
const from = (job: E.EraseJob, lo: Uint8Array) => (job.cursor?.key == null ? lo : K.keyAfter(unhex(job.cursor.key)))

/** Step 2: no claim of the tenant any more; wait until its inflight rows settle, or take them back. */
const inflight: Step = (c, job) =>
  Effect.gen(function* () {
    yield* c.queue.fence(job.ord)
    const first = yield* c.store.first("index", Deliveries.tenantInflightRange(job.ord))
    if (first === undefined) return yield* commit(c, job, [], { step: 3, cursor: null })
    if (c.now() - job.updatedAt < c.inflightTimeoutMs) {
      yield* Effect.sleep(c.pollMs)
      return job
    }
    const taken = yield* c.queue.takeBack(job.ord, c.now())
    return yield* commit(c, job, [], { step: 3, cursor: null, add: { inflight_taken_back: taken } })
  })

/** Step 3: due rows, then dead rows (with their delivery rows, `?c` markers and deltas), then the tenant's active markers. */
const purge: Step = (c, job) =>
  Effect.gen(function* () {
    const phase = phaseOf(job, "due")
    if (phase === "due") {
      const range = Deliveries.tenantDueRange(job.ord)
      return yield* c.queue.withTenant(
        job.ord,
        Effect.gen(function* () {
          const page = yield* c.store.scan("index", { lo: from(job, range.lo), hi: range.hi }, { limit: c.chunk })
          const ts = page.map((e) => Deliveries.purgeDue(K.decodeDueKey(e.key), K.decodeDueValue(e.value)))
          const done = page.length < c.chunk
          return yield* commit(c, job, ts.length === 0 ? [] : Deliveries.batch(ts), {
            step: 3,
            cursor: done ? { phase: "dead", key: null } : { phase, key: hex(page[page.length - 1]!.key) },
            add: { due: ts.length }
          })
        })
      )
    }
    if (phase === "dead") {
      const range = Deliveries.tenantDeadRange(job.ord)
      return yield* c.queue.withTenant(
        job.ord,
        Effect.gen(function* () {
          const page = yield* c.store.scan("index", { lo: from(job, range.lo), hi: range.hi }, { limit: c.chunk })
          const refs = page.map((e) => Deliveries.deadKeyOfByTenant(e.key))
          const values = refs.length === 0 ? [] : yield* c.store.multiGet("index", refs.map((r) => r.deadKey))
          const rows = refs.length === 0 ? [] : yield* c.store.multiGet("deliveries", refs.map((r) => K.deliveryKey(r.ref.seq, r.ref.sink)))
          const ts: Array<Deliveries.Transition> = []
          const ops: Array<Op> = []
          refs.forEach((r, i) => {
            const v = values[i]
            // As Queue.purgeTenant: only rows the fold counts as this tenant's; a lone `?X` just goes.
            if (v !== undefined && K.decodeDeadValue(v).ord === job.ord) ts.push(Deliveries.purgeDead(r.ref, job.ord, Deliveries.decodeRow(rows[i])?.size ?? 0))
            else ops.push(del("index", page[i]!.key))
          })
          const done = page.length < c.chunk
          return yield* commit(c, job, [...(ts.length === 0 ? [] : Deliveries.batch(ts)), ...ops], {
            step: 3,
            cursor: done ? { phase: "lanes", key: null } : { phase, key: hex(page[page.length - 1]!.key) },
            add: { dead: ts.length }
          })
        })
      )
    }
    if (phase === "lanes") {
      // Ordered lanes (docs/delivery.md "Ordered delivery"): the waiting rows with their deltas, then
      // the heads; nothing of the tenant is due, inflight or dead any more, so no head moves on.
      return yield* c.queue.withTenant(
        job.ord,
        c.queue.lanes.locked(
          Effect.gen(function* () {
            // The successors' cache may remember rows this deletes.
            c.queue.lanes.forget()
            const waiting = yield* c.store.scan("index", Ordering.tenantWaitingRange(job.ord), { limit: c.chunk })
            const ts = waiting.map((e) => LaneMoves.purgeWaiting(K.decodeWaitingKey(e.key), K.decodeSizeValue(e.value)))
            const heads = ts.length === c.chunk ? [] : yield* c.store.scan("index", Ordering.tenantHeadRange(job.ord), { limit: c.chunk - ts.length })
            const done = ts.length + heads.length < c.chunk
            return yield* commit(c, job, [...(ts.length === 0 ? [] : Deliveries.batch(ts)), ...heads.map((e) => del("index", e.key))], {
              step: 3,
              cursor: done ? { phase: "markers", key: null } : { phase, key: null },
              add: { waiting: ts.length, lanes: heads.length }
            })
          })
        )
      )
    }
    // Markers are keyed by time first: a bounded walk of the whole `?A` family, deleting the tenant's.
    const range = K.familyDataRange(K.Families.active)
    const page = yield* c.store.scan("index", { lo: from(job, range.lo), hi: range.hi }, { limit: c.chunk })
    const mine = page.filter((e) => K.decodeActiveKey(e.key).ord === job.ord).map((e) => del("index", e.key))
    const done = page.length < c.chunk
    return yield* commit(c, job, mine, {
      step: done ? 4 : 3,
      cursor: done ? null : { phase, key: hex(page[page.length - 1]!.key) },
      add: { markers: mine.length }
    })
  })

/**
 * Step 4: the hooks. (a) The tenant's archive obligations (`?a` values carry the ordinal): dropped
 * with their deltas inside the compactor's section. (b) The archive files, rewritten without the
 * tenant's records. (c) The hooks themselves: every one left has a `?c` marker (the purges, drops
 * and deliveries put one), so a bounded walk of `?c` reads each marked hook's tenant and deletes the
 * tenant's hooks nothing refers to, with their markers: reclaim's rule, done now.
 */
const hooks: Step = (c, job) =>
  Effect.gen(function* () {
    const phase = phaseOf(job, "obligations")
    if (phase === "obligations") {
      const range = K.familyDataRange(K.Families.archive)
      return yield* c.archive.exclusive(
        Effect.gen(function* () {
          const page = yield* c.store.scan("index", { lo: from(job, range.lo), hi: range.hi }, { limit: c.chunk })
          const mine = page.filter((e) => K.decodeArchiveValue(e.value).ord === job.ord)
          const ts = mine.map((e) => Deliveries.archiveDrop(K.decodeArchiveKey(e.key), job.ord))
          const done = page.length < c.chunk
          return yield* commit(c, job, ts.length === 0 ? [] : Deliveries.batch(ts), {
            step: 4,
            cursor: done ? { phase: "segments", key: null } : { phase, key: hex(page[page.length - 1]!.key) },
            add: { obligations: ts.length }
          })
        })
      )
    }
    if (phase === "segments") {
      let current = job
      yield* c.archive.eraseTenant(job.ord, job.cursor?.key ?? null, (file, records) =>
        Effect.map(commit(c, current, [], { step: 4, cursor: { phase, key: file }, add: { archived_records: records } }), (j) => {
          current = j
        })
      )
      return yield* commit(c, current, [], { step: 4, cursor: { phase: "hooks", key: null } })
    }
    const range = K.familyDataRange(K.Families.cleared)
    const page = yield* c.store.scan("index", { lo: from(job, range.lo), hi: range.hi }, { limit: c.chunk })
    const seqs = page.map((e) => K.decodeClearedKey(e.key))
    const found = seqs.length === 0 ? [] : yield* c.store.multiGet("hooks", seqs.map(K.hookKey))
    const mine = seqs.filter((_, i) => found[i] !== undefined && tenantOf(decodeEnvelope(found[i])) === job.tenant)
    const free = mine.length === 0 ? [] : yield* c.queue.unreferenced(mine)
    const ops = mine.flatMap((seq, i) => (free[i] ? [del("hooks", K.hookKey(seq)), del("index", K.clearedKey(seq))] : []))
    const done = page.length < c.chunk
    return yield* commit(c, job, ops, {
      step: done ? 5 : 4,
      cursor: done ? null : { phase: "hooks", key: hex(page[page.length - 1]!.key) },
      add: { hooks: ops.length / 2 }
    })
  })

/** Step 5: the dedupe keys `<<?u, tenant, 0, …>>` and their expiry rows; the last batch range-deletes the prefix. */
const dedupe: Step = (c, job) =>
  Effect.gen(function* () {
    const prefix = K.range(K.dedupeTenantPrefix(job.tenant))
    const page = yield* c.store.scan("index", prefix, { limit: c.chunk })
    const ops: Array<Op> = []
    for (const e of page) {
      ops.push(del("index", e.key))
      const expiry = Dedupe.expiryOf(e.value)
      if (expiry !== undefined) ops.push(del("index", K.expiryKey(expiry, job.tenant, K.decodeDedupeKey(e.key).key)))
    }
    const done = page.length < c.chunk
    if (done) ops.push(deleteRange("index", prefix.lo, prefix.hi))
    return yield* commit(c, job, ops, { step: done ? 6 : 5, cursor: null, add: { dedupe: page.length } })
  })

/** Step 6: quarantined requests (through the Quarantine service, which keeps their totals), limits, endpoints, then later families. */
const rest: Step = (c, job) =>
  Effect.gen(function* () {
    const phase = phaseOf(job, "quarantine")
    if (phase === "quarantine") {
      const n = yield* c.quarantine.deleteTenant(job.tenant)
      return yield* commit(c, job, [], { step: 6, cursor: { phase: "limits", key: null }, add: { quarantine: n } })
    }
    if (phase === "limits") {
      // Through Limits when there is one: it also forgets the tenant's ingest limits held by name.
      const next = E.advanced(job, { step: 6, cursor: { phase: "endpoints", key: null }, now: c.now() })
      if (c.limits === undefined) yield* c.store.write([del("tenants", K.tenantLimitsKey(job.ord)), E.jobOp(next)], { sync: true })
      else yield* c.limits.eraseTenant(job.ord, job.tenant, [E.jobOp(next)])
      return next
    }
    if (phase === "endpoints") {
      const next = (n: number) => E.advanced(job, { step: 6, cursor: { phase: "more", key: null }, now: c.now(), add: { endpoints: n } })
      if (c.endpoints !== undefined) {
        let done = next(0)
        yield* c.endpoints.eraseTenant(job.ord, (n) => [E.jobOp((done = next(n)))])
        return done
      }
      const rows = yield* c.store.scan("tenants", K.range(K.endpointPrefix(job.ord)), { limit: c.chunk })
      const done = rows.length < c.chunk
      return yield* commit(c, job, rows.map((r) => del("tenants", r.key)), {
        step: 6,
        cursor: done ? { phase: "more", key: null } : { phase, key: null },
        add: { endpoints: rows.length }
      })
    }
    const ops = yield* c.moreTenantRows(job.ord, job.tenant, c.chunk)
    return yield* commit(c, job, ops, { step: ops.length === 0 ? 7 : 6, cursor: ops.length === 0 ? null : { phase, key: null }, add: { other: ops.length } })
  })

/**
 * Step 7, under the tenant's lock: if any due, inflight or dead row of the ordinal is left (a
 * restart recovered one and a claim raced the fence), back to step 2. Otherwise the counters and
 * `?n` go and `?t` becomes a tombstone, with the job marked done, in one synced batch.
 */
const tombstone: Step = (c, job) =>
  c.queue.withTenant(
    job.ord,
    Effect.gen(function* () {
      for (const range of [Deliveries.tenantDueRange(job.ord), Deliveries.tenantInflightRange(job.ord), Deliveries.tenantDeadRange(job.ord), Ordering.tenantWaitingRange(job.ord)]) {
        if ((yield* c.store.first("index", range)) !== undefined) return yield* commit(c, job, [], { step: 2, cursor: null, add: { restarts: 1 } })
      }
      // Limits and endpoints are set through the API by ordinal, which resolves until this step: one set meanwhile goes too.
      const limitsLeft = (yield* c.store.get("tenants", K.tenantLimitsKey(job.ord))) !== undefined
      if (limitsLeft || (yield* c.store.first("tenants", K.range(K.endpointPrefix(job.ord)))) !== undefined) {
        return yield* commit(c, job, [], { step: 6, cursor: { phase: "limits", key: null }, add: { restarts: 1 } })
      }
      const left = yield* c.store.getCounters("counters", Counters.keysOf(job.ord))
      const residual = left.reduce((n, v) => n + (v === 0n ? 0 : 1), 0)
      return yield* commit(c, job, E.tombstoneOps(job.tenant, job.ord), { step: E.DONE, cursor: null, add: { residual_counters: residual } })
    })
  )

const STEP_FNS: Record<number, Step> = { 2: inflight, 3: purge, 4: hooks, 5: dedupe, 6: rest, 7: tombstone }

/** One unit of the job's current step. */
export const runUnit = (c: StepContext, job: E.EraseJob): Effect.Effect<E.EraseJob, StepError> => {
  const f = STEP_FNS[job.step]
  return f === undefined ? Effect.succeed(job) : f(c, job)
}
