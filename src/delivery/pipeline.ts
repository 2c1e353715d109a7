/**
 * The dispatch pipeline (TEN-1 §5; product.md "Delivery"; docs/delivery.md,
 * docs/architecture.md "The pipeline"): a tick that claims due rows tenant by
 * tenant from the active index, the marker cleanup, and the sink calls whose
 * outcomes are committed in small batches. Its parts: the options
 * (`options.ts`), the tick (`tick.ts`), the sink calls
 * (`calls.ts`) and the outcome committer (`outcomes.ts`).
 *
 * Durability: claims and outcomes are unsynced writes. Each is one atomic
 * batch, so a crash can only lose whole transitions, and every state a lost
 * transition leaves behind leads back to a delivery: a lost claim leaves the
 * row due; a claim that survives without its outcome is `?F`, which boot
 * recovery (`Queue.recoverInflight`) returns to due. The worst a crash does is
 * deliver a row again (at-least-once; receivers dedupe by `webhook-id`).
 * A PostgreSQL server that loses unsynced commits while this process lives
 * on is found by the next commit, and the process restarts (postgres-commit.ts).
 */
import { Cause, Context, Duration, Effect, Fiber, Layer, Metric, type Option, Semaphore } from "effect"
import { LiveConfig, type LiveConfigShape } from "../config/live.js"
import { Audit } from "../lifecycle/audit.js"
import { type EndpointsShape } from "../queue/endpoints.js"
import { Writer } from "../queue/writer.js"
import { makeOperations, OperationalEvents } from "./operations.js"
import { MAX_POOLS_DEFAULT } from "../domain/config-endpoints.js"
import { type BreakerView, DEFAULT_BREAKER, viewOf } from "./breaker.js"
import { Endpoints } from "../queue/endpoints.js"
import { makeSinkCalls } from "./calls.js"
import { type Input, MIN_TICK_GAP_MS, type PipelineState, resolve } from "./options.js"
import { type HandOff, makeHandOff } from "./handoff.js"
import { makeOutcomes } from "./outcomes.js"
import * as M from "../observability/delivery-metrics.js"
import { makeCursors } from "./cursors.js"
import { DEFAULT_LIMITS, makeFair } from "./fair.js"
import { makeTick, type TickReport } from "./tick.js"
import { tracingOf } from "../observability/tracing.js"
import { Limits } from "../queue/limits.js"
import { Queue } from "../queue/queue.js"
import { Wake } from "../queue/wake.js"
import type { StoreError } from "../store/store.js"

export {
  COMMIT_LINGER_MS,
  COMMIT_RETRY_MS,
  Defaults,
  CLAIM_PASSES,
  CLAIM_REFUSE_MAX,
  DEFAULT_MAX_PAUSE_MS,
  DISCOVERY_MARKERS,
  SINK_PACE_WINDOW_MS,
  SINK_WAIT_FACTOR,
  type Input,
  MIN_TICK_GAP_MS,
  type PipelineOptions,
  Ranges,
  WAKE_FREE_FRACTION
} from "./options.js"
export type { TickReport } from "./tick.js"
export type { DispatchSinkOptions as SinkOptions } from "./options.js"

export interface PipelineShape {
  /** Tick as soon as possible (the `Wake` signal, which the Writer gives after each commit). Never blocks. */
  readonly wake: Effect.Effect<void>
  /** Run one tick now and report it (tests; ticks never overlap). */
  readonly tick: Effect.Effect<TickReport, StoreError>
  /** Rows claimed whose outcome is not committed yet. */
  readonly inflight: Effect.Effect<number>
  /** By tenant: rows claimed and not settled, and claim offers its limits held back since the last call (TEN-3 metrics). */
  readonly tenantStats: Effect.Effect<{ readonly inflight: ReadonlyMap<number, number>; readonly throttled: ReadonlyMap<number, number> }>
  /** The breaker of every destination open now: the shared sinks and the endpoint pools (memory only). */
  readonly breakers: () => ReadonlyArray<BreakerView>
}

export class Pipeline extends Context.Service<Pipeline, PipelineShape>()("ankusa/Pipeline") {}

/**
 * What the pipeline does as the system: operational events through the Writer (to
 * `operations.sink`), and disabling a failing endpoint as an audited endpoint change. Both need a
 * node's live configuration and services (serve); without them, nothing is sent or disabled.
 */
const systemParts = (live: Option.Option<LiveConfigShape>, endpoints: Option.Option<EndpointsShape>) =>
  Effect.gen(function* () {
    const writer = yield* Effect.serviceOption(Writer)
    const audit = yield* Effect.serviceOption(Audit)
    const service = yield* Effect.serviceOption(OperationalEvents)
    const operations =
      service._tag === "Some"
        ? { emit: service.value.emit }
        : makeOperations({
            sink: () => (live._tag === "Some" ? live.value.get().config.operations.sink : undefined),
            submit: writer._tag === "Some" ? writer.value.submit : undefined
          })
    const disable =
      endpoints._tag === "Some" && audit._tag === "Some"
        ? (ord: number, tenant: string, id: string, reason: string) =>
            endpoints.value.update(ord, id, { disabled: true, disabledReason: reason }, (e) =>
              audit.value.stage({ actor: "system", tenants: [tenant], action: "endpoint.update", params: { id: e.id, fields: ["disabled", "disabledReason"], reason } })
            )
        : undefined
    const disableAfterMs = () => (live._tag === "Some" ? live.value.get().config.endpoints.disableAfterMs : 5 * 24 * 3_600_000)
    return { operations, disable, disableAfterMs }
  })

