/**
 * The gauge tick (TEN-1 §4–§5; docs/architecture.md "The pipeline"): queue
 * state from the six counters of ord 0 (one multi-get), the oldest due age
 * from the active index, the tenant count from `m:next_ord`, and the top
 * tenants by pending from the first active tenants. It never scans the due,
 * inflight, dead or archive families: its cost does not grow with the backlog.
 */
import { Clock, Context, Duration, Effect, Layer, Metric, Schedule } from "effect"
import * as Counters from "../domain/counters.js"
import * as K from "../domain/keys.js"
import { countOf } from "../domain/tenants.js"
import * as M from "./delivery-metrics.js"
import { Queue } from "../queue/queue.js"
import { Store, type StoreError } from "../store/store.js"
import * as TopTenants from "./top-tenants-metric.js"

export interface GaugesOptions {
  /** Gauge tick period (ms). */
  readonly intervalMs: number
}

export const Defaults = { intervalMs: 15_000 } as const satisfies GaugesOptions
/** Tenants reported by `ankusa_tenant_pending` (TEN-1 §4). */
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
  const store = yield* Store
  const queue = yield* Queue

  const topTenants = (now: number) =>
    Effect.gen(function* () {
      const active = yield* queue.activeTenants(now, TOP_TENANTS_SCANNED)
      if (active.length === 0) return []
      const pending = yield* store.getCounters("counters", active.map((t) => K.counterKey(t.ord, Counters.Fields.pending)))
      const top = active
        .map((t, i) => ({ ord: t.ord, pending: Number(pending[i] ?? 0n) }))
        .filter((t) => t.pending > 0)
        .sort((a, b) => b.pending - a.pending || a.ord - b.ord)
        .slice(0, TOP_TENANTS)
      if (top.length === 0) return []
      const names = yield* store.multiGet("tenants", top.map((t) => K.tenantKey(t.ord)))
      return top.map((t, i) => {
        const name = names[i]
        // An erased tenant's `?t` is an empty tombstone (TEN-5): label it by ordinal.
        const tenant = name === undefined || name.length === 0 ? `#${t.ord}` : K.asBuffer(name).toString("utf8")
        return { tenant, ord: t.ord, pending: t.pending }
      })
    })

  const tick = Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const counters = yield* queue.aggregate
    const oldestDueAgeMs = yield* queue.oldestDueAge(now)
    const tenants = countOf(yield* store.get("default", K.Meta.nextOrd))
    const top = yield* topTenants(now)

    for (const f of Counters.FieldNames) yield* Metric.update(M.queue[f], counters[f])
    yield* Metric.update(M.oldestDueAge, oldestDueAgeMs / 1000)
    yield* Metric.update(M.tenants, tenants)
    yield* TopTenants.set(top)
    return { counters, oldestDueAgeMs, tenants, top } satisfies Reading
  })

  return { tick } satisfies GaugesShape
})

/** The service plus its scheduled tick (a failed tick is logged; the next one runs on time). */
export const layer = (options: Partial<GaugesOptions> = {}): Layer.Layer<Gauges, never, Store | Queue> =>
  Layer.effect(
    Gauges,
    Effect.gen(function* () {
      const intervalMs = options.intervalMs ?? Defaults.intervalMs
      if (!Number.isInteger(intervalMs) || intervalMs < 1) return yield* Effect.die(new Error(`gauges.intervalMs = ${intervalMs} must be >= 1`))
      const g = yield* make
      yield* g.tick.pipe(
        Effect.catchCause((cause) => Effect.logError("gauges: tick failed", cause)),
        Effect.repeat(Schedule.spaced(Duration.millis(intervalMs))),
        Effect.forkScoped
      )
      return g
    })
  )
