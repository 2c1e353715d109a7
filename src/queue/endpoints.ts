/**
 * The `Endpoints` service (issue 27): each tenant's endpoints, `<<?e, ord::32, id::64>>` in the
 * tenants column family (docs/storage.md), and the only writer of that family. Every change is
 * one synced batch with its audit row (`Audit.stage`), made under the tenant's lock so that the
 * `tenants.maxEndpoints` bound holds against concurrent creates, and so that a create the
 * tenant's erase refused (the Writer's refusal, asked inside that lock) leaves no row:
 * `eraseTenant` takes the same lock after the refusal is in force.
 *
 * `ofTenant(ord)` is what the ingest path and the delivery side read: a bounded cache of a
 * tenant's endpoints (empty lists included, most tenants have none), filled by one range scan
 * on a miss and updated by this service's own writes, after which `onChange` listeners hear the
 * tenant's ordinal.
 */
import { Clock, Context, Data, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import * as E from "../domain/endpoints.js"
import { TenantErased } from "../domain/tenants.js"
import { decodeEndpointKey, endpointKey, endpointPrefix, range } from "../domain/keys.js"
import { del, type Op, type Put, put } from "../domain/ops.js"
import { Store, type StoreError } from "../store/store.js"
import { makeTenantLocks } from "./tenant-locks.js"

/** Cache entries (a tenant each) at most. */
export const ENDPOINTS_CACHE_TENANTS = 65_536
/** Endpoints held by the cache at most, across its tenants: past it the oldest entries go. */
export const ENDPOINTS_CACHE_ENDPOINTS = 262_144

export class EndpointNotFound extends Data.TaggedError("EndpointNotFound")<{ readonly id: string }> {}
/** The tenant has `tenants.maxEndpoints` endpoints. */
export class EndpointLimit extends Data.TaggedError("EndpointLimit")<{ readonly max: number }> {}

/** The audit row of a change, staged by the caller (`Audit.stage`) once the endpoint is known. */
export type StageAudit = (endpoint: E.Endpoint) => Effect.Effect<Put>

/** The erase refusal a create asks inside the tenant's lock (TEN-5): the Writer's `erased`, and the tenant id. */
export interface EraseRefusal {
  readonly tenant: string
  readonly erased: (tenant: string) => boolean
}

export interface EndpointsShape {
  /** The tenant's endpoints by id, read from the store (one range scan). */
  readonly list: (ord: number) => Effect.Effect<ReadonlyArray<E.Endpoint>, StoreError>
  readonly get: (ord: number, id: string) => Effect.Effect<E.Endpoint, EndpointNotFound | StoreError>
  /**
   * Create (id and, when not given, secret made here) with its audit row in one synced batch.
   * `refusal`, asked under the tenant's lock: an erase that refused the tenant since the caller
   * resolved its ordinal fails the create `TenantErased`, and nothing is written.
   */
  readonly create: (
    ord: number,
    input: E.EndpointCreate,
    max: number,
    audit: StageAudit,
    refusal?: EraseRefusal
  ) => Effect.Effect<E.Endpoint, EndpointLimit | TenantErased | StoreError>
  readonly update: (ord: number, id: string, patch: E.EndpointPatch, audit: StageAudit) => Effect.Effect<E.Endpoint, EndpointNotFound | StoreError>
  /** A new secret (generated), the old one signing beside it for `overlapMs` (`E.rotate`). */
  readonly rotate: (ord: number, id: string, overlapMs: number, audit: StageAudit) => Effect.Effect<E.Endpoint, EndpointNotFound | StoreError>
  /** Delete; answers what was deleted. */
  readonly remove: (ord: number, id: string, audit: StageAudit) => Effect.Effect<E.Endpoint, EndpointNotFound | StoreError>
  /** The tenant's endpoints from the cache (a store read on a miss only). */
  readonly ofTenant: (ord: number) => Effect.Effect<ReadonlyArray<E.Endpoint>, StoreError>
  /** The tenant's endpoints if the cache holds them (no read): the Writer's plain batch. */
  readonly cached: (ord: number) => ReadonlyArray<E.Endpoint> | undefined
  /** Called with the tenant's ordinal after each committed change (the delivery side refreshes). */
  readonly onChange: (listener: (ord: number) => void) => void
  /** TEN-5 step 6: delete all the tenant's endpoints with `extra(how many)` (the erase job's record) in one synced batch. */
  readonly eraseTenant: (ord: number, extra: (deleted: number) => ReadonlyArray<Op>) => Effect.Effect<number, StoreError>
}

export class Endpoints extends Context.Service<Endpoints, EndpointsShape>()("ankusa/Endpoints") {}

/** Most endpoints a tenant's scan reads: above any `tenants.maxEndpoints`. */
const SCAN_LIMIT = E.MAX_ENDPOINTS_LIMIT + 1

/** A bounded map of tenant → endpoints, oldest entries evicted first past either bound. */
const makeCache = () => {
  const entries = new Map<number, ReadonlyArray<E.Endpoint>>()
  let held = 0
  const drop = (ord: number) => {
    const old = entries.get(ord)
    if (old !== undefined) {
      held -= old.length
      entries.delete(ord)
    }
  }
  return {
    get: (ord: number) => entries.get(ord),
    set: (ord: number, list: ReadonlyArray<E.Endpoint>) => {
      drop(ord)
      entries.set(ord, list)
      held += list.length
      for (const oldest of entries.keys()) {
        if (entries.size <= ENDPOINTS_CACHE_TENANTS && held <= ENDPOINTS_CACHE_ENDPOINTS) break
        drop(oldest)
      }
    },
    size: () => entries.size
  }
}

export const make = Effect.gen(function* () {
  const store = yield* Store
  const cache = makeCache()
  const listeners: Array<(ord: number) => void> = []
  const withTenant = makeTenantLocks()
  // Bumped by every write: a fill that read the store before it must not cache what it read.
  let generation = 0

  const list = (ord: number) =>
    Effect.map(store.scan("tenants", range(endpointPrefix(ord)), { limit: SCAN_LIMIT }), (rows) =>
      // A value this build cannot read is left out (store check reports it).
      rows.flatMap((r) => E.decode(decodeEndpointKey(r.key).id, r.value) ?? [])
    )

  const get = (ord: number, id: string) =>
    Effect.suspend(() => {
      const n = E.parseId(id)
      if (n === undefined) return Effect.fail(new EndpointNotFound({ id }))
      return Effect.flatMap(store.get("tenants", endpointKey(ord, n)), (v) => {
        const e = v === undefined ? undefined : E.decode(n, v)
        return e === undefined ? Effect.fail(new EndpointNotFound({ id })) : Effect.succeed(e)
      })
    })

  /** Commit the row change and its audit row, then refresh the tenant's cache entry and tell the listeners. */
  const commit = (ord: number, row: Op, endpoint: E.Endpoint, audit: StageAudit) =>
    Effect.gen(function* () {
      const auditRow = yield* audit(endpoint)
      yield* store.write([row, auditRow], { sync: true })
      generation++
      cache.set(ord, yield* list(ord))
      for (const l of listeners) l(ord)
      return endpoint
    })

  const create = (ord: number, input: E.EndpointCreate, max: number, audit: StageAudit, refusal?: EraseRefusal) =>
    withTenant(
      ord,
      Effect.gen(function* () {
        const existing = yield* list(ord)
        if (existing.length >= max) return yield* new EndpointLimit({ max })
        const taken = new Set(existing.map((e) => e.id))
        let id = E.idFrom(randomBytes(8))
        while (taken.has(E.formatId(id))) id = E.idFrom(randomBytes(8))
        const now = yield* Clock.currentTimeMillis
        const endpoint = E.create(input, { id, secret: E.secretFrom(randomBytes(E.SECRET_BYTES)), now })
        // Asked last, right before the commit: nothing of the tenant is written once its erase refused it.
        if (refusal?.erased(refusal.tenant) === true) return yield* new TenantErased({ tenant: refusal.tenant })
        return yield* commit(ord, put("tenants", endpointKey(ord, id), E.encode(endpoint)), endpoint, audit)
      })
    )

  const rotate = (ord: number, id: string, overlapMs: number, audit: StageAudit) =>
    withTenant(
      ord,
      Effect.gen(function* () {
        const before = yield* get(ord, id)
        const after = E.rotate(before, E.secretFrom(randomBytes(E.SECRET_BYTES)), yield* Clock.currentTimeMillis, overlapMs)
        return yield* commit(ord, put("tenants", endpointKey(ord, E.parseId(id)!), E.encode(after)), after, audit)
      })
    )

  const update = (ord: number, id: string, patch: E.EndpointPatch, audit: StageAudit) =>
    withTenant(
      ord,
      Effect.gen(function* () {
        const before = yield* get(ord, id)
        const after = E.patch(before, patch, yield* Clock.currentTimeMillis)
        return yield* commit(ord, put("tenants", endpointKey(ord, E.parseId(id)!), E.encode(after)), after, audit)
      })
    )

  const remove = (ord: number, id: string, audit: StageAudit) =>
    withTenant(
      ord,
      Effect.flatMap(get(ord, id), (before) => commit(ord, del("tenants", endpointKey(ord, E.parseId(id)!)), before, audit))
    )

  const ofTenant = (ord: number) =>
    Effect.suspend(() => {
      const hit = cache.get(ord)
      if (hit !== undefined) return Effect.succeed(hit)
      const seen = generation
      return Effect.map(list(ord), (l) => {
        if (seen === generation) cache.set(ord, l)
        return l
      })
    })

  const eraseTenant = (ord: number, extra: (deleted: number) => ReadonlyArray<Op>) =>
    withTenant(
      ord,
      Effect.gen(function* () {
        const rows = yield* store.scan("tenants", range(endpointPrefix(ord)), { limit: SCAN_LIMIT })
        yield* store.write([...rows.map((r) => del("tenants", r.key)), ...extra(rows.length)], { sync: true })
        generation++
        cache.set(ord, [])
        for (const l of listeners) l(ord)
        return rows.length
      })
    )

  return {
    list,
    get,
    create,
    update,
    rotate,
    remove,
    ofTenant,
    cached: (ord) => cache.get(ord),
    onChange: (listener) => void listeners.push(listener),
    eraseTenant
  } satisfies EndpointsShape
})

export const layer: Layer.Layer<Endpoints, never, Store> = Layer.effect(Endpoints, make)
