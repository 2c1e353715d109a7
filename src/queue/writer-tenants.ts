/**
 * A tenant's ordinal outside ingest (TEN-1 §2): the Writer is the only allocator, so this runs in
 * its commit section, with its state and cache, and writes the same `?n`/`?t` rows and
 * `m:next_ord` as an ingest batch that meets a new tenant, synced. An erased (refused) tenant id
 * gets none; past `tenants.max` none either.
 */
import { Effect, Metric } from "effect"
import * as Keys from "../domain/keys.js"
import * as TenantOrds from "../domain/tenants.js"
import { TenantErased, TenantLimit } from "../domain/tenants.js"
import { tenants as tenantsGauge } from "../observability/delivery-metrics.js"
import type { StoreError, StoreShape } from "../store/store.js"

export const allocateOrd =
  (deps: {
    readonly section: <A, E, R>(e: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
    readonly store: StoreShape
    readonly state: { nextOrd: number; readonly refused: ReadonlySet<string> }
    readonly cache: Map<string, number>
    readonly tenantsMax: number
  }) =>
  (tenant: string): Effect.Effect<number, TenantLimit | TenantErased | StoreError> =>
    deps.section(
      Effect.gen(function* () {
        if (deps.state.refused.has(tenant)) return yield* new TenantErased({ tenant })
        const hit = deps.cache.get(tenant)
        if (hit !== undefined) return hit
        const v = yield* deps.store.get("tenants", Keys.tenantOrdKey(tenant))
        if (v !== undefined) return Keys.decodeU32(v)
        const ord = deps.state.nextOrd
        if (ord > deps.tenantsMax) return yield* new TenantLimit({ max: deps.tenantsMax })
        yield* deps.store.write([...TenantOrds.allocate(tenant, ord), TenantOrds.nextOrdOp(ord + 1)], { sync: true })
        deps.state.nextOrd = ord + 1
        deps.cache.set(tenant, ord)
        yield* Metric.update(tenantsGauge, ord)
        return ord
      })
    )
