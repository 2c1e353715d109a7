/**
 * The dispatch pipeline (TEN-1 §5; product.md "Delivery"; docs/delivery.md,
 * docs/architecture.md "The pipeline"): a tick that claims due rows tenant by
 * tenant from the active index, the marker cleanup, and the sink calls whose
 * outcomes are committed in small batches.
 *
 * Durability: claims and outcomes are unsynced writes. Each is one atomic
 * batch, so a crash can only lose whole transitions, and every state a lost
 * transition leaves behind leads back to a delivery: a lost claim leaves the
 * row due; a claim that survives without its outcome is `?F`, which boot
 * recovery (`Queue.recoverInflight`) returns to due. The worst a crash does is
 * deliver a row again (at-least-once; receivers dedupe by `webhook-id`).
 */
import { Cause, Clock, Context, Duration, Effect, Fiber, FiberSet, Latch, Layer, Metric, Queue as Q, Random, Schedule, Semaphore } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import { decodeEnvelope, type Envelope } from "../domain/envelope.js"
import * as K from "../domain/keys.js"
import * as Retry from "../domain/retry-schedule.js"
import { parseSecret } from "../domain/signature.js"
import * as M from "./delivery-metrics.js"
import { type ActiveTenant, type DueEntry, Queue } from "./queue.js"
import * as SinkClient from "./sink-client.js"
import { type SinkOptions } from "./sink-client.js"
import { Store, type StoreError } from "./store.js"

export type { SinkOptions } from "./sink-client.js"

// ---------------------------------------------------------------------------
// Options (docs/configuration.md, `pipeline.*` and `sinks[]`)

export interface PipelineOptions {
  /** Dispatch tick period (ms). */
  readonly tickMs: number
  /** Rows claimed per tick at most, across tenants. */
  readonly claimLimit: number
  /** Bytes (delivery row sizes) claimed per tick at most; a tenant's first row is taken even past it. */
  readonly claimBytes: number
  /** Rows claimed and not yet settled, across sinks: bounds sink calls and envelopes in memory. */
  readonly maxInflight: number
  /** Active tenants one tick looks at (TEN-1 §5 `activeTenants` limit). */
  readonly activeTenants: number
  /** Outcomes committed together in one write at most. */
  readonly commitBatch: number
  /** Shutdown: how long inflight sink calls may finish before their rows are left to boot recovery. */
  readonly graceMs: number
  /** The sinks by name, as hook envelopes name them. */
  readonly sinks: ReadonlyArray<SinkOptions>
}

export const Defaults = {
  tickMs: 100,
  claimLimit: 1_000,
  claimBytes: 64 * 1024 * 1024,
  maxInflight: 256,
  activeTenants: 4_096,
  commitBatch: 256,
  graceMs: 10_000
} as const satisfies Omit<PipelineOptions, "sinks">

/** Inclusive ranges, checked when the layer is built. */
export const Ranges: Readonly<Record<keyof typeof Defaults, readonly [number, number]>> = {
  tickMs: [1, 60_000],
  claimLimit: [1, 100_000],
  claimBytes: [1, 1024 * 1024 * 1024],
  maxInflight: [1, 100_000],
  activeTenants: [1, 100_000],
  commitBatch: [1, 10_000],
  graceMs: [0, 600_000]
}

/** Tenants a tick's first marker scan asks for (it scans again for up to the rest only if they leave rows to claim). */
export const FIRST_SCAN_TENANTS = 16
/** A wake never starts ticks closer together than this, so a busy Writer cannot spin the tick. */
export const MIN_TICK_GAP_MS = 5
/** Backoff between attempts of an outcome commit that failed (the rows stay `?F` meanwhile). */
export const COMMIT_RETRY_MS = 200
/** An outcome batch short of `commitBatch` waits this long for more before it is written. */
export const COMMIT_LINGER_MS = 2
/**
 * A commit wakes the tick only once at least this share of `maxInflight` is free (at least one
 * slot), so a drain claims in batches instead of ticking for every outcome; below it the
 * periodic tick still runs.
 */
