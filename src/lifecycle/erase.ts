/**
 * The `Erase` service (TEN-5; docs/storage.md "Erasing a tenant"): starts a
 * tenant's erase job (step 1, the refusal, in the Writer's commit section
 * with the job's record and its audit row), runs its steps 2-7 in a scoped
 * fiber (erase-steps.ts), resumes every unfinished job at start, reports
 * progress, and lifts the refusal of a finished one.
 */
import { Clock, Context, Data, Effect, Fiber, Layer, Option, Semaphore } from "effect"
import * as E from "../domain/erase.js"
import { erasureKey, familyDataRange, Families, keyAfter } from "../domain/keys.js"
import type { Op } from "../domain/ops.js"
import { Endpoints } from "../queue/endpoints.js"
import { Limits } from "../queue/limits.js"
import { Queue } from "../queue/queue.js"
import { Tenants, type TenantNotFound } from "../queue/tenants.js"
import { Writer } from "../queue/writer.js"
import { Store, type StoreError } from "../store/store.js"
import { Archive } from "./archive.js"
import { Audit } from "./audit.js"
import { runUnit, type StepContext, type StepError } from "../queue/erase-steps.js"
import { Quarantine } from "./quarantine.js"

/** Rows per synced batch of an erase step. */
export const ERASE_CHUNK = 500
/** How long step 2 waits for the tenant's inflight rows to settle before taking them back. */
export const ERASE_INFLIGHT_TIMEOUT_MS = 60_000
/** Step 2's poll interval. */
export const ERASE_POLL_MS = 100

/** No erase job for this tenant id. */
export class EraseNotFound extends Data.TaggedError("EraseNotFound")<{ readonly tenant: string }> {}

/** The refusal can be lifted only once the job is done. */
export class EraseRunning extends Data.TaggedError("EraseRunning")<{ readonly tenant: string; readonly step: number }> {}

export interface EraseOptions {
  readonly chunk?: number
  readonly inflightTimeoutMs?: number
  readonly pollMs?: number
  /** Called after every committed unit of work (tests stop a child there). */
  readonly afterUnit?: (job: E.EraseJob) => Effect.Effect<void>
  /** Step 6's plug-in for the tenant families added later (erase-steps.ts). */
  readonly moreTenantRows?: StepContext["moreTenantRows"]
}

export interface EraseShape {
  /** Step 1 and the job's start; an existing job (running or done) is returned as it is. */
  readonly start: (tenant: string, actor: string) => Effect.Effect<E.EraseJob, TenantNotFound | StoreError>
  readonly status: (tenant: string) => Effect.Effect<E.EraseJob, EraseNotFound | StoreError>
  /** Delete the finished job's record with an audit row: the id is accepted again and gets a new ordinal. */
  readonly lift: (tenant: string, actor: string) => Effect.Effect<E.EraseJob, EraseNotFound | EraseRunning | StoreError>
  /** Resolves when the tenant's job is done (tests). */
  readonly awaitDone: (tenant: string) => Effect.Effect<E.EraseJob, EraseNotFound | StoreError>
}

export class Erase extends Context.Service<Erase, EraseShape>()("ankusa/Erase") {}

