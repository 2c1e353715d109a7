/**
 * The gauge tick (TEN-1 §4–§5; docs/architecture.md "The pipeline"): queue
 * state from the six counters of ord 0 (one multi-get), the oldest due age
 * from the active index, the tenant count from `m:next_ord`, and the top
 * tenants by pending from the first active tenants. It never scans the due,
 * inflight, dead or archive families: its cost does not grow with the backlog.
 */
import { Clock, Context, Duration, Effect, Layer, Metric, Schedule } from "effect"
import * as Counters from "../domain/counters.js"
import * as M from "./delivery-metrics.js"
import type { BreakerView } from "../delivery/breaker.js"
import { Pipeline } from "../delivery/pipeline.js"
import { Queue } from "../queue/queue.js"
import { Tenants } from "../queue/tenants.js"
import type { StoreError } from "../store/store.js"
import * as TopTenants from "./top-tenants-metric.js"

export interface GaugesOptions {
  /** Gauge tick period (ms). */
  readonly intervalMs: number
}

export const Defaults = { intervalMs: 15_000 } as const satisfies GaugesOptions
/** Tenants reported by `ankusa_tenant_pending` (TEN-1 §4); also the tenant endpoints reported by `ankusa_breaker_state`. */
export const TOP_TENANTS = 100
/** Active tenants, in active-index order, whose pending counter the tick reads (TEN-1 §4). */
export const TOP_TENANTS_SCANNED = 10_000

export interface Reading {
  readonly counters: Counters.TenantCounters
  readonly oldestDueAgeMs: number
  readonly tenants: number
  /** Highest pending first; only tenants with pending > 0. */
  readonly top: ReadonlyArray<{ readonly tenant: string; readonly ord: number; readonly pending: number }>
}

export interface GaugesShape {
  /** Read everything once and set the gauges. */
  readonly tick: Effect.Effect<Reading, StoreError>
}

export class Gauges extends Context.Service<Gauges, GaugesShape>()("ankusa/Gauges") {}

export const make = Effect.gen(function* () {
  const queue = yield* Queue
  const tenantsApi = yield* Tenants
  const pipeline = yield* Effect.serviceOption(Pipeline)
  const endpointBreakers = TopTenants.makeTopGauge(M.BREAKER_STATE, M.BREAKER_STATE_HELP, "destination")

  /** The top TOP_TENANTS of `by` (value > 0), labelled by tenant id. */
  const publishTop = (gauge: ReturnType<typeof TopTenants.makeTopGauge>, by: ReadonlyMap<number, number>) =>
    Effect.gen(function* () {
      const top = [...by].filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, TOP_TENANTS)
      const labels = yield* tenantsApi.labels(top.map(([ord]) => ord))
      yield* gauge.set(top.map(([, value], i) => ({ tenant: labels[i]!, value })))
    })

  const topTenants = (now: number) =>
    Effect.gen(function* () {
      const active = yield* queue.activeTenants(now, TOP_TENANTS_SCANNED)
      if (active.length === 0) return []
      const pending = yield* queue.pendingOf(active.map((t) => t.ord))
      const top = active
        .map((t, i) => ({ ord: t.ord, pending: pending[i] ?? 0 }))
        .filter((t) => t.pending > 0)
        .sort((a, b) => b.pending - a.pending || a.ord - b.ord)
        .slice(0, TOP_TENANTS)
      if (top.length === 0) return []
      const labels = yield* tenantsApi.labels(top.map((t) => t.ord))
      return top.map((t, i) => ({ tenant: labels[i]!, ord: t.ord, pending: t.pending }))
    })

  /** The top TOP_TENANTS tenant endpoints by failed calls since their last success (or whose breaker is not closed). */
  const publishEndpointBreakers = (views: ReadonlyArray<BreakerView>) => {
    const top = views
      .filter((v) => v.destination.startsWith("endpoint:") && (v.failures > 0 || v.state !== "closed"))
      .sort((a, b) => b.failures - a.failures || (a.destination < b.destination ? -1 : 1))
      .slice(0, TOP_TENANTS)
    return endpointBreakers.set(top.map((v) => ({ tenant: v.destination, value: M.breakerStateValue(v.state) })))
  }

  const tick = Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const counters = yield* queue.aggregate
    const oldestDueAgeMs = yield* queue.oldestDueAge(now)
    const tenants = yield* tenantsApi.count
    const top = yield* topTenants(now)

    for (const f of Counters.FieldNames) yield* Metric.update(M.queue[f], counters[f])
    yield* Metric.update(M.oldestDueAge, oldestDueAgeMs / 1000)
    yield* Metric.update(M.tenants, tenants)
    yield* TopTenants.set(top)
    // TEN-3's per-tenant dispatch state, when a pipeline runs beside the gauges.
    if (pipeline._tag === "Some") {
      const stats = yield* pipeline.value.tenantStats
      yield* publishTop(TopTenants.inflight, stats.inflight)
      yield* publishTop(TopTenants.throttled, stats.throttled)
      yield* publishEndpointBreakers(pipeline.value.breakers())
    }
    return { counters, oldestDueAgeMs, tenants, top } satisfies Reading
  })

  return { tick } satisfies GaugesShape
})

/** The service plus its scheduled tick (a failed tick is logged; the next one runs on time). */
export const layer = (options: Partial<GaugesOptions> = {}): Layer.Layer<Gauges, never, Queue | Tenants> =>
  Layer.effect(
    Gauges,
    Effect.gen(function* () {
      const intervalMs = options.intervalMs ?? Defaults.intervalMs
      if (!Number.isInteger(intervalMs) || intervalMs < 1) return yield* Effect.die(new Error(`gauges.intervalMs = ${intervalMs} must be >= 1`))
      const g = yield* make
      const once = g.tick.pipe(Effect.catchCause((cause) => Effect.logError("gauges: tick failed", cause)))
      // The first reading before the layer is up, so every gauge is there from boot.
      yield* once
      yield* once.pipe(Effect.delay(Duration.millis(intervalMs)), Effect.repeat(Schedule.spaced(Duration.millis(intervalMs))), Effect.forkScoped)
      return g
    })
  )
