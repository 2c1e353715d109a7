/**
 * The `Limits` service (TEN-3, issue 14): each tenant's dispatch limits, the
 * configured defaults (`tenants.limits`) with the tenant's stored override
 * (`<<?l, ord::32>>` in the tenants column family) laid over them. The only
 * writer of that family. The pipeline asks every tick for the tenants it
 * serves, so reads go through a bounded cache; a set commits the override
 * with its audit row in one synced batch and then updates the cache, so the
 * next tick sees it without a restart.
 */
import { Context, Effect, Layer } from "effect"
import { LiveConfig } from "../config/live.js"
import { tenantLimitsKey } from "../domain/keys.js"
import * as L from "../domain/limits.js"
import { del, type Put, put } from "../domain/ops.js"
import { Store, type StoreError } from "../store/store.js"

/** Tenants whose effective limits the cache holds; it is cleared whole when full. */
export const LIMITS_CACHE_ENTRIES = 100_000

export interface TenantLimitsView {
  readonly effective: L.TenantLimits
  /** What the tenant overrides; `{}` when nothing. */
  readonly override: L.LimitsOverride
}

export interface LimitsShape {
  /** Effective limits of each ordinal, in order: cached, and one multi-get for the misses. */
  readonly of: (ords: ReadonlyArray<number>) => Effect.Effect<ReadonlyArray<L.TenantLimits>, StoreError>
  /** One point read, past the cache: what the store holds now. */
  readonly get: (ord: number) => Effect.Effect<TenantLimitsView, StoreError>
  /**
   * Store the override (`{}` deletes it) and `auditRow` (`Audit.stage`) in one synced batch,
   * then cache it. The ordinal must be a live tenant's (the caller resolved it).
   */
  readonly set: (ord: number, override: L.LimitsOverride, auditRow: Put) => Effect.Effect<void, StoreError>
}

export class Limits extends Context.Service<Limits, LimitsShape>()("ankusa/Limits") {}

export const make = (initial: L.TenantLimits) =>
  Effect.gen(function* () {
    const store = yield* Store
    const cache = new Map<number, L.TenantLimits>()
    // Bumped by every set and reload: a fill that read the store before must not cache the old value.
    let generation = 0
    let defaults = initial
    // A reload's `tenants.limits` apply from the next tick (docs/configuration.md "Reloading").
    const live = yield* Effect.serviceOption(LiveConfig)
    if (live._tag === "Some") {
      live.value.onChange((g) => {
        if (g.config.tenants.limits === defaults) return
        defaults = g.config.tenants.limits
        generation++
        cache.clear()
      })
    }

    const remember = (ord: number, limits: L.TenantLimits) => {
      if (cache.size >= LIMITS_CACHE_ENTRIES && !cache.has(ord)) cache.clear()
      cache.set(ord, limits)
    }
    // A value this build cannot read counts as no override (store check reports it).
    const overrideOf = (v: Uint8Array | undefined): L.LimitsOverride | undefined => (v === undefined ? undefined : L.decode(v))

    const fill = (ords: ReadonlyArray<number>, out: Array<L.TenantLimits>, misses: ReadonlyArray<number>) => {
      const seen = generation
      return Effect.map(store.multiGet("tenants", misses.map((i) => tenantLimitsKey(ords[i]!))), (values) => {
        const fresh = seen === generation
        for (let j = 0; j < misses.length; j++) {
          const i = misses[j]!
          const limits = L.effective(defaults, overrideOf(values[j]))
          out[i] = limits
          if (fresh) remember(ords[i]!, limits)
        }
        return out
      })
    }

    const of = (ords: ReadonlyArray<number>) =>
      Effect.suspend(() => {
        const out = new Array<L.TenantLimits>(ords.length)
        let misses: Array<number> | undefined
        for (let i = 0; i < ords.length; i++) {
          const hit = cache.get(ords[i]!)
          if (hit !== undefined) out[i] = hit
          else (misses ??= []).push(i)
        }
        return misses === undefined ? Effect.succeed(out) : fill(ords, out, misses)
      })

    const get = (ord: number) =>
      Effect.map(store.get("tenants", tenantLimitsKey(ord)), (v): TenantLimitsView => {
        const override = overrideOf(v) ?? {}
        return { effective: L.effective(defaults, override), override }
      })

    const set = (ord: number, override: L.LimitsOverride, auditRow: Put) =>
      Effect.suspend(() => {
        const key = tenantLimitsKey(ord)
        const row = L.isEmpty(override) ? del("tenants", key) : put("tenants", key, L.encode(override))
        return Effect.map(store.write([row, auditRow], { sync: true }), () => {
          generation++
          remember(ord, L.effective(defaults, override))
        })
      })

    return { of, get, set } satisfies LimitsShape
  })

export const layer = (defaults: L.TenantLimits): Layer.Layer<Limits, never, Store> => Layer.effect(Limits, make(defaults))
