/**
 * `ankusa_tenant_pending{tenant}` (TEN-1 §4): the pending rows of the last
 * gauge tick's top tenants, and only theirs. Each tick replaces the whole set:
 * the series of a tenant that left the top is removed from the metric
 * registry, so /metrics (and the registry's memory) holds at most
 * `Gauges.TOP_TENANTS` of these series over a node's life.
 */
import { Effect, Metric } from "effect"

export const NAME = "ankusa_tenant_pending"
export const HELP = "Pending rows of the top tenants by pending (among the first 10,000 active), as of the last gauge tick"

export interface TenantPending {
  readonly tenant: string
  readonly pending: number
}

const seriesOf = (tenant: string) => Metric.gauge(NAME, { description: HELP, attributes: { tenant } })

let shown: ReadonlyArray<TenantPending> = []

/** Replace the reported tenants with `top` (the gauge tick's ranking). */
export const set = (top: ReadonlyArray<TenantPending>): Effect.Effect<void> =>
  Effect.suspend(() => {
    const next = top.map((t) => ({ tenant: t.tenant, pending: t.pending }))
    const kept = new Set(next.map((t) => t.tenant))
    const gone = shown.filter((t) => !kept.has(t.tenant))
    shown = next
    return Effect.andThen(
      Effect.forEach(gone, (t) => Metric.remove(seriesOf(t.tenant)), { discard: true }),
      Effect.forEach(next, (t) => Metric.update(seriesOf(t.tenant), t.pending), { discard: true })
    )
  })

/** The tenants reported now, in rank order. */
export const current = (): ReadonlyArray<TenantPending> => shown
