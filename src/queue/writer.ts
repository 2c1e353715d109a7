/**
 * The Writer (TEN-1 §2, §11): it batches concurrent ingest requests and
 * commits each batch, one at a time, as one synced write. It owns seq
 * assignment, hook ids, idempotency keys and tenant ordinal allocation, and
 * the bounded tenant id → ord cache. See docs/architecture.md "The Writer".
 */
import { Cause, Context, Data, Effect, Exit, Fiber, Layer, Metric, Option, Semaphore } from "effect"
import * as HookId from "../domain/hook-id.js"
import type { TraceContext } from "../domain/trace-context.js"
import * as Keys from "../domain/keys.js"
import { type Op, put } from "../domain/ops.js"
import * as TenantOrds from "../domain/tenants.js"
import { TenantErased, TenantLimit } from "../domain/tenants.js"
import { overQuota, TenantQuota } from "../domain/admission.js"
import { Store, type StoreError, type StoreShape } from "../store/store.js"
import { tenants as tenantsGauge } from "../observability/delivery-metrics.js"
import * as WriterMetrics from "../observability/writer-metrics.js"
import { tracingOf } from "../observability/tracing.js"
import { Limits } from "./limits.js"
import { QueuedBytes } from "./queued-bytes.js"
import { resolveOptions, type WriterOptions } from "./writer-options.js"
import { Wake } from "./wake.js"
import { Endpoints } from "./endpoints.js"
import { Queue } from "./queue.js"
import { type Admit, answerItem, invalidity, type Item, refusals, refusedTenants } from "./writer-batch.js"
import { makeCommit } from "./writer-commit.js"
import { allocateOrd } from "./writer-tenants.js"

export interface IngestRequest {
  /** null means "default". */
  readonly tenantId: string | null
  readonly sourceId: string
  /** Sink names by fan-out position (`sink::16`). */
  readonly sinks: ReadonlyArray<string>
  readonly body: Uint8Array
  readonly contentType: string
  readonly headers: Readonly<Record<string, string>>
  readonly idempotencyKey: string | null
  /** Whether the hook carries an archive obligation (`?a`). */
  readonly archive: boolean
  /** The event type the source's rule found; filters the tenant's endpoints. */
  readonly eventType?: string | undefined
  /** The ordering key the source's rule found (docs/delivery.md "Ordered delivery"). */
  readonly orderingKey?: string | undefined
  /** The route sinks that order hooks by key (`sinks[].ordered`); endpoints say so themselves. */
  readonly orderedSinks?: ReadonlySet<string> | undefined
  /** The ingest span's context (tracing on): kept in the envelope, linked from the commit's span. */
  readonly trace?: TraceContext | undefined
}

export interface IngestResult {
  readonly id: string
  readonly seq: number
  /** true: an earlier hook answered for this idempotency key; nothing was queued. */
  readonly duplicate: boolean
}

/** The request queue is full (requests or bytes): answer 503 at once rather than wait. */
export class Overloaded extends Data.TaggedError("Overloaded")<{ readonly reason: "requests" | "bytes" }> {}

/** The Writer is shutting down and takes no new requests. */
export class WriterClosed extends Data.TaggedError("WriterClosed")<{}> {}

/** A request the store cannot key (the edge validates first; this is the last fence). */
export class InvalidIngest extends Data.TaggedError("InvalidIngest")<{ readonly reason: string }> {}

export type SubmitError = TenantLimit | TenantQuota | TenantErased | Overloaded | WriterClosed | InvalidIngest | StoreError

