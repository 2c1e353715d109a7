/**
 * One Writer batch from its items to its answers (docs/architecture.md "The Writer"): the reads it
 * needs, the hooks, the synced write, then the state, the cache and the answers. A batch that needs
 * no read (no idempotency key, every tenant cached, none erased, the endpoints of those that fan
 * out to theirs cached: every batch under steady load) runs as plain functions around the one write (`plainBatch`); the others run
 * as the effect `readingBatch`. Both end in `finish`.
 */
import type { Clock, Context, Option } from "effect"
import { Effect, Exit } from "effect"
import * as Dedupe from "../domain/dedupe.js"
import type { Endpoint } from "../domain/endpoints.js"
import * as Deliveries from "../domain/deliveries.js"
import { wantsEndpoints } from "../domain/fanout.js"
import * as Keys from "../domain/keys.js"
import { type Op, put } from "../domain/ops.js"
import * as TenantOrds from "../domain/tenants.js"
import { TenantErased, TenantLimit } from "../domain/tenants.js"
import { TenantQuota } from "../domain/admission.js"
import { DEFAULT_TENANT } from "../domain/envelope.js"
import type { StoreError, StoreShape } from "../store/store.js"
import { tenants as tenantsGauge } from "../observability/delivery-metrics.js"
import * as WriterMetrics from "../observability/writer-metrics.js"
import { Spans } from "../observability/span-names.js"
import { nowNanos } from "../observability/trace-span.js"
import { batchSpan, type TracingShape } from "../observability/tracing.js"
import type { EndpointsShape } from "./endpoints.js"
import type { WakeShape } from "./wake.js"
import { endpointLists, fanFrom, orderedFrom } from "./writer-fanout.js"
import { type Admit, buildHooks, type Built, type Item, type Owner, ownersOf, splitRefused } from "./writer-batch.js"
import type { IngestResult, SubmitError } from "./writer.js"

export interface CommitDeps {
  readonly store: StoreShape
  readonly wake: WakeShape
  readonly endpoints: Option.Option<EndpointsShape>
  readonly quota: (() => Admit) | undefined
  /** Advanced only after a commit succeeds: a failed commit allocates nothing. */
  readonly state: { nextSeq: number; nextOrd: number; readonly node: string; readonly refused: ReadonlySet<string> }
  readonly cache: Map<string, number>
  readonly options: { readonly tenantsMax: number; readonly tenantCacheEntries: number; readonly dedupeWindowMs: number }
  /** The metric registry's context, for updates outside an effect. */
  readonly context: Context.Context<never>
  /** Answers each item with `exit(i)`; returns what a callback threw, if one did. */
  readonly answerAll: (items: ReadonlyArray<Item>, exit: (i: number) => Exit.Exit<IngestResult, SubmitError>) => unknown
  readonly logThrown: (thrown: unknown) => Effect.Effect<void>
  /** After a successful write, before its answers: clears the store's failed mark, if set. */
  readonly storeTook: () => unknown
  /** Tracing on: each write is a span (src/observability/tracing.ts). */
  readonly tracing: TracingShape | undefined
  /** The Queue's promotion of lanes that got waiting rows (docs/delivery.md "Ordered delivery"); absent without a Queue. */
  readonly promote: ((lanes: ReadonlyArray<Keys.LaneRef>, now: number) => Effect.Effect<void, StoreError>) | undefined
}

const answerAs = (exit: Exit.Exit<IngestResult, SubmitError>) => () => exit

