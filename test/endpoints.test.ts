/**
 * Tenant endpoints (issue 27), below the API: the value codec, the input Schemas, the event-type
 * filter, the SSRF classifier's CIDR parsing, and the `Endpoints` service on the memory store and
 * on RocksDB across a restart (with `store check` and the additive family at open).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import fc from "fast-check"
import * as E from "../src/domain/endpoints.js"
import * as K from "../src/domain/keys.js"
import { del, put } from "../src/domain/ops.js"
import * as Ssrf from "../src/domain/ssrf.js"
import * as TenantOrds from "../src/domain/tenants.js"
import * as Audit from "../src/lifecycle/audit.js"
import { make as makeEndpoints } from "../src/queue/endpoints.js"
import { checkStore } from "../src/queue/format/check.js"
import { makeMemoryStore, MemoryDb } from "../src/store/memory.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import { Store, type StoreShape } from "../src/store/store.js"
import { tempDir } from "./edge-harness.js"

const endpoint: fc.Arbitrary<E.Endpoint> = fc.record({
  id: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }).map(E.formatId),
  url: fc.webUrl(),
  description: fc.string({ maxLength: 40 }),
  eventTypes: fc.array(fc.stringMatching(/^[a-z][a-z.]{0,10}(\.\*)?$/), { maxLength: 4 }),
  headers: fc.dictionary(fc.stringMatching(/^x-[a-z]{1,8}$/), fc.string({ maxLength: 20 }), { maxKeys: 3 }).map((h) => ({ ...h })),
  secret: fc.uint8Array({ minLength: 16, maxLength: 32 }).map(E.secretFrom),
  ratePerSec: fc.oneof(fc.constant(0), fc.double({ min: 0, max: E.RATE_MAX, noNaN: true })),
  concurrency: fc.integer({ min: 1, max: E.CONCURRENCY_MAX }),
  disabled: fc.boolean(),
  disabledReason: fc.option(fc.string({ maxLength: 20 }), { nil: null }),
  createdAt: fc.integer({ min: 0, max: 2 ** 45 }),
  updatedAt: fc.integer({ min: 0, max: 2 ** 45 })
})

describe("endpoints: the domain", () => {
  it("an endpoint round-trips through its stored value and bad bytes decode to undefined", () => {
    fc.assert(fc.property(endpoint, (e) => {
      expect(E.decode(E.parseId(e.id)!, E.encode(e))).toEqual(e)
    }))
    fc.assert(fc.property(fc.uint8Array({ maxLength: 40 }), (bytes) => {
      const d = E.decode(1, bytes)
      if (d !== undefined) expect(E.decode(1, E.encode(d))).toEqual(d)
    }))
    const good = K.asBuffer(E.encode(fc.sample(endpoint, 1)[0]!))
    for (const bad of [new Uint8Array(0), Buffer.from([2, ...good.subarray(1)]), good.subarray(0, good.length - 1), Buffer.from([1, 0x7b, 0x7d])]) {
      expect(E.decode(1, bad)).toBeUndefined()
    }
  })

  it("ids are made by the server and parsed back; keys order by tenant then id", () => {
    fc.assert(fc.property(fc.uint8Array({ minLength: 8, maxLength: 8 }), (b) => {
      const n = E.idFrom(b)
      expect(n).toBeGreaterThan(0)
      expect(n).toBeLessThanOrEqual(Number.MAX_SAFE_INTEGER)
      expect(E.parseId(E.formatId(n))).toBe(n)
      expect(K.decodeEndpointKey(K.endpointKey(7, n))).toEqual({ ord: 7, id: n })
    }))
    for (const bad of ["ep_", "ep_0000000000000g", "ep_00000000000000", "ep_ffffffffffffff", "x_00000000000001"]) expect(E.parseId(bad)).toBeUndefined()
    expect(K.familyOf("tenants", K.endpointKey(1, 1))).toBe("endpoints")
    expect(Buffer.compare(K.endpointKey(1, Number.MAX_SAFE_INTEGER), K.endpointKey(2, 1))).toBeLessThan(0)
  })

  it("event type filters match exact names and prefixes; a hook without a type matches only unfiltered endpoints", () => {
    const f = (eventTypes: ReadonlyArray<string>, t: string | undefined) => E.matches({ eventTypes }, t)
    expect(f([], undefined)).toBe(true)
    expect(f([], "invoice.paid")).toBe(true)
    expect(f(["invoice.paid"], "invoice.paid")).toBe(true)
    expect(f(["invoice.paid"], "invoice.paid.late")).toBe(false)
    expect(f(["invoice.*"], "invoice.paid")).toBe(true)
    expect(f(["invoice.*"], "invoice.paid.late")).toBe(true)
    expect(f(["invoice.*"], "invoice")).toBe(false)
    expect(f(["invoice.*"], "invoices.paid")).toBe(false)
    expect(f(["user.created", "invoice.*"], "user.created")).toBe(true)
    expect(f(["invoice.*"], undefined)).toBe(false)
  })

  it("the create and patch bodies name the refused field", () => {
    const msg = (r: ReturnType<typeof E.decodeCreate>) => (Result.isFailure(r) ? String(r.failure) : "ok")
    expect(msg(E.decodeCreate({ url: "https://example.com/hook" }))).toBe("ok")
    const refused: ReadonlyArray<readonly [unknown, RegExp]> = [
      [{}, /url/],
      [{ url: "ftp://example.com" }, /http/],
      [{ url: "https://u:p@example.com" }, /user:password/],
      [{ url: "https://example.com", headers: { Host: "x" } }, /Host/],
      [{ url: "https://example.com", headers: { "content-length": "1" } }, /framing/],
      [{ url: "https://example.com", headers: { "webhook-signature": "v1,x" } }, /signature header/],
      [{ url: "https://example.com", headers: { "x-a": "a\r\nb" } }, /header value HTTP can send/],
      [{ url: "https://example.com", eventTypes: ["*"] }, /prefix/],
      [{ url: "https://example.com", concurrency: 0 }, /1 to 64/],
      [{ url: "https://example.com", secret: "whsec_c2hvcnQ=" }, /16 to 64 bytes/],
      [{ url: "https://example.com", extra: 1 }, /extra/]
    ]
    for (const [body, re] of refused) expect(msg(E.decodeCreate(body)), JSON.stringify(body)).toMatch(re)
    const created = E.create({ url: "https://example.com", eventTypes: ["a", "a"] }, { id: 1, secret: "whsec_x", now: 5 })
    expect(created).toMatchObject({ id: "ep_00000000000001", eventTypes: ["a"], concurrency: E.CONCURRENCY_DEFAULT, disabled: false, secret: "whsec_x" })
    const off = E.patch(created, { disabled: true, disabledReason: "paused" }, 9)
    expect(off).toMatchObject({ disabled: true, disabledReason: "paused", updatedAt: 9, createdAt: 5 })
    expect(E.patch(off, { disabled: false }, 10).disabledReason).toBeNull()
  })

  it("allowNetworks CIDRs parse, and refuse host bits past the prefix", () => {
    expect(Ssrf.parseCidr("127.0.0.0/8")).toMatchObject({ version: 4, bits: 8 })
    expect(Ssrf.parseCidr("::1/128")).toMatchObject({ version: 6, bits: 128, value: 1n })
    expect(Ssrf.parseCidr("10.1.2.3")).toMatchObject({ bits: 32 })
    for (const bad of ["10.0.0.1/8", "10.0.0.0/33", "fe80::/129", "nope", "10.0.0.0/8/1", "1.2.3/24"]) expect(Ssrf.parseCidr(bad), bad).toBeUndefined()
  })
})

const stage = (audit: Audit.AuditShape, action: "endpoint.create" | "endpoint.update" | "endpoint.delete") => (e: E.Endpoint) =>
  audit.stage({ actor: "test", tenants: ["acme"], action, params: { id: e.id } })

/** A store with tenants acme (ord 1) and globex (ord 2), and the Audit and Endpoints services on it. */
const world = (store: StoreShape) =>
  Effect.gen(function* () {
    if ((yield* store.get("tenants", K.tenantKey(1))) === undefined) {
      yield* store.write([...TenantOrds.allocate("acme", 1), ...TenantOrds.allocate("globex", 2), TenantOrds.nextOrdOp(3)], { sync: true })
    }
    const audit = yield* Audit.make().pipe(Effect.provideService(Store, store))
    const endpoints = yield* makeEndpoints.pipe(Effect.provideService(Store, store))
    return { audit, endpoints }
  })