export const make = (input: Input) =>
  Effect.gen(function* () {
    const o = yield* resolve(input)
    const queue = yield* Queue
    const state: PipelineState = { inflight: 0, inflightBytes: 0, stopping: false, room: () => Number.POSITIVE_INFINITY, capacity: () => Number.POSITIVE_INFINITY }
    // Present from boot: no tick has visited a tenant yet.
    yield* Metric.update(M.activeTenants, 0)
    const wakes = yield* Wake
    const wake = wakes.signal
    const ticking = yield* Semaphore.make(1)

    // Built before the tick fiber and the shutdown below, so the sinks' transports close after
    // the shutdown has cut or finished every call.
    const cursors = makeCursors()
    const fair = makeFair(o.activeTenants, o.quantumRows, cursors.floorOf, { slots: o.maxInflight, maxPercent: o.tenantSharePercent })
    // Each tenant's limits: the Limits service where the node has one (serve does), else the defaults.
    const service = yield* Effect.serviceOption(Limits)
    const limitsOf =
      input.limitsOf ?? (service._tag === "Some" ? service.value.of : (ords: ReadonlyArray<number>) => Effect.succeed(ords.map(() => DEFAULT_LIMITS)))
    // The hand-off of lanes' next heads (handoff.ts), set once the sinks' calls exist.
    const handOff: { current?: HandOff } = {}
    const outcomes = yield* makeOutcomes(o, queue, state, fair, wake, handOff)
    const live = yield* Effect.serviceOption(LiveConfig)
    // Tenant endpoints where the node has them (serve does); their SSRF guard and pool bound as the configuration in force says.
    const endpoints = yield* Effect.serviceOption(Endpoints)
    const fixed = { allowNetworks: [] as ReadonlyArray<string>, httpsOnly: false, maxPools: MAX_POOLS_DEFAULT, rotationOverlapMs: 24 * 3_600_000 }
    const settings = live._tag === "Some" ? () => live.value.get().config.endpoints : () => input.endpointSettings ?? fixed
    const calls = yield* makeSinkCalls(o, queue, state, fair, outcomes, {
      endpoints: endpoints._tag === "Some" ? endpoints.value : undefined,
      settings,
      breaker: live._tag === "Some" ? () => live.value.get().config.breaker : () => input.breaker ?? DEFAULT_BREAKER,
      wake,
      ...(yield* systemParts(live, endpoints))
    })
    handOff.current = makeHandOff(o, queue, state, fair, calls, limitsOf)
    // The Writer writes an open destination's new rows due at its probe (docs/delivery.md "Failing destinations").
    // Until the pipeline stops: with no breaker to probe, rows the Writer commits after it are due at once.
    wakes.holdBy(calls.holds)
    yield* Effect.addFinalizer(() => Effect.sync(() => wakes.holdBy(undefined)))
    // A reload swaps the sinks between two ticks' routing (docs/configuration.md "Reloading").
    if (live._tag === "Some" && input.sinksOf !== undefined) {
      const sinksOf = input.sinksOf
      live.value.onChange((g) => calls.reconfigure(sinksOf(g.config)))
    }
    const tick = ticking.withPermits(1)(Effect.uninterruptible(makeTick(o, queue, wakes, fair, cursors, limitsOf, state, calls, yield* tracingOf)))

    const loop = Effect.gen(function* () {
      for (;;) {
        yield* Effect.raceFirst(Effect.sleep(Duration.millis(o.tickMs)), wakes.await)
        const r = yield* tick.pipe(
          Effect.catchCause((cause) =>
            Effect.logError("pipeline: tick failed", Cause.pretty(cause)).pipe(Effect.as({ visited: [], claimed: [] } as TickReport))
          )
        )
        // A full tick means more is due: go again at once rather than wait a period.
        if (r.claimed.length >= o.claimLimit) yield* wake
        yield* Effect.sleep(Duration.millis(MIN_TICK_GAP_MS))
      }
    })
    const ticker = yield* Effect.forkScoped(loop)

    // Shutdown (docs/delivery.md "Limits"): stop claiming, give sink calls the grace period,
    // cut the rest (their rows stay ?F for boot recovery), then commit what settled.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* Fiber.interrupt(ticker)
        yield* ticking.withPermits(1)(Effect.sync(() => {
          state.stopping = true
        }))
        // Finalizers run uninterruptibly: the wait must be made interruptible for the timeout to cut it.
        yield* Effect.interruptible(calls.idle).pipe(Effect.timeout(Duration.millis(o.graceMs)), Effect.ignore)
        if (calls.busy() > 0) yield* Effect.logWarning("pipeline: grace period over; rows left inflight for boot recovery", { rows: calls.busy() })
        yield* calls.cut
        yield* outcomes.flush
      })
    )

    return {
      wake,
      tick,
      inflight: Effect.sync(() => state.inflight),
      tenantStats: Effect.sync(() => ({ inflight: new Map(fair.inflight()), throttled: fair.takeThrottled() })),
      breakers: () => calls.destinations().map((s) => viewOf(s.options.name, s.breaker))
    } satisfies PipelineShape
  })

/** Needs the Queue and the Wake it ticks on; sink calls go out on `node:http(s)` (src/delivery/sink-client.ts). */
export const layer = (input: Input): Layer.Layer<Pipeline, never, Queue | Wake> =>
  Layer.effect(Pipeline, make(input))