export const makeCommit = (d: CommitDeps) => {
  const { store, state, cache, options: o } = d

  /** After the batch's synced write: the state, the cache, the metrics, every answer in one loop, the wake. */
  const finish = (
    count: number,
    started: number,
    at: { readonly now: number; readonly nextSeq: number; readonly nextOrd: number },
    ords: ReadonlyMap<string, number>,
    /** Whether `ords` holds tenants the cache lacks (a plain batch's are all cached). */
    learn: boolean,
    answers: Built["answers"],
    held: Built["held"],
    thrownBefore: unknown
  ): Effect.Effect<void> => {
    d.storeTook()
    WriterMetrics.commitSeconds.updateUnsafe((performance.now() - started) / 1000, d.context)
    WriterMetrics.batchRequests.updateUnsafe(count, d.context)
    state.nextSeq = at.nextSeq
    if (at.nextOrd !== state.nextOrd) tenantsGauge.updateUnsafe(at.nextOrd - 1, d.context)
    state.nextOrd = at.nextOrd
    if (learn) {
      for (const [tenant, ord] of ords) {
        if (cache.size >= o.tenantCacheEntries && !cache.has(tenant)) cache.clear()
        cache.set(tenant, ord)
      }
    }
    let thrown = thrownBefore
    const hinted: Array<number> = []
    for (const [w, r] of answers) {
      const exit = Exit.succeed(r)
      // Later copies in the same batch answer as duplicates of the first.
      const again = w.items.length > 1 ? Exit.succeed({ ...r, duplicate: true }) : exit
      thrown ??= d.answerAll(w.items, (i) => (i === 0 ? exit : again))
      if (held === undefined || !held.has(w)) hinted.push(ords.get(w.tenant)!)
    }
    // New rows need not wait for the pipeline's next tick, nor for its marker scan to find their tenants.
    const hint = d.wake.hint(hinted, at.now)
    return thrown === undefined ? hint : Effect.andThen(d.logThrown(thrown), hint)
  }

  /** Write the built hooks with `extra`, then `finish`. */
  const write = (count: number, now: number, nextOrd: number, ords: ReadonlyMap<string, number>, learn: boolean, built: Built, extra: Array<Op>, thrown: unknown) => {
    // Persisted in every batch, so a seq is never reused even after its hook is reclaimed.
    extra.push(put("default", Keys.Meta.nextSeq, Keys.encodeU64(built.nextSeq)))
    const started = performance.now()
    const written = store.write(Deliveries.batch(built.transitions, extra), { sync: true })
    const done = () => finish(count, started, { now, nextSeq: built.nextSeq, nextOrd }, ords, learn, built.answers, built.held, thrown)
    return Effect.flatMap(d.tracing === undefined ? written : traced(d.tracing, built, written), () =>
      built.lanes === undefined || d.promote === undefined
        ? done()
        : // The hooks are durable: a failed promotion is retried with the next one, or at boot.
          d.promote(built.lanes, now).pipe(
            Effect.catch((e) => Effect.logWarning("writer: ordered lanes not promoted; retried later", e.message)),
            Effect.andThen(Effect.suspend(done))
          )
    )
  }

  /** The write as the batch's span, linked to the ingest spans of the hooks it holds. */
  const traced = (tracing: TracingShape, built: Built, written: Effect.Effect<void, StoreError>) => {
    const span = batchSpan(tracing, Spans.commit, built.answers.map(([w]) => w.req.trace))
    if (span === undefined) return written
    span.attribute("ankusa.hooks", built.transitions.length)
    return Effect.onExit(written, (exit) => Effect.sync(() => span.end(nowNanos(), exit)))
  }

  /** Quota refusals answered at once (TEN-2: before anything of the tenant is written); what a callback threw. */
  const refuseOverQuota = (built: Built, thrown: unknown) => {
    for (const [w, max] of built.overQuota) thrown ??= d.answerAll(w.items, answerAs(Exit.fail(new TenantQuota({ max }))))
    return thrown
  }

  /** The batch with no read to make, or undefined when it needs one (see the module header). */
  const plainBatch = (items: ReadonlyArray<Item>, now: number): Effect.Effect<void, StoreError> | undefined => {
    const refused = state.refused.size > 0
    const ords = new Map<string, number>()
    const fresh: Array<Owner> = []
    // The endpoints of the tenants whose hooks ask for theirs, when the cache holds them all.
    let lists: Map<number, ReadonlyArray<Endpoint>> | undefined
    for (const it of items) {
      const req = it.req
      if (req.idempotencyKey !== null) return undefined
      const tenant = req.tenantId ?? DEFAULT_TENANT
      const ord = cache.get(tenant)
      if (ord === undefined || (refused && state.refused.has(tenant))) return undefined
      if (wantsEndpoints(req.sinks)) {
        const l = d.endpoints._tag === "Some" ? d.endpoints.value.cached(ord) : undefined
        if (l === undefined) return undefined
        ;(lists ??= new Map()).set(ord, l)
      }
      ords.set(tenant, ord)
      fresh.push({ items: [it], req, tenant })
    }
    const built = buildHooks(fresh, ords, {
      fanOut: lists === undefined ? undefined : fanFrom(lists),
      ordered: lists === undefined ? undefined : orderedFrom(lists),
      held: d.wake.held(now),
      nextSeq: state.nextSeq,
      node: state.node,
      now,
      dedupeWindowMs: o.dedupeWindowMs,
      admit: d.quota?.()
    })
    const thrown = refuseOverQuota(built, undefined)
    if (built.transitions.length === 0) return d.logThrown(thrown)
    return write(items.length, now, state.nextOrd, ords, false, built, built.extra, thrown)
  }

  /** The batch that reads first: earlier hooks of its idempotency keys, uncached tenants, endpoints. */
  const readingBatch = (items: ReadonlyArray<Item>, now: number): Effect.Effect<void, StoreError> =>
    Effect.gen(function* () {
      // TEN-5 step 1: in the commit section, so no batch after the refusal holds the tenant (setRefused).
      const [kept, erased] = splitRefused(items, state.refused)
      let thrown: unknown = undefined
      for (const [it, tenant] of erased) thrown ??= d.answerAll([it], answerAs(Exit.fail(new TenantErased({ tenant }))))
      items = kept

      // Idempotency: requests sharing (tenant, key) in this batch share one hook; one multi-get finds earlier ones.
      const { owners, keyed } = ownersOf(items)
      const duplicates = new Set<Owner>()
      if (keyed.length > 0) {
        const found = yield* store.multiGet("index", keyed.map((e) => e.key))
        for (let i = 0; i < keyed.length; i++) {
          const first = Dedupe.live(found[i], now)
          if (first === undefined) continue
          duplicates.add(keyed[i]!.owner)
          thrown ??= d.answerAll(keyed[i]!.owner.items, answerAs(Exit.succeed({ id: first.id, seq: first.seq, duplicate: true })))
        }
      }
      const fresh = owners.filter((w) => !duplicates.has(w))

      // TEN-1 §2: the batch's distinct tenants; a miss is one multi-get of `?n`.
      const ords = new Map<string, number>()
      const misses = new Set<string>()
      for (const w of fresh) {
        if (ords.has(w.tenant) || misses.has(w.tenant)) continue
        const hit = cache.get(w.tenant)
        if (hit !== undefined) ords.set(w.tenant, hit)
        else misses.add(w.tenant)
      }
      const uncached = [...misses]
      let nextOrd = state.nextOrd
      const allocations: Array<Op> = []
      if (uncached.length > 0) {
        const found = yield* store.multiGet("tenants", uncached.map(Keys.tenantOrdKey))
        uncached.forEach((tenant, i) => {
          const v = found[i]
          if (v !== undefined) ords.set(tenant, Keys.decodeU32(v))
          // New tenants in first-sight order; past the cap they get nothing (an existing one is never refused).
          else if (nextOrd <= o.tenantsMax) {
            ords.set(tenant, nextOrd)
            allocations.push(...TenantOrds.allocate(tenant, nextOrd))
            nextOrd++
          }
        })
      }

      // TEN-2: a tenant at its queued-bytes quota is refused here, before anything of it is written.
      const lists = yield* endpointLists(d.endpoints, fresh, ords)
      const built = buildHooks(fresh, ords, {
        fanOut: lists === undefined ? undefined : fanFrom(lists),
        ordered: lists === undefined ? undefined : orderedFrom(lists),
        held: d.wake.held(now),
        nextSeq: state.nextSeq,
        node: state.node,
        now,
        dedupeWindowMs: o.dedupeWindowMs,
        admit: d.quota?.()
      })
      for (const w of built.refused) thrown ??= d.answerAll(w.items, answerAs(Exit.fail(new TenantLimit({ max: o.tenantsMax }))))
      thrown = refuseOverQuota(built, thrown)
      if (built.transitions.length === 0) return yield* d.logThrown(thrown)

      const extra = built.extra
      extra.push(...allocations)
      if (nextOrd !== state.nextOrd) extra.push(TenantOrds.nextOrdOp(nextOrd))
      yield* write(items.length, now, nextOrd, ords, true, built, extra, thrown)
    })

  /** The batch's commit: the caller holds the commit section and answers the items a failure leaves unanswered. */
  return (items: ReadonlyArray<Item>): Effect.Effect<void, StoreError> =>
    Effect.clockWith((clock: Clock.Clock) => {
      const now = clock.currentTimeMillisUnsafe()
      return plainBatch(items, now) ?? readingBatch(items, now)
    })
}
