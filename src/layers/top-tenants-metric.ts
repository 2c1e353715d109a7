/**
 * `ankusa_tenant_pending{tenant}` (TEN-1 §4): the pending rows of the last
 * gauge tick's top tenants, and only theirs. It is kept outside Effect's
 * metric registry, which never forgets a series: there a tenant that once
 * ranked stayed in /metrics (at 0) until the process restarted, so over a
 * node's life the exposition, and the registry's memory, grew with every
 * tenant that ever ranked. Here each tick replaces the whole set, so /metrics
 * holds at most `Gauges.TOP_TENANTS` of these series.
 */
import { Effect } from "effect"

export const NAME = "ankusa_tenant_pending"
export const HELP = "Pending rows of the top tenants by pending (among the first 10,000 active), as of the last gauge tick"

export interface TenantPending {
  readonly tenant: string
  readonly pending: number
}

let shown: ReadonlyArray<TenantPending> = []

/** Replace the reported tenants with `top` (the gauge tick's ranking). */
export const set = (top: ReadonlyArray<TenantPending>): Effect.Effect<void> =>
  Effect.sync(() => {
    shown = top.map((t) => ({ tenant: t.tenant, pending: t.pending }))
  })

/** The tenants reported now, in rank order. */
export const current = (): ReadonlyArray<TenantPending> => shown