export interface WriterShape {
  /** Resolves only after the synced commit that holds the hook (or its first copy, for a duplicate). */
  readonly submit: (req: IngestRequest) => Effect.Effect<IngestResult, SubmitError>
  /**
   * `submit` without a fiber, for the HTTP ingest listener: `done` is called exactly once, with what
   * `submit` would give, after the synced commit (or at once for a refusal, possibly before `enqueue`
   * returns). `done` must not throw and must not block: it runs in the batch's answer loop.
   */
  readonly enqueue: (req: IngestRequest, done: (exit: Exit.Exit<IngestResult, SubmitError>) => void) => void
  /** Requests taken by nobody yet (a gauge of back-pressure; tests use it to line up one batch). */
  readonly queued: Effect.Effect<number>
  /**
   * The store takes the Writer's writes: true unless the last commit failed in the store (a full
   * disk, an I/O error) and a probe now fails too (an unsynced rewrite of `m:next_seq` with its
   * value, in the commit section). `/readyz` answers 503 `store_unavailable` while it is false.
   */
  readonly writable: Effect.Effect<boolean>
  /**
   * Run `effect` with no ingest commit in between: the Writer's commit section
   * (a batch's reads through its write). For a read-then-write elsewhere that an
   * ingest commit must not split (the dedupe sweep). Keep it short: ingest waits;
   * and never submit from inside it (it would wait for itself).
   */
  readonly exclusive: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** The tenant's ordinal if the Writer's cache holds it (no store read): admission's quota check at the edge. */
  readonly ordOf: (tenant: string) => number | undefined
  /** TEN-5: the tenant id is refused (in memory, from the `?r` rows at start; no store read). */
  readonly erased: (tenantId: string) => boolean
  /** TEN-5: commit `ops` synced in the commit section, then refuse (lift: accept again) the id: no later batch holds it. */
  readonly refuse: (tenantId: string, ops: ReadonlyArray<Op>) => Effect.Effect<void, StoreError>
  readonly lift: (tenantId: string, ops: ReadonlyArray<Op>) => Effect.Effect<void, StoreError>
  /** The tenant's ordinal, allocated (synced) if it has none: a tenant endpoint made before the tenant's first hook. */
  readonly tenantOrd: (tenant: string) => Effect.Effect<number, TenantLimit | TenantErased | StoreError>
}

export class Writer extends Context.Service<Writer, WriterShape>()("ankusa/Writer") {}

export { Defaults, Ranges, type WriterOptions } from "./writer-options.js"


/** Where seqs and ordinals continue: the persisted counters, never below the highest hook (a store written before `m:next_seq`). */
const loadState = (store: StoreShape) =>
  Effect.gen(function* () {
    const format = yield* store.format
    if (format !== 3) return yield* Effect.die(new Error(`the Writer needs a format 3 store; this one is format ${format} (migrate first)`))
    const [seqV, ordV, nodeV] = yield* store.multiGet("default", [Keys.Meta.nextSeq, Keys.Meta.nextOrd, Keys.Meta.nodeId])
    const lastHook = yield* store.first("hooks", Keys.familyDataRange(Keys.Families.hooks), { reverse: true })
    const nextSeq = Math.max(seqV === undefined ? 1 : Keys.decodeU64(seqV), lastHook === undefined ? 1 : Keys.decodeHookKey(lastHook.key) + 1)
    let node = nodeV
    if (node === undefined) {
      node = HookId.freshNodeId()
      yield* store.write([put("default", Keys.Meta.nodeId, node)], { sync: true })
    }
    return { nextSeq, nextOrd: TenantOrds.nextOrdOf(ordV), node: HookId.nodeHex(node), refused: yield* refusedTenants(store) }
  })