export const make = (options: EraseOptions = {}) =>
  Effect.gen(function* () {
    const store = yield* Store
    const writer = yield* Writer
    const queue = yield* Queue
    const archive = yield* Archive
    const quarantine = yield* Quarantine
    const audit = yield* Audit
    const tenants = yield* Tenants
    const scope = yield* Effect.scope
    const ctx: StepContext = {
      store,
      queue,
      archive,
      quarantine,
      chunk: Math.max(1, options.chunk ?? ERASE_CHUNK),
      inflightTimeoutMs: options.inflightTimeoutMs ?? ERASE_INFLIGHT_TIMEOUT_MS,
      pollMs: options.pollMs ?? ERASE_POLL_MS,
      now: () => Date.now(),
      limits: Option.getOrUndefined(yield* Effect.serviceOption(Limits)),
      endpoints: Option.getOrUndefined(yield* Effect.serviceOption(Endpoints)),
      moreTenantRows: options.moreTenantRows ?? (() => Effect.succeed([] as ReadonlyArray<Op>))
    }
    const section = yield* Semaphore.make(1)
    const running = new Map<string, Fiber.Fiber<E.EraseJob, StepError>>()

    const read = (tenant: string) => Effect.map(store.get("tenants", erasureKey(tenant)), E.decodeJob)

    const runJob = (first: E.EraseJob) =>
      Effect.gen(function* () {
        // Fenced before anything else: after a restart the pipeline may already be claiming.
        yield* queue.fence(first.ord)
        let job = first
        while (!E.isDone(job)) {
          const before = job
          // Before the tombstone (steps 3 to 6 deleted every body): what the store still keeps of deleted rows goes.
          if (job.step === E.TOMBSTONE_STEP) yield* store.scrub
          job = yield* runUnit(ctx, job)
          if (job !== before && options.afterUnit !== undefined) yield* options.afterUnit(job)
        }
        yield* Effect.logInfo("tenant erased").pipe(Effect.annotateLogs({ tenant: job.tenant, job: job.id, counts: job.counts }))
        return job
      }).pipe(
        Effect.tapError((e) => Effect.logError("erase job failed; it resumes at the next start", e).pipe(Effect.annotateLogs({ tenant: first.tenant })))
      )

    const fork = (job: E.EraseJob) =>
      Effect.gen(function* () {
        const fiber = yield* Effect.forkIn(runJob(job), scope)
        running.set(job.tenant, fiber)
      })

    const start = (tenant: string, actor: string) =>
      section.withPermits(1)(
        Effect.gen(function* () {
          const existing = yield* read(tenant)
          if (existing !== undefined) return existing
          const ord = yield* tenants.ord(tenant)
          const job = E.started(tenant, ord, actor, yield* Clock.currentTimeMillis)
          const row = yield* audit.stage({ actor, tenants: [tenant], action: "tenant.erase", params: { job: job.id, tenant } })
          // Step 1: the record, its audit row and the refusal, in the Writer's section.
          yield* writer.refuse(tenant, [E.jobOp(job), row])
          if (options.afterUnit !== undefined) yield* options.afterUnit(job)
          yield* fork(job)
          return job
        })
      )

    const status = (tenant: string) =>
      Effect.flatMap(read(tenant), (j) => (j === undefined ? Effect.fail(new EraseNotFound({ tenant })) : Effect.succeed(j)))

    const lift = (tenant: string, actor: string) =>
      section.withPermits(1)(
        Effect.gen(function* () {
          const job = yield* status(tenant)
          if (!E.isDone(job)) return yield* new EraseRunning({ tenant, step: job.step })
          const row = yield* audit.stage({ actor, tenants: [tenant], action: "tenant.lift", params: { job: job.id, tenant } })
          yield* writer.lift(tenant, [E.liftOp(tenant), row])
          running.delete(tenant)
          return job
        })
      )

    const awaitDone = (tenant: string) =>
      Effect.gen(function* () {
        const fiber = running.get(tenant)
        if (fiber !== undefined) yield* Fiber.join(fiber).pipe(Effect.ignore)
        return yield* status(tenant)
      })

    // Resume every unfinished job (the records are bounded by the tenants ever allocated).
    const range = familyDataRange(Families.erasures)
    let lo = range.lo
    for (;;) {
      const page = yield* store.scan("tenants", { lo, hi: range.hi }, { limit: 1_000 })
      for (const e of page) {
        const job = E.decodeJob(e.value)
        if (job !== undefined && !E.isDone(job)) {
          yield* queue.fence(job.ord)
          yield* fork(job)
        }
      }
      if (page.length < 1_000) break
      lo = keyAfter(page[page.length - 1]!.key)
    }

    return { start, status, lift, awaitDone } satisfies EraseShape
  })

export const layer = (options: EraseOptions = {}) => Layer.effect(Erase, make(options))
