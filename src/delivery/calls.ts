/**
 * The pipeline's sink calls (docs/delivery.md "Connections", "Limits", "Fair dispatch";
 * docs/architecture.md "The pipeline"): per sink, the admission of claimed rows (at most
 * `concurrency + maxWaiting` held, a fair share of them a tenant), a FIFO of claimed rows
 * whose calls start `concurrency` at a time as earlier ones end, each call
 * the sink client's callback chain (a 2xx settled from its answer; a call
 * that did not deliver hands its outcome to a fiber in one FiberSet, which
 * reads the row and settles the retry or the DLQ), and the cut at shutdown,
 * which cuts the calls in flight and interrupts those fibers.
 */
import { Cause, Clock, Effect, FiberSet, Latch, Random } from "effect"
import { type Envelope, tenantOf } from "../domain/envelope.js"
import type * as K from "../domain/keys.js"
import * as Retry from "../domain/retry-schedule.js"
import { parseSecret } from "../domain/signature.js"
import * as M from "../observability/delivery-metrics.js"
import { type Outcomes, type Settled } from "./outcomes.js"
import { DEFAULT_MAX_PAUSE_MS, maxWaitingOf, type DispatchSinkOptions, type PipelineOptions, type PipelineState } from "./options.js"
import { hold, makeAdmission, makePlaces, type Places, started } from "./sink-places.js"
import { type DeliveryRow, type DueEntry, type QueueShape } from "../queue/queue.js"
import type { Fair } from "./fair.js"
import { makeRetryLog } from "./retry-log.js"
import { DEFAULT_429_PAUSE_MS, makeSinkPace, type SinkPace } from "./sink-pace.js"
import { makeTenantQueue, type TenantQueue } from "./sink-queue.js"
import * as SinkClient from "./sink-client.js"
import type { StoreError } from "../store/store.js"

export interface Claimed {
  readonly entry: DueEntry
  readonly ref: K.InflightRef
}

interface Job {
  readonly claimed: Claimed
  readonly env: Envelope
  readonly name: string
}

interface Sink {
  readonly options: DispatchSinkOptions
  readonly key: Uint8Array | undefined
  /** Its keep-alive connections (`concurrency` at most). */
  readonly transport: SinkClient.Transport
  /** Claimed rows waiting for a call: round-robin by tenant, each tenant's in claim order. */
  readonly waiting: TenantQueue<Job>
  /** Calls in flight (`concurrency` at most). */
  running: number
  /** Its places: the rows admitted for it and not done calling, and the tenants parked (sink-places.ts). */
  readonly places: Places
  readonly maxPauseMs: number
  readonly latency: (seconds: number) => void
  /** Its rate limit and 429 pause, shared by every tenant routed to it. */
  readonly pace: SinkPace
  /** A pump scheduled for when the pace allows the next call. */
  timer: ReturnType<typeof setTimeout> | undefined
  readonly throttled: { readonly rate: () => void; readonly retry_after: () => void }
  /** Replaced or removed by a reload: no call starts on it; its transport closes when its last call ends. */
  retired: boolean
}

export interface SinkCalls {
  /**
   * Whether the claim may take a row of tenant `ord` for sink `name` (undefined: its hook or sink
   * is gone; always admitted, it is settled at once): the sink has room and the tenant is under
   * its share of it. An admitted row holds its place until its call ends, or `endClaim(false)`;
   * a refused one parks its tenant on the sink until the sink has room again.
   */
  readonly admit: (ord: number, name: string | undefined, at: number) => boolean
  /** Whether a sink other than those named has room (a tenant refused by those may still have rows for it). */
  readonly roomBesides: (names: ReadonlySet<string>) => boolean
  /** Places free over every sink (`capacity − held`): the most a claim could route. */
  readonly room: () => number
  /** Whether every sink has `rows` free places and no tenant is parked: a claim of `rows` needs no admission. */
  readonly roomForAll: (rows: number) => boolean
  /** The tick's claim is done: the rows admitted since the last call are routed (`kept`) or were given back. */
  readonly endClaim: (kept: boolean) => void
  /** Tenants parked on sinks whose waiting rows are down to half their `maxWaiting`: each with the lowest `at` refused. Cleared by the call. */
  readonly unparked: () => ReadonlyArray<{ readonly ord: number; readonly at: number }>
  /**
   * Hand a claimed row to its sink's queue, synchronously (its call is forked when a slot is
   * free); a row that cannot be called comes back as the effect that settles it.
   */
  readonly route: (c: Claimed, env: Envelope | undefined) => Effect.Effect<void> | undefined
  /** Rows handed over and not finished (queued or calling). */
  readonly busy: () => number
  /** Waits until no row is handed over and not finished. */
  readonly idle: Effect.Effect<void>
  /** Shutdown: no call starts after it, the calls running are cut, the queued rows dropped (all stay ?F). */
  readonly cut: Effect.Effect<void>
  /**
   * A reload's sinks (docs/configuration.md "Reloading"): an added one gets its pool, a changed one a
   * new pool that its waiting rows (and their places) move to (calls on the wire finish on the old
   * pool, which then closes), a removed one's waiting rows are dead-lettered (`sink removed`), its
   * parked tenants come back to the round, and its pool closes.
   */
  readonly reconfigure: (sinks: ReadonlyArray<DispatchSinkOptions>) => void
}

