/**
 * The `Tenants` service: point lookups between tenant ids and ordinals
 * (TEN-1 §2) and the O(1) tenant count (§5, `ankusa_tenants`). Read-only:
 * only the Writer allocates ordinals (src/queue/writer.ts).
 */
import { Context, Data, Effect, Layer } from "effect"
import { decodeU32, Meta, tenantKey, tenantOrdKey } from "../domain/keys.js"
import { countOf } from "../domain/tenants.js"
import { Store, type StoreError } from "../store/store.js"

/** No `?n` row for the tenant id, or no live `?t` row for the ordinal (never allocated or erased). */
export class TenantNotFound extends Data.TaggedError("TenantNotFound")<{
  readonly tenantId?: string
  readonly ord?: number
}> {}

export interface TenantsShape {
  /** `?n` point read. A tenant with no row has no rows anywhere, so a scoped read of it is empty without a scan. */
  readonly ord: (tenantId: string) => Effect.Effect<number, TenantNotFound | StoreError>
  /** `?t` point read; an empty value is an erased tenant's tombstone (TEN-5). */
  readonly name: (ord: number) => Effect.Effect<string, TenantNotFound | StoreError>
  /** Labels of ordinals for metrics, one multi-get: the tenant id, or `#<ord>` for an erased (or unknown) one. */
  readonly labels: (ords: ReadonlyArray<number>) => Effect.Effect<Array<string>, StoreError>
  /** Ordinals ever allocated, tombstones included: `m:next_ord - 1`, one point read. */
  readonly count: Effect.Effect<number, StoreError>
}

export class Tenants extends Context.Service<Tenants, TenantsShape>()("ankusa/Tenants") {}

export const make = Effect.gen(function* () {
  const store = yield* Store
  const service: TenantsShape = {
    ord: (tenantId) =>
      store.get("tenants", tenantOrdKey(tenantId)).pipe(
        Effect.flatMap((v) => (v === undefined ? Effect.fail(new TenantNotFound({ tenantId })) : Effect.succeed(decodeU32(v))))
      ),
    name: (ord) =>
      // Ord 0 is the aggregate, not a tenant; anything outside u32 cannot be a key.
      !Number.isInteger(ord) || ord < 1 || ord > 0xffff_ffff
        ? Effect.fail(new TenantNotFound({ ord }))
        : store.get("tenants", tenantKey(ord)).pipe(
            Effect.flatMap((v) =>
              v === undefined || v.length === 0
                ? Effect.fail(new TenantNotFound({ ord }))
                : Effect.succeed(Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("utf8"))
            )
          ),
    labels: (ords) =>
      ords.length === 0
        ? Effect.succeed([])
        : store.multiGet("tenants", ords.map(tenantKey)).pipe(
            // An erased tenant's `?t` is an empty tombstone (TEN-5).
            Effect.map((names) => names.map((v, i) => (v === undefined || v.length === 0 ? `#${ords[i]}` : Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("utf8"))))
          ),
    count: store.get("default", Meta.nextOrd).pipe(Effect.map(countOf))
  }
  return service
})

export const layer: Layer.Layer<Tenants, never, Store> = Layer.effect(Tenants, make)
