/**
 * The pipeline's sink calls (docs/delivery.md "Connections", "Limits", "Fair dispatch";
 * docs/architecture.md "The pipeline"): per sink, the admission of claimed rows (at most
 * `concurrency + maxWaiting` held, a fair share of them a tenant), a FIFO of claimed rows whose
 * calls start `concurrency` at a time as earlier ones end, each call the sink client's callback
 * chain (a 2xx settled from its answer; a call that did not deliver hands its outcome to a fiber
 * in one FiberSet, which reads the row and settles the retry or the DLQ), the breakers' holds on
 * new rows, and the cut at shutdown, which cuts the calls in flight and interrupts those fibers.
 */
import { Cause, Clock, Effect, FiberSet, Latch } from "effect"
import type { Envelope } from "../domain/envelope.js"
import * as Retry from "../domain/retry-schedule.js"
import * as M from "../observability/delivery-metrics.js"
import type { EndpointsShape } from "../queue/endpoints.js"
import { AttemptLog } from "./attempt-log.js"
import { makeCallHealth } from "./call-health.js"
import { makeCallOutcomes } from "./call-outcomes.js"
import { type DestinationDeps, type Job, makeDestinations, type Sink } from "./destinations.js"
import type { Outcomes } from "./outcomes.js"
import type { DispatchSinkOptions, PipelineOptions, PipelineState } from "./options.js"
import type { Claimed, SinkCalls } from "./sink-calls.js"
import { hold, type KeptPlace, makeAdmission, park, started } from "./sink-places.js"
import type { BreakerSettings } from "./breaker.js"
import type { Operations } from "./operations.js"
import type { QueueShape } from "../queue/queue.js"
import type { Fair } from "./fair.js"
import { DEFAULT_429_PAUSE_MS } from "./sink-pace.js"
import * as SinkClient from "./sink-client.js"
import { makeCallTrace } from "./call-trace.js"
import { tracingOf } from "../observability/tracing.js"
import type { StoreError } from "../store/store.js"

export type { Claimed, SinkCalls } from "./sink-calls.js"

/**
 * The destinations' transports close when the layer's scope does, after `cut`. Over 80 lines because
 * its parts share the destinations' queues and calls in flight as closures; each is a named function.
 */