/**
 * The configured sinks, each with its keep-alive transport, closed when the layer's scope does.
 * Their queues are unbounded as queues, bounded by construction: every job is an admitted row,
 * and a sink admits `concurrency + maxWaiting` rows not yet called out at most.
 */
const openSinks = (o: PipelineOptions, state: PipelineState) =>
  Effect.gen(function* () {
    // Where the latency recorders write (the metric registry of this layer's context).
    const context = yield* Effect.context<never>()
    const sinks = new Map<string, Sink>()
    // Retired by a reload with calls still on the wire: closed at shutdown if they are still open then.
    const retiring = new Set<Sink>()
    const open = (s: DispatchSinkOptions): Sink => ({
      options: s,
      key: s.secret === undefined ? undefined : parseSecret(s.secret),
      transport: SinkClient.transport(s),
      waiting: makeTenantQueue<Job>(),
      running: 0,
      places: makePlaces(s.concurrency, maxWaitingOf(s)),
      maxPauseMs: s.maxPauseMs ?? DEFAULT_MAX_PAUSE_MS,
      latency: M.latencyRecorder(s.name, context),
      pace: makeSinkPace(s.ratePerSec ?? 0),
      timer: undefined,
      throttled: { rate: M.sinkThrottledRecorder(s.name, "rate", context), retry_after: M.sinkThrottledRecorder(s.name, "retry_after", context) },
      retired: false
    })
    for (const s of o.sinks) sinks.set(s.name, open(s))
    const close = (sink: Sink) => {
      if (sink.timer !== undefined) clearTimeout(sink.timer)
      sink.timer = undefined
      SinkClient.close(sink.transport)
      retiring.delete(sink)
    }
    yield* Effect.addFinalizer(() => Effect.sync(() => {
      for (const sink of [...sinks.values(), ...retiring]) close(sink)
    }))
    /** Take `sink` out of service: closed now when idle, else when its last call ends (`free`). */
    const retire = (sink: Sink) => {
      sink.retired = true
      if (sink.running === 0) close(sink)
      else retiring.add(sink)
    }
    // Their places, which the claim asks row by row; the tick and the committer read the room.
    const clock = yield* Clock.Clock
    const admission = makeAdmission(sinks, () => clock.currentTimeMillisUnsafe())
    state.room = admission.room
    state.capacity = admission.capacity
    return { sinks, open, retire, close, admission }
  })