export const WAKE_FREE_FRACTION = 0.5

export type Input = Partial<Omit<PipelineOptions, "sinks">> & { readonly sinks: ReadonlyArray<SinkOptions> }

const resolve = (input: Input): Effect.Effect<PipelineOptions> =>
  Effect.suspend(() => {
    const out = { ...Defaults, ...input } as PipelineOptions
    for (const [key, [lo, hi]] of Object.entries(Ranges) as Array<[keyof typeof Defaults, readonly [number, number]]>) {
      const v = out[key]
      if (!Number.isInteger(v) || v < lo || v > hi) return Effect.die(new Error(`pipeline option ${key} = ${v} is outside ${lo}..${hi}`))
    }
    for (const s of out.sinks) {
      if (!Number.isInteger(s.concurrency) || s.concurrency < 1) return Effect.die(new Error(`sink ${s.name}: concurrency ${s.concurrency} < 1`))
      if (!(s.timeoutMs > 0)) return Effect.die(new Error(`sink ${s.name}: timeoutMs ${s.timeoutMs} <= 0`))
      if (s.secret !== undefined && parseSecret(s.secret) === undefined) return Effect.die(new Error(`sink ${s.name}: secret is not whsec_<base64>`))
    }
    return Effect.succeed(out)
  })

// ---------------------------------------------------------------------------
// The service

export interface TickReport {
  /** Tenants visited, in visit (marker) order. */
  readonly visited: ReadonlyArray<number>
  /** Rows claimed, in claim order. */
  readonly claimed: ReadonlyArray<K.DueRef>
}

export interface PipelineShape {
  /** Tick as soon as possible (the Writer may call it after a commit). Never blocks. */
  readonly wake: Effect.Effect<void>
  /** Run one tick now and report it (tests; ticks never overlap). */
  readonly tick: Effect.Effect<TickReport, StoreError>
  /** Rows claimed whose outcome is not committed yet. */
  readonly inflight: Effect.Effect<number>
}

export class Pipeline extends Context.Service<Pipeline, PipelineShape>()("ankusa/Pipeline") {}

interface Settled {
  readonly transition: Deliveries.Transition
  readonly sink: string
  readonly outcome: M.Outcome
}

interface Claimed {
  readonly entry: DueEntry
  readonly ref: K.InflightRef
}

interface Job {
  readonly claimed: Claimed
  readonly env: Envelope
  readonly name: string
}

interface Sink {
  readonly options: SinkOptions
  readonly key: Uint8Array | undefined
  /** Its keep-alive connections (`concurrency` at most). */
  readonly transport: SinkClient.Transport
  /** Claimed rows waiting for a call, oldest first. */
  readonly waiting: Array<Job>
  /** What cuts each call in flight (`concurrency` at most). */
  readonly calls: Set<() => void>
  readonly latency: (seconds: number) => void
}

const refOf = (d: DueEntry): K.InflightRef => ({ ord: d.ref.ord, seq: d.ref.seq, sink: d.ref.sink })

/** Up to `n` queued items without waiting: none when the queue is empty (a take of at least one would wait). */
const takeQueued = <A>(queue: Q.Queue<A>, n: number): Effect.Effect<Array<A>> =>
  Effect.suspend(() => (n <= 0 || Q.sizeUnsafe(queue) === 0 ? Effect.succeed([]) : Q.takeBetween(queue, 1, n)))