export const makeSinkCalls = (
  o: PipelineOptions,
  queue: QueueShape,
  state: PipelineState,
  fair: Fair,
  outcomes: Outcomes,
  deps: {
    readonly endpoints: EndpointsShape | undefined
    readonly settings: DestinationDeps["settings"]
    readonly breaker: () => BreakerSettings
    readonly wake: Effect.Effect<void>
    readonly operations: Operations
    /** Disable a tenant's endpoint, as the system (an audited endpoint change); after `disableAfterMs()` of failures. */
    readonly disable: ((ord: number, tenant: string, id: string, reason: string) => Effect.Effect<void, unknown>) | undefined
    readonly disableAfterMs: () => number
  }
) =>
  Effect.gen(function* () {
    const context = yield* Effect.context<never>()
    const runFork = Effect.runForkWith(context)
    const clock = yield* Clock.Clock
    const now = () => clock.currentTimeMillisUnsafe()
    const registry = makeDestinations(o, context, {
      endpoints: deps.endpoints,
      settings: deps.settings,
      breaker: deps.breaker,
      // A tenant's endpoints read: the next tick reads its refused rows again.
      fork: (effect) => void runFork(Effect.andThen(effect, deps.wake)),
      now,
      orphan: (places) => admission.orphan(places)
    })
    yield* Effect.addFinalizer(() => Effect.sync(registry.closeAll))
    const sinks = registry.sinks
    // Their places, which the claim asks row by row; the tick and the committer read the room.
    const admission = makeAdmission(
      {
        get: (name) => sinks.get(name) ?? registry.pools.get(name),
        all: registry.all,
        none: () => sinks.size === 0 && deps.endpoints === undefined,
        unopened: registry.unopenedPlaces,
        anyUnopened: registry.anyUnopened
      },
      now
    )
    state.room = admission.room
    state.capacity = admission.capacity
    const attempts = yield* Effect.serviceOption(AttemptLog)
    const unsafe = M.ssrfRefusedRecorder(context)
    const trips = M.breakerTripsRecorder(context)
    const breakerState = M.breakerStateRecorder(context)
    // Every shared sink's breaker state is in the first scrape.
    for (const s of sinks.values()) breakerState(s)
    const delay = M.delayRecorder(context)
    const tracing = yield* tracingOf
    const traceCall = tracing === undefined ? undefined : makeCallTrace(tracing, queue, (e) => void runFork(e))

    // Jobs handed over and not finished (queued or calling); `idle` is open at 0.
    let busy = 0
    const idle = yield* Latch.make(true)
    // The fibers that settle failed calls (and unroutable rows), interrupted at the cut.
    const fibers = yield* FiberSet.make<void, never>()
    const runFiber = yield* FiberSet.runtime(fibers)<never>()
    let cut = false

    const { settleUnroutable, failed, delivered } = makeCallOutcomes(queue, outcomes)
    /** A claimed row no longer counted inflight (globally, in bytes and for its tenant). */
    const uncount = (c: Claimed): void => ((state.inflight -= 1), (state.inflightBytes -= c.entry.value.size), fair.released(c.ref.ord, 1))
    /** A claimed row given back to due (its endpoint has no pool yet): uncounted, its tenant waiting (`admit`). */
    const giveBack = (c: Claimed) => Effect.tap(queue.unclaim([c.entry]), () => Effect.sync(() => uncount(c)))

    /** Tenants refused while their endpoints were read or no endpoint pool was free, with the lowest `at` refused. */
    const waitingTenants = new Map<number, number>()

    const admit = (ord: number, name: string | undefined, at: number): boolean | number => {
      if (cut) return true
      const r = registry.resolve(name, ord)
      if (r === undefined || r._tag === "gone") return true
      if (r._tag === "open") return admission.admit(r.sink, ord, at)
      if (r._tag === "held") return r.until
      const w = waitingTenants.get(ord)
      if (w === undefined || at < w) waitingTenants.set(ord, at)
      return false
    }

    // Endpoint pools in use, or tenants waiting for theirs: a row may be refused, so the claim admits each.
    const roomForAll = (rows: number) => registry.pools.size === 0 && waitingTenants.size === 0 && admission.roomForAll(rows)

    const unparked = () => {
      const out = [...admission.unparked()]
      for (const ord of registry.takeReady()) {
        const at = waitingTenants.get(ord)
        if (at === undefined) continue
        waitingTenants.delete(ord)
        out.push({ ord, at })
      }
      return out
    }

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
                Effect.andThen(Effect.sync(() => uncount(c)))
              )
        ),
        Effect.ensuring(Effect.sync(finish))
      )

    const route = (c: Claimed, env: Envelope | undefined): Effect.Effect<void> | undefined => {
      const name = env?.sinks[c.ref.sink]
      let r = registry.resolve(name, c.ref.ord)
      handed()
      if (r !== undefined && (r._tag === "loading" || r._tag === "full" || r._tag === "held")) {
        // Its endpoint's pool is not open (claimed without admission, or its tenant's endpoints changed
        // since): the pool it was admitted to, else the row goes back to due and its tenant waits (admit).
        const pool = registry.pools.get(name!)
        if (pool === undefined) return guarded(c, giveBack(c))
        r = { _tag: "open", sink: pool }
      }
      if (env === undefined || name === undefined || r === undefined || r._tag !== "open") {
        // Admitted for a destination gone since: its place (and its probe, if it was one) is given back.
        if (name !== undefined) admission.dropped(name, c.ref.ord)
        return guarded(c, settleUnroutable(c, env, name, r?._tag === "gone" ? r.reason : undefined))
      }
      const probe = r.sink.breaker.state === "half" && admission.probeOf(r.sink, c.ref.ord)
      if (r.sink.breaker.state !== "closed" && !probe) {
        // Admitted before its breaker tripped and read after: it waits behind the breaker as the
        // rows waiting at the trip do (`tripped`), its place given back and no attempt used.
        hold(r.sink.places, c.ref.ord, -1)
        park(r.sink.places, c.ref.ord, c.entry.ref.at)
        return guarded(c, giveBack(c))
      }
      r.sink.waiting.push(c.ref.ord, { claimed: c, env, name, probe })
      pump(r.sink)
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

    /** A call ended: its slot and its place are free (unless `kept` for the hand-off), and the next waiting row's call may start. */
    const free = (sink: Sink, ord: number, kept = false): void => {
      sink.running -= 1
      if (!kept) hold(sink.places, ord, -1)
      if (!sink.retired) pump(sink)
      else if (sink.running === 0) registry.close(sink)
    }

    // Each call's outcome for its destination's health; a trip gives the rows still waiting for a
    // connection back to due, their tenants parked behind the breaker: no attempt is used.
    const breakerOutcome = makeCallHealth({
      record: registry.record,
      breaker: deps.breaker,
      operations: deps.operations,
      disable: deps.disable,
      disableAfterMs: deps.disableAfterMs,
      run: runFiber,
      trips,
      breakerState,
      tripped: (sink) => {
        for (let w = sink.waiting.shift(); w !== undefined; w = sink.waiting.shift()) {
          hold(sink.places, w.claimed.ref.ord, -1)
          park(sink.places, w.claimed.ref.ord, w.claimed.entry.ref.at)
          runFiber(guarded(w.claimed, giveBack(w.claimed)))
        }
      }
    })

    const reconfigure = (next: ReadonlyArray<DispatchSinkOptions>): void => {
      // A removed sink's log of failures goes with it.
      if (attempts._tag === "Some") for (const name of sinks.keys()) if (!next.some((s) => s.name === name)) attempts.value.forget(name)
      registry.reconfigure(next, {
        pump,
        // Rows waiting for a removed sink go to the DLQ, where replay finds them once it is back.
        deadLetter: (job) => runFiber(guarded(job.claimed, settleUnroutable(job.claimed, job.env, job.name))),
        // Its parked tenants' refused rows are claimed (and dead-lettered) like the rest.
        orphan: admission.orphan
      })
      for (const s of sinks.values()) breakerState(s)
    }

    /** The signing keys now: the destination's, and a rotated-out one still in its overlap. */
    const keysOf = (sink: Sink): SinkClient.Key =>
      sink.key === undefined || sink.previous === undefined || now() >= sink.previous.until ? sink.key : [sink.key, sink.previous.key]

    /** The sink client's call, or for an endpoint whose URL the guard refuses now, its failure at once (no packet sent). */
    const start = (sink: Sink, job: Job, done: (a: SinkClient.Attempt) => void): (() => void) => {
      const t = traceCall?.(sink, job)
      const traced = t?.done
      if (traced !== undefined) done = ((end) => (a: SinkClient.Attempt) => (traced(a), end(a)))(done)
      if (sink.refusal === undefined) return SinkClient.start(sink.transport, sink.options, keysOf(sink), job.env, now, done, t?.head)
      const at = now()
      const timer = setTimeout(() => done({ status: 0, retryAfter: undefined, error: sink.refusal, durationMs: 0, endedAt: at }), 0)
      return () => clearTimeout(timer)
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
        stop: start(sink, job, (a) => {
          live.delete(entry)
          sink.latency(a.durationMs / 1000)
          if (a.error?.startsWith("unsafe") === true) unsafe()
          const ok = a.status >= 200 && a.status < 300
          breakerOutcome(sink, job, a.status, a.endedAt)
          // Every attempt of an endpoint (its recent attempts); a sink's failures only (the Sinks page's last failure).
          if (attempts._tag === "Some" && (!ok || sink.version !== undefined)) {
            attempts.value.record(job.name, { at: a.endedAt, hookId: job.env.id, status: a.status, latencyMs: a.durationMs, outcome: ok ? "delivered" : "failed", error: a.error ?? null, body: ok ? null : (a.body ?? null) }, sink.version === undefined ? undefined : job.claimed.ref.ord)
          }
          // A 429 slows this sink (every tenant's calls to it), not the tenant's other sinks.
          // The pause is capped by `maxPauseMs`: one tenant's 429 cannot stop the sink for everyone for long
          // (the row itself waits its whole Retry-After, retry-schedule.ts).
          if (a.status === 429) {
            const asked = Retry.parseRetryAfter(a.retryAfter, a.endedAt) ?? DEFAULT_429_PAUSE_MS
            sink.pace.pause(a.endedAt, Math.min(asked, sink.options.retry.maxRetryAfterMs, sink.maxPauseMs))
          }
          if (a.status >= 200 && a.status < 300) {
            // An ordered destination's row keeps its place for its lane's next head until its outcome is committed (handoff.ts).
            // Kept only once its outcome is queued: the outcome's commit gives it back.
            let kept = false
            try {
              const settled = delivered(job)
              const place: KeptPlace | undefined =
                settled.result.lane !== undefined && sink.options.ordered !== undefined && !sink.retired && !cut
                  ? { ord: job.claimed.ref.ord, sink, runs: job.claimed.runs ?? 0, passed: false, released: false }
                  : undefined
              outcomes.settle(place === undefined ? settled : { ...settled, place })
              kept = place !== undefined
              finish()
            } catch (e) {
              // A defect here must not leak the slot either (guarded logs it and counts the row down).
              runFiber(guarded(job.claimed, Effect.die(e)))
            }
            free(sink, job.claimed.ref.ord, kept)
          } else runFiber(guarded(job.claimed, failed(sink, job, a)).pipe(Effect.ensuring(Effect.sync(() => free(sink, job.claimed.ref.ord)))))
        })
      }
      live.add(entry)
    }

    return {
      ...admission,
      admit,
      roomForAll,
      unparked,
      destinations: registry.breakers,
      endpointPools: () => registry.pools.size,
      refusedTenants: () => registry.parkedTenants(waitingTenants),
      holds: registry.holds,
      route,
      reconfigure,
      busy: () => busy,
      idle: idle.await,
      cut: Effect.gen(function* () {
        cut = true
        for (const sink of registry.all()) {
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