/** The sinks' transports close when the layer's scope does, after `cut`. */
export const makeSinkCalls = (o: PipelineOptions, queue: QueueShape, state: PipelineState, fair: Fair, outcomes: Outcomes) =>
  Effect.gen(function* () {
    const registry = yield* openSinks(o, state)
    const { sinks, admission } = registry
    const delay = M.delayRecorder(yield* Effect.context<never>())
    const clock = yield* Clock.Clock
    const now = () => clock.currentTimeMillisUnsafe()

    // Jobs handed over and not finished (queued or calling); `idle` is open at 0.
    let busy = 0
    const idle = yield* Latch.make(true)
    // The fibers that settle failed calls (and unroutable rows), interrupted at the cut.
    const fibers = yield* FiberSet.make<void, never>()
    const runFiber = yield* FiberSet.runtime(fibers)<never>()
    let cut = false

    const settle = (s: Settled) => Effect.sync(() => outcomes.settle(s))

    const logRetry = makeRetryLog()

    /** Nothing else writes an inflight row's delivery row; a 2xx needs only the size the claim carries. */
    const rowOf = (c: Claimed): Effect.Effect<DeliveryRow, StoreError> => queue.deliveryRow(c.ref, c.entry.value.size)

    /** Settle a claimed row that cannot be called: its hook is gone or undecodable (`name` undefined), or its sink is not configured. */
    const settleUnroutable = (c: Claimed, env: Envelope | undefined, name: string | undefined): Effect.Effect<void, StoreError> =>
      Effect.gen(function* () {
        if (env === undefined || name === undefined) {
          // No envelope, so no tenant id to name: the row is named by its sequence number and sink position.
          yield* Effect.logWarning("pipeline: hook envelope gone or undecodable; row dropped", { seq: c.ref.seq, sinkIndex: c.ref.sink })
          return yield* settle({ result: { _tag: "Dropped", ref: c.ref, size: c.entry.value.size }, sink: "unknown", outcome: "dropped" })
        }
        // A sink removed from the configuration: keep the row in the DLQ, where replay can find it.
        const row = yield* rowOf(c)
        const now = yield* Clock.currentTimeMillis
        yield* Effect.logWarning("pipeline: row dead-lettered", { tenant: tenantOf(env), hookId: env.id, sink: name, reason: "sink removed: no sink of that name is configured" })
        return yield* settle({
          result: { _tag: "DeadLetter", ref: c.ref, row: { ...row, lastAt: now }, at: now, hook: { sourceId: env.sourceId, id: env.id } },
          sink: name,
          outcome: "dead"
        })
      })

    /** A call that did not deliver: a retry at the schedule's next time, or the DLQ. */
    const failed = (sink: Sink, job: Job, a: SinkClient.Attempt): Effect.Effect<void, StoreError> =>
      Effect.gen(function* () {
        const { claimed: c, env, name } = job
        const row = yield* rowOf(c)
        const after: DeliveryRow = { attempts: row.attempts + 1, lastStatus: a.status, size: row.size, lastAt: a.endedAt }
        const random = yield* Random.next
        const d = Retry.next(sink.options.retry, { attempt: after.attempts, status: a.status, retryAfter: a.retryAfter, now: a.endedAt, random })
        const tenant = tenantOf(env)
        if (d._tag === "Retry") {
          yield* logRetry(a.endedAt, { sink: name, tenant, hookId: env.id, status: a.status, error: a.error, body: a.body, attempt: after.attempts, nextAt: d.at })
          return yield* settle({ result: { _tag: "Retry", ref: c.ref, row: after, at: d.at }, sink: name, outcome: "retried" })
        }
        yield* Effect.logInfo("pipeline: row dead-lettered", { tenant, hookId: env.id, sink: name, status: a.status, error: a.error, ...(a.body === undefined ? {} : { body: a.body }), attempts: after.attempts, reason: d.reason })
        return yield* settle({
          result: { _tag: "DeadLetter", ref: c.ref, row: after, at: a.endedAt, hook: { sourceId: env.sourceId, id: env.id } },
          sink: name,
          outcome: "dead"
        })
      })

    const delivered = (job: Job): Settled => ({
      result: { _tag: "Delivered", ref: job.claimed.ref, size: job.claimed.entry.value.size },
      sink: job.name,
      outcome: "delivered"
    })

    const handed = (): void => {
      busy += 1
      if (busy === 1) idle.closeUnsafe()
    }
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
            : Effect.logError("pipeline: delivery failed; row left inflight for boot recovery", { seq: c.ref.seq, sinkIndex: c.ref.sink, cause: Cause.pretty(cause) }).pipe(
                Effect.andThen(Effect.sync(() => {
                  state.inflight -= 1
                  fair.released(c.ref.ord, 1)
                }))
              )
        ),
        Effect.ensuring(Effect.sync(finish))
      )

    const route = (c: Claimed, env: Envelope | undefined): Effect.Effect<void> | undefined => {
      const name = env?.sinks[c.ref.sink]
      const sink = name === undefined ? undefined : sinks.get(name)
      handed()
      if (env === undefined || name === undefined || sink === undefined) return guarded(c, settleUnroutable(c, env, name))
      sink.waiting.push(c.ref.ord, { claimed: c, env, name })
      pump(sink)
      return undefined
    }

    /**
     * Start calls while the sink has rows waiting, a free slot of its `concurrency` and its pace
     * allows; a pace that holds the next call schedules the pump for when it may start.
     */
    const pump = (sink: Sink): void => {
      while (!cut && sink.running < sink.options.concurrency && sink.waiting.size() > 0) {
        const wait = sink.pace.take(now())
        if (wait > 0) {
          if (sink.timer === undefined) {
            sink.throttled[sink.pace.reason()]()
            sink.timer = setTimeout(() => {
              sink.timer = undefined
              pump(sink)
            }, wait)
          }
          return
        }
        call(sink, sink.waiting.shift()!)
      }
    }

    /** Calls in flight (their cut, for shutdown: a call cut so has no outcome). */
    const live = new Set<{ readonly stop: () => void; readonly sink: Sink }>()

    /** A call ended: its slot and its place are free, and the next waiting row's call may start. */
    const free = (sink: Sink, ord: number): void => {
      sink.running -= 1
      hold(sink.places, ord, -1)
      if (sink.retired) {
        if (sink.running === 0) registry.close(sink)
      } else pump(sink)
    }

    const reconfigure = (next: ReadonlyArray<DispatchSinkOptions>): void => {
      const names = new Set(next.map((s) => s.name))
      for (const s of next) {
        const old = sinks.get(s.name)
        if (old !== undefined && JSON.stringify(old.options) === JSON.stringify(s)) continue
        const sink = registry.open(s)
        sinks.set(s.name, sink)
        if (old === undefined) continue
        // Its waiting rows go to the new pool, in their turn order, with their places; so do its parked tenants.
        for (let job = old.waiting.shift(); job !== undefined; job = old.waiting.shift()) {
          const ord = job.claimed.ref.ord
          hold(old.places, ord, -1)
          hold(sink.places, ord, 1)
          sink.waiting.push(ord, job)
        }
        for (const [ord, at] of old.places.parked) sink.places.parked.set(ord, at)
        old.places.parked.clear()
        registry.retire(old)
        pump(sink)
      }
      for (const [name, old] of sinks) {
        if (names.has(name)) continue
        sinks.delete(name)
        // Rows waiting for a removed sink go to the DLQ, where replay finds them once it is back.
        for (let job = old.waiting.shift(); job !== undefined; job = old.waiting.shift()) {
          const c = job.claimed
          hold(old.places, c.ref.ord, -1)
          runFiber(guarded(c, settleUnroutable(c, job.env, job.name)))
        }
        // Its parked tenants' refused rows are claimed (and dead-lettered) like the rest.
        admission.orphan(old.places)
        registry.retire(old)
      }
    }

    /**
     * One call: the sink client's callback chain, no fiber (docs/architecture.md "The pipeline"
     * has the paired runs). A 2xx is settled from the answer's callback; a call that did not
     * deliver forks a fiber that reads the row and settles the retry or the DLQ.
     */
    const call = (sink: Sink, job: Job): void => {
      sink.running += 1
      started(sink.places, now())
      delay(Math.max(0, now() - job.claimed.entry.ref.at) / 1000)
      const entry = {
        sink,
        stop: SinkClient.start(sink.transport, sink.options, sink.key, job.env, now, (a) => {
          live.delete(entry)
          sink.latency(a.durationMs / 1000)
          // A 429 slows this sink (every tenant's calls to it), not the tenant's other sinks.
          // The pause is capped by `maxPauseMs`: one tenant's 429 cannot stop the sink for everyone for long
          // (the row itself waits its whole Retry-After, retry-schedule.ts).
          if (a.status === 429) {
            const asked = Retry.parseRetryAfter(a.retryAfter, a.endedAt) ?? DEFAULT_429_PAUSE_MS
            sink.pace.pause(a.endedAt, Math.min(asked, sink.options.retry.maxRetryAfterMs, sink.maxPauseMs))
          }
          if (a.status >= 200 && a.status < 300) {
            try {
              outcomes.settle(delivered(job))
              finish()
            } catch (e) {
              // A defect here must not leak the slot either (guarded logs it and counts the row down).
              runFiber(guarded(job.claimed, Effect.die(e)))
            }
            free(sink, job.claimed.ref.ord)
          } else runFiber(guarded(job.claimed, failed(sink, job, a)).pipe(Effect.ensuring(Effect.sync(() => free(sink, job.claimed.ref.ord)))))
        })
      }
      live.add(entry)
    }

    return {
      ...admission,
      admit: (ord, name, at) => cut || admission.admit(ord, name, at),
      route,
      reconfigure,
      busy: () => busy,
      idle: idle.await,
      cut: Effect.gen(function* () {
        cut = true
        for (const sink of sinks.values()) {
          sink.waiting.clear()
          sink.places.parked.clear()
          if (sink.timer !== undefined) clearTimeout(sink.timer)
          sink.timer = undefined
        }
        // The calls in flight are cut (their connections destroyed, no outcome: the rows stay ?F),
        // then the fibers settling failures.
        for (const e of live) {
          e.stop()
          e.sink.running -= 1
          finish()
        }
        live.clear()
        yield* FiberSet.clear(fibers)
        yield* FiberSet.awaitEmpty(fibers)
      })
    } satisfies SinkCalls
  })