describe("endpoints: the Endpoints service", () => {
  it.effect("a change is one batch with its audit row; ofTenant sees it at once and the bound holds", () =>
    Effect.gen(function* () {
      const store = yield* makeMemoryStore({ db: new MemoryDb() })
      const { audit, endpoints } = yield* world(store)
      const heard: Array<number> = []
      endpoints.onChange((ord) => heard.push(ord))
      expect(yield* endpoints.ofTenant(1)).toEqual([])
      const a = yield* endpoints.create(1, { url: "https://a.example/hook" }, 2, stage(audit, "endpoint.create"))
      expect(a.secret).toMatch(/^whsec_/)
      expect((yield* endpoints.ofTenant(1)).map((e) => e.id)).toEqual([a.id])
      expect(yield* endpoints.ofTenant(2)).toEqual([])
      const b = yield* endpoints.create(1, { url: "https://b.example/hook", eventTypes: ["invoice.*"] }, 2, stage(audit, "endpoint.create"))
      const over = yield* Effect.flip(endpoints.create(1, { url: "https://c.example" }, 2, stage(audit, "endpoint.create")))
      expect(over).toMatchObject({ _tag: "EndpointLimit", max: 2 })
      const b2 = yield* endpoints.update(1, b.id, { disabled: true }, stage(audit, "endpoint.update"))
      expect((yield* endpoints.ofTenant(1)).find((e) => e.id === b.id)?.disabled).toBe(true)
      expect(b2.secret).toBe(b.secret)
      yield* endpoints.remove(1, a.id, stage(audit, "endpoint.delete"))
      expect((yield* endpoints.ofTenant(1)).map((e) => e.id)).toEqual([b.id])
      expect(yield* Effect.flip(endpoints.get(1, a.id))).toMatchObject({ _tag: "EndpointNotFound" })
      // Another tenant's ordinal does not reach it.
      expect(yield* Effect.flip(endpoints.get(2, b.id))).toMatchObject({ _tag: "EndpointNotFound" })
      expect(heard).toEqual([1, 1, 1, 1])
      const rows = (yield* audit.list({ scope: null, limit: 10 })).rows
      expect(rows.map((r) => r.action)).toEqual(["endpoint.delete", "endpoint.update", "endpoint.create", "endpoint.create"])
      expect((yield* checkStore(store)).differences).toEqual([])
    }))

  it.effect("store check reports an endpoint it cannot read or of no live tenant", () =>
    Effect.gen(function* () {
      const store = yield* makeMemoryStore({ db: new MemoryDb() })
      yield* world(store)
      yield* store.write([put("tenants", K.endpointKey(1, 5), Buffer.from([9])), put("tenants", K.endpointKey(2, 6), Buffer.from([1, 0x7b, 0x7d]))], { sync: true })
      yield* store.write([put("tenants", K.tenantKey(2), new Uint8Array(0))], { sync: true })
      const problems = (yield* checkStore(store)).differences.map((d) => [d.problem, d.family, d.ord])
      expect(problems).toEqual(expect.arrayContaining([["bad_row", "endpoints", 1], ["bad_row", "endpoints", 2], ["endpoint_without_tenant", "tenants", 2]]))
    }))

  it.live("a format 3 store created before the endpoints family gets its sentinels at its next open (RocksDB)", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const F = K.Families.endpoints
      const state = (store: StoreShape) =>
        Effect.map(
          Effect.all([store.get("tenants", F.lo), store.get("tenants", F.hi), store.get("default", K.Meta.family("endpoints"))]),
          (vs) => vs.map((v) => v !== undefined)
        )
      const once = <A, E>(f: (s: StoreShape) => Effect.Effect<A, E>) => Effect.scoped(Effect.flatMap(makeRocksDbStore(dir), f))
      expect(yield* once(state)).toEqual([true, true, true])
      yield* once((s) => s.write([del("tenants", F.lo), del("tenants", F.hi), del("default", K.Meta.family("endpoints"))], { sync: true }))
      const [after, report] = yield* once((s) => Effect.zip(state(s), checkStore(s)))
      expect(after).toEqual([true, true, true])
      expect(report.differences).toEqual([])
    }).pipe(Effect.scoped))

  it.live("endpoints survive a restart (RocksDB)", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const made = yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* makeRocksDbStore(dir)
          const { audit, endpoints } = yield* world(store)
          const a = yield* endpoints.create(1, { url: "https://a.example/hook", headers: { "x-key": "k" }, ratePerSec: 2.5 }, 50, stage(audit, "endpoint.create"))
          const b = yield* endpoints.create(2, { url: "https://b.example/hook", eventTypes: ["user.*"] }, 50, stage(audit, "endpoint.create"))
          return [a, yield* endpoints.update(2, b.id, { description: "globex's" }, stage(audit, "endpoint.update"))] as const
        })
      )
      yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* makeRocksDbStore(dir)
          const { endpoints } = yield* world(store)
          expect(yield* endpoints.ofTenant(1)).toEqual([made[0]])
          expect(yield* endpoints.list(2)).toEqual([made[1]])
          expect(yield* endpoints.get(2, made[1].id)).toEqual(made[1])
          expect((yield* checkStore(store)).differences).toEqual([])
        })
      )
    }).pipe(Effect.scoped))
})
