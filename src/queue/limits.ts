/**
 * The `Limits` service (TEN-3, issue 14): each tenant's dispatch limits, the
 * configured defaults (`tenants.limits`) with the tenant's stored override
 * (`<<?l, ord::32>>` in the tenants column family) laid over them. The only
 * writer of that family. The pipeline asks every tick for the tenants it
 * serves, so reads go through a bounded cache; a set commits the override
 * with its audit row in one synced batch and then updates the cache, so the
 * next tick sees it without a restart. A set runs under the tenant's lock and
 * asks the erase refusal there (TEN-5): erase deletes the override under the
 * same lock once the refusal is in force, so no set after it leaves a row.
 *
 * Admission (TEN-2, issue 24) reads a tenant's ingest limits on the request
 * path without a store read: the overrides that set an ingest field are kept
 * in memory by tenant id, all of them, read once when the service starts (one
 * scan of `?l` and a multi-get of the names) and updated by every set; the
 * defaults under them follow a reload like the rest. So do the tenants' ingest
 * rate buckets (`ingestRate`): every path that takes a hook of a tenant (ingest,
 * a test event) spends from the one bucket.
 */
import { Context, Effect, Layer, Stream } from "effect"
import { LiveConfig } from "../config/live.js"
import { Families, familyDataRange } from "../domain/families.js"
import { decodeTenantLimitsKey, tenantKey, tenantLimitsKey } from "../domain/keys.js"
import * as A from "../domain/admission.js"
import * as L from "../domain/limits.js"
import { del, type Op, type Put, put } from "../domain/ops.js"
import { Store, type StoreError, type StoreShape } from "../store/store.js"
import { makeTenantLocks } from "./tenant-locks.js"
import { TenantNotFound } from "./tenants.js"

/** Tenants whose effective limits the cache holds; it is cleared whole when full. */
export const LIMITS_CACHE_ENTRIES = 100_000
/** Ingest rate buckets kept before the full ones are swept (at most once a second); a bucket not yet refilled is never dropped. */
export const INGEST_BUCKETS_SWEEP = 65_536

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
   * then cache it. The ordinal must be a live tenant's (the caller resolved it). `erased` (the
   * Writer's refusal) is asked under the tenant's lock: a tenant an erase refused since the caller
   * resolved it fails `TenantNotFound`, as it will once the erase is done, and nothing is written.
   */
  readonly set: (
    ord: number,
    override: L.LimitsOverride,
    auditRow: Put,
    tenant: string,
    erased?: (tenant: string) => boolean
  ) => Effect.Effect<void, StoreError | TenantNotFound>
  /** TEN-5 step 6: delete the tenant's override with `extra` (the erase job's record) in one synced batch, under the tenant's lock. */
  readonly eraseTenant: (ord: number, tenant: string, extra: ReadonlyArray<Op>) => Effect.Effect<void, StoreError>
  /** A tenant's effective ingest limits, from memory (no store read): the ingest path asks per request. */
  readonly ingestOf: (tenant: string) => L.IngestLimits
  /**
   * The tenant's ingest rate at `now` (`ingestPerSec`): undefined when a token is there, taken when
   * `take`; else its refusal. Asked before a body is read (`take` false) and spent once the hook is
   * verified, so a request whose signature fails spends nothing.
   */
  readonly ingestRate: (tenant: string, now: number, take: boolean) => A.TenantRate | undefined
}

export class Limits extends Context.Service<Limits, LimitsShape>()("ankusa/Limits") {}

