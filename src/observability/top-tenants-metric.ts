/**
 * Gauges by tenant for the top tenants only (TEN-1 §4, TEN-3): `ankusa_tenant_pending{tenant}`,
 * `ankusa_tenant_inflight{tenant}` and `ankusa_tenant_throttled{tenant}`, as of the last gauge
 * tick. Each tick replaces a gauge's whole set: the series of a tenant that left its top is removed
 * from the metric registry, so /metrics (and the registry's memory) holds at most
 * `Gauges.TOP_TENANTS` series of each over a node's life. The same rule bounds the tenant endpoints'
 * `ankusa_breaker_state{destination}` series.
 */
import { Effect, Metric } from "effect"

export const NAME = "ankusa_tenant_pending"
export const HELP = "Pending rows of the top tenants by pending (among the first 10,000 active), as of the last gauge tick"

export interface TenantPending {
  readonly tenant: string
  readonly pending: number
}

export interface TenantValue {
  readonly tenant: string
  readonly value: number
}

/** A gauge by tenant (or by another `label`, whose value `tenant` then holds) whose reported set each `set` replaces. */
export const makeTopGauge = (name: string, help: string, label = "tenant") => {
  const seriesOf = (tenant: string) => Metric.gauge(name, { description: help, attributes: { [label]: tenant } })
  let shown: ReadonlyArray<TenantValue> = []
  return {
    set: (top: ReadonlyArray<TenantValue>): Effect.Effect<void> =>
      Effect.suspend(() => {
        const next = top.map((t) => ({ tenant: t.tenant, value: t.value }))
        const kept = new Set(next.map((t) => t.tenant))
        const gone = shown.filter((t) => !kept.has(t.tenant))
        shown = next
        return Effect.andThen(
          Effect.forEach(gone, (t) => Metric.remove(seriesOf(t.tenant)), { discard: true }),
          Effect.forEach(next, (t) => Metric.update(seriesOf(t.tenant), t.value), { discard: true })
        )
      }),
    current: (): ReadonlyArray<TenantValue> => shown
  }
}

const pending = makeTopGauge(NAME, HELP)

/** Replace the reported tenants with `top` (the gauge tick's ranking). */
export const set = (top: ReadonlyArray<TenantPending>): Effect.Effect<void> => pending.set(top.map((t) => ({ tenant: t.tenant, value: t.pending })))

/** The tenants reported now, in rank order. */
export const current = (): ReadonlyArray<TenantPending> => pending.current().map((t) => ({ tenant: t.tenant, pending: t.value }))

/** TEN-3: rows claimed and not settled, of the top tenants by that count. */
export const inflight = makeTopGauge("ankusa_tenant_inflight", "Rows claimed and not yet settled of the top tenants by that count, as of the last gauge tick")

/** TEN-3: rows its limits (max inflight, rate) held back, since the previous gauge tick, of the top tenants by that count. */
export const throttled = makeTopGauge(
  "ankusa_tenant_throttled",
  "Claim offers a tenant's max inflight or rate limit held back since the previous gauge tick, top tenants by that count"
)