export const make = (options: WriterOptions = {}) =>
  Effect.gen(function* () {
    const o = yield* resolveOptions(options)
    const store = yield* Store
    const wake = yield* Wake
    const [quota, endpoints, metricsContext] = [yield* quotaCheck, yield* Effect.serviceOption(Endpoints), yield* Effect.context<never>()]
    // Advanced only after a commit succeeds: a failed commit allocates nothing.
    const state = yield* loadState(store)
    // `ankusa_tenants` from boot, and then from each commit that allocates (before its answers).
    yield* Metric.update(tenantsGauge, state.nextOrd - 1)
    // TEN-1 §2: tenant id → ord, written only here and only after a commit; cleared whole when full.
    const cache = new Map<string, number>()
    // The requests waiting for a batch, oldest first from `head` (at most `queueCapacity`), and their body bytes.
    let pending: Array<Item> = []
    let head = 0
    const waiting = () => pending.length - head
    let queuedBytes = 0
    let closing = false
    const section = yield* Semaphore.make(1)
    // Set by a commit the store failed, cleared by one it took (see `writable`); `ankusa_store_writable` mirrors it.
    let storeFailed = false
    const markStore = (failed: boolean) =>
      Effect.suspend(() => ((storeFailed = failed), Metric.update(WriterMetrics.storeWritable, failed ? 0 : 1)))
    yield* markStore(false)

    // One throwing callback must not keep the others of its batch from their answers.
    const answerAll = (items: ReadonlyArray<Item>, exit: (i: number) => Exit.Exit<IngestResult, SubmitError>): unknown => {
      let thrown: unknown = undefined
      for (let i = 0; i < items.length; i++) {
        try {
          answerItem(items[i]!, exit(i))
        } catch (e) {
          thrown ??= e
        }
      }
      return thrown
    }
    const logThrown = (thrown: unknown) => (thrown === undefined ? Effect.void : Effect.logError("writer: an answer callback threw", thrown))
    const answer = (items: ReadonlyArray<Item>, exit: Exit.Exit<IngestResult, SubmitError>) =>
      Effect.suspend(() => logThrown(answerAll(items, () => exit)))

    const storeTook = () => storeFailed && ((storeFailed = false), WriterMetrics.storeWritable.updateUnsafe(1, metricsContext))
    const tracing = yield* tracingOf
    const promote = Option.getOrUndefined(yield* Effect.serviceOption(Queue))?.promote
    const commit = makeCommit({ store, wake, endpoints, quota, state, cache, options: o, context: metricsContext, answerAll, logThrown, storeTook, tracing, promote })

    // Every request of the batch gets an answer: a failed commit fails them all (completed ones stay completed).
    const run = (items: ReadonlyArray<Item>) =>
      section.withPermits(1)(commit(items)).pipe(
        Effect.catchCause((cause) =>
          Effect.logError("writer: batch failed", Cause.pretty(cause)).pipe(
            Effect.andThen(Option.exists(Cause.findErrorOption(cause), (e) => e._tag === "StoreError") ? markStore(true) : Effect.void),
            Effect.andThen(answer(items, Exit.failCause(cause)))
          )
        )
      )

    /** The oldest requests up to `maxBatch` and within `maxBatchBytes` (at least one); the rest wait for the next batch. */
    const take = (): Array<Item> => {
      let bytes = 0
      let n = 0
      const max = Math.min(waiting(), o.maxBatch)
      while (n < max && (n === 0 || bytes + pending[head + n]!.bytes <= o.maxBatchBytes)) bytes += pending[head + n++]!.bytes
      queuedBytes -= bytes
      if (head === 0 && n === pending.length) {
        const all = pending
        pending = []
        return all
      }
      const items = pending.slice(head, head + n)
      head += n
      // A backlog is taken from its head in O(batch); the array is cut down once half of it is taken.
      if (head === pending.length) (pending = []), (head = 0)
      else if (head * 2 >= pending.length) (pending = pending.slice(head)), (head = 0)
      return items
    }

    // The batch loop, on plain timers rather than a fiber on a queue (docs/architecture.md "The Writer"):
    // the first request waits `lingerMs` for others (or the next turn with 0), then one batch at a time
    // is committed in its own fiber; the next starts when it has answered. A batch once taken is
    // committed and answered, whatever happens to the Writer's scope meanwhile.
    const runFork = Effect.runForkWith(metricsContext)
    let armed = false
    let busy: Fiber.Fiber<void> | undefined
    const kick = () => {
      if (armed || busy !== undefined || closing || waiting() === 0) return
      armed = true
      if (o.lingerMs > 0 && waiting() < o.maxBatch) setTimeout(start, o.lingerMs)
      else setImmediate(start)
    }
    const start = () => {
      armed = false
      if (busy !== undefined || closing || waiting() === 0) return
      const fiber = runFork(run(take()))
      busy = fiber
      fiber.addObserver(() => {
        busy = undefined
        kick()
      })
    }

    // Shutdown: refuse new requests, let the batch in flight finish, then commit what is queued.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        closing = true
        if (busy !== undefined) yield* Fiber.await(busy)
        while (waiting() > 0) yield* run(take())
      })
    )

    /** A refusal before the queue, or undefined once the request is queued. Synchronous: nothing slips in between `closing` and the queue. */
    const offer = (req: IngestRequest, done: Item["done"]): SubmitError | undefined => {
      if (closing) return new WriterClosed()
      const bad = invalidity(req)
      if (bad !== undefined) return new InvalidIngest({ reason: bad })
      const bytes = req.body.length
      // A request larger than the byte bound still goes through an empty queue.
      if (queuedBytes > 0 && queuedBytes + bytes > o.queueBytes) return new Overloaded({ reason: "bytes" })
      if (waiting() >= o.queueCapacity) return new Overloaded({ reason: "requests" })
      pending.push({ req, done, bytes })
      queuedBytes += bytes
      kick()
      return undefined
    }

    const enqueue = (req: IngestRequest, done: Item["done"]): void => {
      const refused = offer(req, done)
      if (refused !== undefined) done(Exit.fail(refused))
    }

    // Interrupting the caller does not withdraw a queued request: it is committed with its batch.
    // A resume runs the caller at once, inside the Writer's answer loop: the caller yields first,
    // so the rest of it runs on its own turn, after the batch's other answers and the wake.
    const submit = (req: IngestRequest): Effect.Effect<IngestResult, SubmitError> =>
      Effect.callback<IngestResult, SubmitError>((resume) => enqueue(req, resume)).pipe(Effect.onExit(() => Effect.yieldNow))

    const queued = Effect.sync(waiting)

    const probe = Effect.suspend(() => store.write([put("default", Keys.Meta.nextSeq, Keys.encodeU64(state.nextSeq))], { sync: false }))
    const writable = Effect.suspend(() =>
      storeFailed
        ? section.withPermits(1)(probe).pipe(
            Effect.andThen(markStore(false)),
            Effect.as(true),
            Effect.catch(() => Effect.succeed(false))
          )
        : Effect.succeed(true)
    )

    const ordOf = (tenant: string) => cache.get(tenant), erased = (tenantId: string) => state.refused.has(tenantId)
    const setRefused = refusals(section.withPermits(1), store, state.refused, cache)
    const exclusive = section.withPermits(1), tenantOrd = allocateOrd({ section: exclusive, store, state, cache, tenantsMax: o.tenantsMax })
    return { submit, enqueue, queued, writable, exclusive, ordOf, erased, refuse: setRefused(true), lift: setRefused(false), tenantOrd } satisfies WriterShape
  })

/**
 * The quota check (with `QueuedBytes` and `Limits` in the context; none without them): for each batch,
 * an `Admit` that refuses a hook whose tenant's queued bytes, with the batch's hooks of it taken before,
 * are at its `maxQueuedBytes`.
 */
const quotaCheck = Effect.gen(function* () {
  const bytes = yield* Effect.serviceOption(QueuedBytes)
  const limits = yield* Effect.serviceOption(Limits)
  if (Option.isNone(bytes) || Option.isNone(limits)) return undefined
  const figures = bytes.value
  const ingestOf = limits.value.ingestOf
  return (): Admit => {
    const added = new Map<number, number>()
    return (w, ord, size) => {
      const max = ingestOf(w.tenant).maxQueuedBytes
      if (max === 0) return undefined
      const queued = figures.of(ord) + (added.get(ord) ?? 0)
      if (overQuota(queued, max)) return max
      added.set(ord, (added.get(ord) ?? 0) + size)
      return undefined
    }
  }
})

/** The Writer over the `Store`, signalling `Wake` after each commit; closing its scope drains the queue (see `make`). */
export const layer = (options: WriterOptions = {}): Layer.Layer<Writer, StoreError, Store | Wake> =>
  Layer.effect(Writer, make(options))