export const make = (initial: L.TenantLimits) =>
  Effect.gen(function* () {
    const store = yield* Store
    const cache = new Map<number, L.TenantLimits>()
    const ingest = yield* loadIngest(store)
    // Bumped by every set and reload: a fill that read the store before must not cache the old value.
    let generation = 0
    let defaults = initial
    // A reload's `tenants.limits` apply from the next tick (docs/configuration.md "Reloading").
    const live = yield* Effect.serviceOption(LiveConfig)
    if (live._tag === "Some") {
      live.value.onChange((g) => {
        if (JSON.stringify(g.config.tenants.limits) === JSON.stringify(defaults)) return
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

    const withTenant = makeTenantLocks()

    /** The override's row with `extra` in one synced batch, then the caches (run under the tenant's lock). */
    const commit = (ord: number, override: L.LimitsOverride, extra: ReadonlyArray<Op>, tenant: string) =>
      Effect.suspend(() => {
        const key = tenantLimitsKey(ord)
        const row = L.isEmpty(override) ? del("tenants", key) : put("tenants", key, L.encode(override))
        return Effect.map(store.write([row, ...extra], { sync: true }), () => {
          generation++
          remember(ord, L.effective(defaults, override))
          if (L.hasIngest(override)) ingest.set(tenant, override)
          else ingest.delete(tenant)
        })
      })

    const set = (ord: number, override: L.LimitsOverride, auditRow: Put, tenant: string, erased?: (tenant: string) => boolean) =>
      withTenant(
        ord,
        Effect.suspend((): Effect.Effect<void, StoreError | TenantNotFound> =>
          erased?.(tenant) === true ? Effect.fail(new TenantNotFound({ tenantId: tenant })) : commit(ord, override, [auditRow], tenant)
        )
      )

    const eraseTenant = (ord: number, tenant: string, extra: ReadonlyArray<Op>) => withTenant(ord, commit(ord, {}, extra, tenant))

    const ingestOf = (tenant: string): L.IngestLimits => {
      const o = ingest.get(tenant)
      return o === undefined
        ? defaults
        : { ingestPerSec: o.ingestPerSec ?? defaults.ingestPerSec, maxQueuedBytes: o.maxQueuedBytes ?? defaults.maxQueuedBytes }
    }

    const ingestRate = makeIngestRate(ingestOf)

    return { of, get, set, eraseTenant, ingestOf, ingestRate } satisfies LimitsShape
  })

/** Every override that sets an ingest field, by tenant id: one scan of `?l`, then the names of those ordinals. */
const loadIngest = (store: StoreShape) =>
  Effect.gen(function* () {
    const rows = yield* Stream.runCollect(store.stream("tenants", familyDataRange(Families.tenant_limits)))
    const found: Array<readonly [number, L.LimitsOverride]> = []
    for (const row of rows) {
      const override = L.decode(row.value)
      if (override !== undefined && L.hasIngest(override)) found.push([decodeTenantLimitsKey(row.key), override])
    }
    const out = new Map<string, L.LimitsOverride>()
    if (found.length === 0) return out
    const names = yield* store.multiGet("tenants", found.map(([ord]) => tenantKey(ord)))
    found.forEach(([, override], i) => {
      const v = names[i]
      // An erased tenant's name is an empty tombstone: nothing to admit.
      if (v !== undefined && v.length > 0) out.set(Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("utf8"), override)
    })
    return out
  })

/** The tenants' ingest token buckets (TEN-2), bounded by the sweep of the refilled ones. */
const makeIngestRate = (ingestOf: (tenant: string) => L.IngestLimits): LimitsShape["ingestRate"] => {
  const buckets = new Map<string, A.Bucket>()
  let swept = 0
  const sweep = (now: number) => {
    swept = now
    for (const [tenant, b] of buckets) if (A.refill(b, b.perSec, now).tokens >= A.capacityOf(b.perSec)) buckets.delete(tenant)
  }
  return (tenant, now, take) => {
    const perSec = ingestOf(tenant).ingestPerSec
    if (perSec === 0) return undefined
    let b = buckets.get(tenant)
    if (b === undefined) {
      // Once a second at most: a sweep that finds little to drop is not repeated on every new tenant.
      if (buckets.size >= INGEST_BUCKETS_SWEEP && now - swept >= 1_000) sweep(now)
      b = { tokens: A.capacityOf(perSec), at: now, perSec }
      buckets.set(tenant, b)
    }
    // A limit changed by an override applies from the next request on.
    b.perSec = perSec
    const there = take ? A.take(b, perSec, now) : A.available(b, perSec, now)
    return there === true ? undefined : new A.TenantRate({ perSec, retryAfterS: there })
  }
}

export const layer = (defaults: L.TenantLimits): Layer.Layer<Limits, StoreError, Store> => Layer.effect(Limits, make(defaults))