export const make = (input: Input) =>
  Effect.gen(function* () {
    const o = yield* resolve(input)
    const store = yield* Store
    const queue = yield* Queue
    // Where the per-call metric recorders write (the metric registry of this layer's context).
    const context = yield* Effect.context<never>()

    // Per sink, a FIFO of claimed rows waiting for a call, started `concurrency` at a time: the
    // sink's concurrency bound, with no fiber per row (a call is a callback chain; only a call that
    // did not deliver runs an effect). Unbounded as a queue, bounded by construction: every job is
    // a claimed row, and claims stop at `maxInflight` rows not yet settled.
    const sinks = new Map<string, Sink>()
    for (const s of o.sinks) {
      sinks.set(s.name, {
        options: s,
        key: s.secret === undefined ? undefined : parseSecret(s.secret),
        transport: SinkClient.transport(s),
        waiting: [],
        calls: new Set(),
        latency: M.latencyRecorder(s.name, context)
      })
    }
    const clock = yield* Clock.Clock
    const now = () => clock.currentTimeMillisUnsafe()
    // Registered first, so it runs last: after the shutdown below has cut or finished every call.
    yield* Effect.addFinalizer(() => Effect.sync(() => {
      for (const sink of sinks.values()) SinkClient.close(sink.transport)
    }))

    // Outcome counter updaters, built once per (sink, outcome) instead of per batch. Bounded: only
    // the configured sinks (and "unknown") are cached, times four outcomes; other names are built per use.
    const outcomeMetrics = new Map<string, (n: number) => void>()
    const outcomeMetric = (sink: string, outcome: M.Outcome) => {
      if (!sinks.has(sink) && sink !== "unknown") return M.outcomeRecorder(sink, outcome, context)
      const k = `${outcome}\u0000${sink}`
      let m = outcomeMetrics.get(k)
      if (m === undefined) outcomeMetrics.set(k, m = M.outcomeRecorder(sink, outcome, context))
      return m
    }

    // TEN-1 §5: per-tenant scan floors, memory only; evicted when a tenant drains.
    const cursors = new Map<number, number>()
    // Claimed rows whose outcome is not committed: the global inflight bound.
    let inflight = 0
    let stopping = false

    // Jobs handed to the sink workers and not finished (queued or calling); `idle` is open at 0.
    let busy = 0
    const idle = yield* Latch.make(true)
    // The effects of calls that did not deliver (and of defects), interrupted at shutdown.
    const workers = yield* FiberSet.make<void, never>()
    const runWorker = yield* FiberSet.runtime(workers)<never>()
    // Set at shutdown once the grace period is over: no call starts after it.
    let cut = false
    const outcomes = yield* Q.unbounded<Settled>()
    const wakeups = yield* Q.sliding<void>(1)
    const ticking = yield* Semaphore.make(1)

    // --- outcomes ----------------------------------------------------------

    const commit = (items: ReadonlyArray<Settled>): Effect.Effect<void> =>
      store.write(Deliveries.batch(items.map((i) => i.transition)), { sync: false }).pipe(
        Effect.tapError((e) => Effect.logError("pipeline: outcome commit failed; retrying", e.message)),
        Effect.retry({ while: () => !stopping, schedule: Schedule.spaced(Duration.millis(COMMIT_RETRY_MS)) }),
        Effect.matchEffect({
          onFailure: (e) => Effect.logError("pipeline: outcomes left inflight for boot recovery", { rows: items.length, error: e.message }),
          onSuccess: () =>
            Effect.suspend(() => {
              // One increment per (sink, outcome) of the batch, not per row.
              const counts = new Map<string, { readonly sink: string; readonly outcome: M.Outcome; n: number }>()
              for (const i of items) {
                const k = `${i.outcome}\u0000${i.sink}`
                const g = counts.get(k)
                if (g === undefined) counts.set(k, { sink: i.sink, outcome: i.outcome, n: 1 })
                else g.n += 1
              }
              for (const g of counts.values()) outcomeMetric(g.sink, g.outcome)(g.n)
              return Effect.void
            })
        }),
        Effect.ensuring(Effect.suspend(() => {
          inflight -= items.length
          // Slots freed: claim again without waiting out the tick period (docs/delivery.md "Dispatch tick").
          const free = o.maxInflight - inflight
          return free >= Math.max(1, Math.floor(o.maxInflight * WAKE_FREE_FRACTION)) ? Q.offer(wakeups, undefined) : Effect.void
        }))
      )

    // A batch once taken is committed; only the wait for the first outcome is interruptible. A batch
    // short of `commitBatch` waits COMMIT_LINGER_MS for the outcomes of calls ending meanwhile: one
    // write (and one message to the commit thread) per few outcomes rather than per one or two.
    const commitStep = Effect.uninterruptibleMask((restore) =>
      restore(Q.take(outcomes)).pipe(
        Effect.flatMap((first) =>
          Q.size(outcomes).pipe(
            Effect.flatMap((n) => (n + 1 < o.commitBatch ? Effect.sleep(Duration.millis(COMMIT_LINGER_MS)) : Effect.void)),
            Effect.andThen(takeQueued(outcomes, o.commitBatch - 1)),
            Effect.flatMap((rest) => commit([first, ...rest]))
          )
        )
      )
    )

    // --- one delivery ------------------------------------------------------

    // Unbounded: never refused.
    const settleNow = (s: Settled): void => {
      Q.offerUnsafe(outcomes, s)
    }
    const settle = (s: Settled) => Effect.sync(() => settleNow(s))

    /** Settle a claimed row that cannot be called: its hook is gone or undecodable (`name` undefined), or its sink is not configured. */
    const settleUnroutable = (c: Claimed, env: Envelope | undefined, name: string | undefined): Effect.Effect<void, StoreError> =>
      Effect.gen(function* () {
        if (env === undefined || name === undefined) {
          yield* Effect.logWarning("pipeline: hook envelope gone or undecodable; row dropped", c.ref)
          return yield* settle({ transition: Deliveries.orphanDrop(c.ref, c.entry.value.size), sink: "unknown", outcome: "dropped" })
        }
        // A sink removed from the configuration: keep the row in the DLQ, where replay can find it.
        const row = yield* rowOf(c)
        const now = yield* Clock.currentTimeMillis
        yield* Effect.logWarning("pipeline: no sink of that name is configured; row dead-lettered", { ...c.ref, sinkName: name })
        return yield* settle({ transition: Deliveries.deadLetter(c.ref, { ...row, lastAt: now }, now, { sourceId: env.sourceId, id: env.id }), sink: name, outcome: "dead" })
      })

    /**
     * A claimed row's delivery row, read only when an outcome needs it (a retry or the DLQ): a 2xx
     * needs only the size the claim carries. Nothing else writes an inflight row's delivery row.
     */
    const rowOf = (c: Claimed): Effect.Effect<Deliveries.DeliveryRow, StoreError> =>
      store.get("deliveries", K.deliveryKey(c.ref.seq, c.ref.sink)).pipe(
        Effect.map((v) => Deliveries.decodeRow(v) ?? Deliveries.freshRow(c.entry.value.size))
      )

    const finish = (): void => {
      busy -= 1
      if (busy === 0) idle.openUnsafe()
    }

    /** A defect in a delivery must not leak its slot: the row stays ?F (boot recovery), the count goes down. */
    const guarded = (c: Claimed, effect: Effect.Effect<void, StoreError>): Effect.Effect<void> =>
      effect.pipe(
        Effect.catchCause((cause) =>
          Cause.hasInterruptsOnly(cause)
            ? Effect.void
            : Effect.logError("pipeline: delivery failed; row left inflight for boot recovery", { ...c.ref, cause: Cause.pretty(cause) }).pipe(
                Effect.andThen(Effect.sync(() => {
                  inflight -= 1
                }))
              )
        ),
        Effect.ensuring(Effect.sync(finish))
      )

    /**
     * Hand a claimed row to its sink, synchronously (the common case, no effect per row); a row
     * that cannot be called comes back as the effect that settles it (`settleUnroutable`).
     */
    const route = (c: Claimed, env: Envelope | undefined): Effect.Effect<void> | undefined => {
      const name = env?.sinks[c.ref.sink]
      const sink = name === undefined ? undefined : sinks.get(name)
      if (env === undefined || name === undefined || sink === undefined) {
        busy += 1
        if (busy === 1) idle.closeUnsafe()
        return guarded(c, settleUnroutable(c, env, name))
      }
      busy += 1
      if (busy === 1) idle.closeUnsafe()
      sink.waiting.push({ claimed: c, env, name })
      pump(sink)
      return undefined
    }

    /** Start calls while the sink has rows waiting and a free slot of its `concurrency`. */
    const pump = (sink: Sink): void => {
      while (!cut && sink.calls.size < sink.options.concurrency && sink.waiting.length > 0) call(sink, sink.waiting.shift()!)
    }

    /** One sink call; its outcome settles from the call's callback (a 2xx without any effect). */
    const call = (sink: Sink, job: Job): void => {
      let ended = false
      let stop: () => void
      try {
        stop = SinkClient.start(sink.transport, sink.options, sink.key, job.env, now, (a) => {
          ended = true
          sink.calls.delete(stop)
          outcomeOf(sink, job, a)
          pump(sink)
        })
      } catch (e) {
        // A defect, as in a fiber: it must not escape into the tick or a socket's event handler.
        runWorker(guarded(job.claimed, Effect.die(e)))
        return
      }
      // `start` never calls back synchronously; the check keeps a slot from leaking if it ever did.
      if (!ended) sink.calls.add(stop)
    }

    const outcomeOf = (sink: Sink, job: Job, a: SinkClient.Attempt): void => {
      try {
        sink.latency(a.durationMs / 1000)
        if (a.status >= 200 && a.status < 300) {
          settleNow({ transition: Deliveries.delivered(job.claimed.ref, job.claimed.entry.value.size), sink: job.name, outcome: "delivered" })
          finish()
          return
        }
      } catch (e) {
        runWorker(guarded(job.claimed, Effect.die(e)))
        return
      }
      runWorker(guarded(job.claimed, failed(sink, job, a)))
    }

    /** A call that did not deliver: a retry at the schedule's next time, or the DLQ. */
    const failed = (sink: Sink, job: Job, a: SinkClient.Attempt): Effect.Effect<void, StoreError> =>
      Effect.gen(function* () {
        const { claimed: c, env, name } = job
        const row = yield* rowOf(c)
        const after: Deliveries.DeliveryRow = { attempts: row.attempts + 1, lastStatus: a.status, size: row.size, lastAt: a.endedAt }
        const random = yield* Random.next
        const d = Retry.next(sink.options.retry, { attempt: after.attempts, status: a.status, retryAfter: a.retryAfter, now: a.endedAt, random })
        if (d._tag === "Retry") {
          return yield* settle({ transition: Deliveries.retry(c.ref, after, d.at), sink: name, outcome: "retried" })
        }
        yield* Effect.logInfo("pipeline: row dead-lettered", { ...c.ref, sinkName: name, status: a.status, error: a.error, reason: d.reason })
        return yield* settle({ transition: Deliveries.deadLetter(c.ref, after, a.endedAt, { sourceId: env.sourceId, id: env.id }), sink: name, outcome: "dead" })
      })

    // --- the tick ----------------------------------------------------------

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
        const visits: Array<{ readonly ord: number; readonly buckets: ReadonlyArray<number>; readonly rows: ReadonlyArray<DueEntry> }> = []
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

    /** A visit's candidate stale markers: the buckets scanned for its tenant and the buckets of the rows it claimed. */
    const markersOf = (v: { readonly buckets: ReadonlyArray<number>; readonly rows: ReadonlyArray<DueEntry> }): ReadonlyArray<number> => {
      if (v.rows.length === 0) return v.buckets
      const out = new Set(v.buckets)
      for (const r of v.rows) out.add(K.bucketOf(r.ref.at))
      return [...out]
    }

    const runTick: Effect.Effect<TickReport, StoreError> = Effect.gen(function* () {
      const free = Math.min(o.claimLimit, o.maxInflight - inflight)
      // Saturated: visit nothing, and leave the active-tenants gauge at the last real visit.
      if (free <= 0 || stopping) return { visited: [], claimed: [] }
      const now = yield* Clock.currentTimeMillis
      const visits = yield* claim(now, free)
      const claimed: Array<Claimed> = visits.flatMap((v) => v.rows.map((entry) => ({ entry, ref: refOf(entry) })))
      inflight += claimed.length
      yield* Metric.update(M.activeTenants, visits.length)

      if (claimed.length > 0) {
        const seqs = [...new Set(claimed.map((c) => c.ref.seq))]
        const hooks = yield* store.multiGet("hooks", seqs.map(K.hookKey)).pipe(
          // The rows are claimed: if the reads fail they must still be counted down (they stay ?F for recovery).
          Effect.tapError(() => Effect.sync(() => {
            inflight -= claimed.length
          }))
        )
        const envs = new Map(seqs.map((s, i) => [s, decodeEnvelope(hooks[i])]))
        for (let i = 0; i < claimed.length; i++) {
          const c = claimed[i]!
          const unroutable = route(c, envs.get(c.ref.seq))
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

    const tick = ticking.withPermits(1)(Effect.uninterruptible(runTick))

    const loop = Effect.gen(function* () {
      for (;;) {
        yield* Effect.raceFirst(Effect.sleep(Duration.millis(o.tickMs)), Q.take(wakeups))
        const r = yield* tick.pipe(
          Effect.catchCause((cause) =>
            Effect.logError("pipeline: tick failed", Cause.pretty(cause)).pipe(Effect.as({ visited: [], claimed: [] } as TickReport))
          )
        )
        // A full tick means more is due: go again at once rather than wait a period.
        if (r.claimed.length >= o.claimLimit) yield* Q.offer(wakeups, undefined)
        yield* Effect.sleep(Duration.millis(MIN_TICK_GAP_MS))
      }
    })

    const committer = yield* Effect.forkScoped(Effect.forever(commitStep))
    const ticker = yield* Effect.forkScoped(loop)

    // Shutdown (docs/delivery.md "Limits"): stop claiming, give sink calls the grace period,
    // interrupt the rest (their rows stay ?F for boot recovery), then commit what settled.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* Fiber.interrupt(ticker)
        yield* ticking.withPermits(1)(Effect.sync(() => {
          stopping = true
        }))
        // Finalizers run uninterruptibly: the wait must be made interruptible for the timeout to cut it.
        yield* Effect.interruptible(idle.await).pipe(Effect.timeout(Duration.millis(o.graceMs)), Effect.ignore)
        if (busy > 0) yield* Effect.logWarning("pipeline: grace period over; rows left inflight for boot recovery", { rows: busy })
        // Calls still running are cut and rows still queued never start: all stay ?F.
        cut = true
        for (const sink of sinks.values()) {
          for (const stop of sink.calls) stop()
          sink.calls.clear()
          sink.waiting.length = 0
        }
        yield* FiberSet.clear(workers)
        yield* FiberSet.awaitEmpty(workers)
        yield* Fiber.interrupt(committer)
        const rest = yield* Q.clear(outcomes)
        for (let i = 0; i < rest.length; i += o.commitBatch) yield* commit(rest.slice(i, i + o.commitBatch))
      })
    )

    return {
      wake: Q.offer(wakeups, undefined).pipe(Effect.asVoid),
      tick,
      inflight: Effect.sync(() => inflight)
    } satisfies PipelineShape
  })

/** Needs the Store and the Queue; sink calls go out on `node:http(s)` (src/layers/sink-client.ts). */
export const layer = (input: Input): Layer.Layer<Pipeline, never, Store | Queue> =>
  Layer.effect(Pipeline, make(input))
