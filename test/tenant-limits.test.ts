/**
 * Per-tenant limits (TEN-3, issue 14): the override's codec and Schema, the
 * `Limits` service's cache, `PUT /v1/tenants/:tenant/limits` and the limits
 * beside the counters over real HTTP on RocksDB, a restart, and the additive
 * `tenant_limits` family at open (docs/storage.md "Families added to format 3").
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Result, type Scope } from "effect"
import fc from "fast-check"
import * as fs from "node:fs"
import * as path from "node:path"
import * as K from "../src/domain/keys.js"
import * as L from "../src/domain/limits.js"
import { del, put } from "../src/domain/ops.js"
import * as TenantOrds from "../src/domain/tenants.js"
import * as Audit from "../src/lifecycle/audit.js"
import { checkStore } from "../src/queue/format/check.js"
import * as Limits from "../src/queue/limits.js"
import * as Queue from "../src/queue/queue.js"
import { Tenants } from "../src/queue/tenants.js"
import { makeMemoryStore, MemoryDb } from "../src/store/memory.js"
import { layerRocksDb, makeRocksDbStore } from "../src/store/rocksdb.js"
import { Store, type StoreShape } from "../src/store/store.js"
import * as Tarball from "../src/store/tarball.js"
import { ACME, adminCall as call, adminConfig, GLOBAL } from "./admin-fixture.js"
import { type Edge, read, startEdge, tempDir } from "./edge-harness.js"
import { sinkOf, startPipeline } from "./pipeline-world.js"
import { startSink } from "./sink-server.js"

const config = adminConfig({ tenants: { limits: { weight: 2, maxInflight: 0, ratePerSec: 0 } } })
const DEFAULTS = config.tenants.limits

const putLimits = (edge: Edge, token: string, tenant: string, body: unknown) =>
  call(edge, token, `/v1/tenants/${tenant}/limits`, { method: "PUT", body: typeof body === "string" ? body : JSON.stringify(body) })
/** A pipeline on the edge's services (its Queue and Limits), ticked by the test only, on a sink that holds every call. */
const pipelineOn = (edge: Edge) =>
  Effect.gen(function* () {
    const sink = yield* startSink(() => ({ status: 204, delayMs: 60_000 }))
    const world = { store: edge.store, queue: Context.get(edge.context, Queue.Queue), context: edge.context }
    const { pipeline } = yield* startPipeline(world, { tickMs: 60_000, graceMs: 0, sinks: [sinkOf("a", sink.url, { timeoutMs: 120_000 })] })
    return pipeline
  })

const ingest = (edge: Edge, tenant: string) =>
  Effect.promise(() => edge.fetch("/v1/hooks/shop", { method: "POST", body: "{}", headers: { "x-tenant": tenant } }).then(read))
const ordOf = (edge: Edge, tenant: string) => Effect.promise(() => edge.run(Effect.flatMap(Tenants, (t) => t.ord(tenant))))
const limitsOf = (edge: Edge, ords: ReadonlyArray<number>) =>
  Effect.promise(() => edge.run(Effect.flatMap(Limits.Limits, (l) => l.of(ords))))

const override = fc.record(
  {
    weight: fc.integer({ min: 1, max: L.WEIGHT_MAX }),
    maxInflight: fc.integer({ min: 0, max: L.MAX_INFLIGHT_MAX }),
    ratePerSec: fc.oneof(fc.integer({ min: 0, max: L.RATE_MAX }), fc.double({ min: 0, max: L.RATE_MAX, noNaN: true })),
    ingestPerSec: fc.oneof(fc.integer({ min: 0, max: L.RATE_MAX }), fc.double({ min: 0, max: L.RATE_MAX, noNaN: true })),
    maxQueuedBytes: fc.oneof(fc.integer({ min: 0, max: 1 << 30 }), fc.maxSafeNat())
  },
  { requiredKeys: [] }
).map((o): L.LimitsOverride => ({ ...o })) // fast-check's partial records have a null prototype

describe("tenant limits: codec and schema", () => {
  it("a stored override round-trips and bad bytes decode to undefined, never a throw", () => {
    fc.assert(fc.property(override.filter((o) => !L.isEmpty(o)), (o) => {
      expect(L.decode(L.encode(o))).toEqual(o)
    }))
    fc.assert(fc.property(fc.uint8Array({ maxLength: 20 }), (bytes) => {
      const d = L.decode(bytes)
      if (d !== undefined) expect(L.decode(L.encode(d))).toEqual(d)
    }))
    const good = K.asBuffer(L.encode({ weight: 7, maxInflight: 3, ratePerSec: 2.5 }))
    const bad = [
      new Uint8Array(0),
      Buffer.from([1]),
      Buffer.from([1, 0]), // an empty mask is never stored
      Buffer.from([2, 1, 0, 7]), // another version
      Buffer.from([1, 32, 0, 7]), // an unknown field bit
      Buffer.concat([Buffer.from([1, 16]), Buffer.from(new Float64Array([1.5]).buffer).reverse()]), // maxQueuedBytes not an integer
      good.subarray(0, good.length - 1), // truncated
      Buffer.concat([good, Buffer.from([0])]), // trailing byte
      Buffer.from([1, 1, 0, 0]), // weight 0
      Buffer.from([1, 1, 0x03, 0xe9]), // weight 1001
      Buffer.from([1, 2, 0, 1, 0x86, 0xa1]), // maxInflight 100,001
      Buffer.concat([Buffer.from([1, 4]), Buffer.from(new Float64Array([NaN]).buffer).reverse()]),
      Buffer.concat([Buffer.from([1, 4]), Buffer.from(new Float64Array([-1]).buffer).reverse()])
    ]
    for (const b of bad) expect(L.decode(b), K.asBuffer(b).toString("hex")).toBeUndefined()
    expect(() => L.encode({})).toThrow()
    expect(() => L.encode({ weight: 0 })).toThrow(/weight/)
  })

  it("the override schema is strict and names the field and its range", () => {
    const refusal = (input: unknown) => {
      const r = L.decodeOverrideInput(input)
      return Result.isFailure(r) ? String(r.failure) : "ok"
    }
    expect(Result.getOrThrow(L.decodeOverrideInput({ weight: 3, ratePerSec: 0.5 }))).toEqual({ weight: 3, ratePerSec: 0.5 })
    expect(Result.getOrThrow(L.decodeOverrideInput({}))).toEqual({})
    expect(refusal({ weight: 0 })).toContain("expected an integer from 1 to 1000")
    expect(refusal({ weight: 1.5 })).toContain("expected an integer from 1 to 1000")
    expect(refusal({ maxInflight: 100_001 })).toContain("expected an integer from 0 to 100000")
    expect(refusal({ ratePerSec: -1 })).toContain("expected a number from 0 to 1000000")
    expect(refusal({ weight: "2" })).toContain("expected an integer from 1 to 1000")
    expect(refusal({ weight: 2, burst: 5 })).toContain("burst")
  })

  it("effective lays the override over the defaults field by field", () => {
    const d = { weight: 2, maxInflight: 10, ratePerSec: 0, ingestPerSec: 0, maxQueuedBytes: 0 }
    expect(L.effective(d, undefined)).toBe(d)
    expect(L.effective(d, {})).toBe(d)
    expect(L.effective(d, { maxInflight: 0 })).toEqual({ ...d, maxInflight: 0 })
    expect(L.effective(d, { weight: 5, ratePerSec: 1.5 })).toEqual({ ...d, weight: 5, ratePerSec: 1.5 })
    expect(L.effective(d, { ingestPerSec: 3, maxQueuedBytes: 4096 })).toEqual({ ...d, ingestPerSec: 3, maxQueuedBytes: 4096 })
  })
})

/** A memory store with two tenants (ords 1 and 2) and the Limits and Audit services on it. */
const memoryWorld = (wrap: (s: StoreShape) => StoreShape = (s) => s) =>
  Effect.gen(function* () {
    const raw = yield* makeMemoryStore({ db: new MemoryDb() })
    yield* raw.write([...TenantOrds.allocate("acme", 1), ...TenantOrds.allocate("globex", 2), TenantOrds.nextOrdOp(3)], { sync: true })
    const store = wrap(raw)
    const limits = yield* Limits.make(DEFAULTS).pipe(Effect.provideService(Store, store))
    const audit = yield* Audit.make().pipe(Effect.provideService(Store, store))
    const row = (o: L.LimitsOverride) => audit.stage({ actor: "test", tenants: ["acme"], action: "limits.set", params: { override: o } })
    return { store: raw, limits, audit, row }
  })

describe("tenant limits: the Limits service", () => {
  it.effect("Limits.of reflects a set at once, and an empty override removes the row", () =>
    Effect.gen(function* () {
      const w = yield* memoryWorld()
      expect(yield* w.limits.of([1, 2, 1])).toEqual([DEFAULTS, DEFAULTS, DEFAULTS])
      yield* w.limits.set(1, { maxInflight: 5 }, yield* w.row({ maxInflight: 5 }), "acme")
      expect(yield* w.limits.of([1, 2])).toEqual([{ ...DEFAULTS, maxInflight: 5 }, DEFAULTS])
      expect(yield* w.limits.get(1)).toEqual({ effective: { ...DEFAULTS, maxInflight: 5 }, override: { maxInflight: 5 } })
      // The audit row committed with it.
      const rows = (yield* w.audit.list({ scope: null, limit: 10 })).rows
      expect(rows.map((r) => [r.action, r.params])).toEqual([["limits.set", { override: { maxInflight: 5 } }]])
      yield* w.limits.set(1, {}, yield* w.row({}), "acme")
      expect(yield* w.store.get("tenants", K.tenantLimitsKey(1))).toBeUndefined()
      expect(yield* w.limits.of([1])).toEqual([DEFAULTS])
      expect((yield* checkStore(w.store)).differences).toEqual([])
    }))

  it.effect("a cache fill that read before a set does not keep the old limits", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      let hold = false
      const w = yield* memoryWorld((s) => ({
        ...s,
        // Held: the read happens now, its answer arrives after the gate opens.
        multiGet: (cf, keys) => (hold ? Effect.tap(s.multiGet(cf, keys), () => Deferred.await(gate)) : s.multiGet(cf, keys))
      }))
      hold = true
      const stale = yield* Effect.forkChild(w.limits.of([1]))
      yield* Effect.yieldNow
      hold = false
      yield* w.limits.set(1, { weight: 9 }, yield* w.row({ weight: 9 }), "acme")
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(stale)).toEqual([DEFAULTS]) // it read before the set
      expect(yield* w.limits.of([1])).toEqual([{ ...DEFAULTS, weight: 9 }])
    }))

  it.effect("store check reports an override it cannot read or of no live tenant", () =>
    Effect.gen(function* () {
      const w = yield* memoryWorld()
      yield* w.store.write([
        put("tenants", K.tenantLimitsKey(1), Buffer.from([9, 9])),
        put("tenants", K.tenantLimitsKey(2), L.encode({ weight: 3 })),
        put("tenants", K.tenantKey(2), new Uint8Array(0)), // globex erased: a tombstone
        del("tenants", K.tenantOrdKey("globex"))
      ], { sync: true })
      const report = yield* checkStore(w.store)
      expect(report.differences.map((d) => [d.problem, d.family, d.ord])).toEqual([
        ["bad_row", "tenant_limits", 1],
        ["limits_without_tenant", "tenants", 2]
      ])
    }))
})

describe("tenant limits: over the API", () => {
  it.live("limits set over the API apply without a restart and survive one", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const expected = { weight: 5, maxInflight: 3, ratePerSec: 2.5, ingestPerSec: 1_000, maxQueuedBytes: 1_000_000 }
      const ord = yield* Effect.scoped(
        Effect.gen(function* () {
          const edge = yield* startEdge(config, { store: layerRocksDb(dir) })
          expect((yield* ingest(edge, "acme")).status).toBe(202)
          expect((yield* ingest(edge, "globex")).status).toBe(202)
          const ord = yield* ordOf(edge, "acme")
          const globex = yield* ordOf(edge, "globex")
          // The node's pipeline, started before the set (it ticks only when the test says), on a sink that holds every call.
          const pipeline = yield* pipelineOn(edge)
          const before = yield* call(edge, GLOBAL, "/v1/tenants/acme")
          expect(before.body).toMatchObject({ tenant: "acme", pending: 1, limits: DEFAULTS, limits_override: {} })
          expect(yield* limitsOf(edge, [ord, globex])).toEqual([DEFAULTS, DEFAULTS])

          const set = yield* putLimits(edge, GLOBAL, "acme", expected)
          expect(set.status).toBe(200)
          expect(set.body).toEqual({ tenant: "acme", limits: expected, limits_override: expected })
          // Without a restart: the service the pipeline reads every tick has it, the other tenant keeps the defaults.
          expect(yield* limitsOf(edge, [ord, globex])).toEqual([expected, DEFAULTS])
          const after = yield* call(edge, GLOBAL, "/v1/tenants/acme")
          expect(after.body).toMatchObject({ tenant: "acme", pending: 1, limits: expected, limits_override: expected })
          const audit = yield* call(edge, GLOBAL, "/v1/audit?tenant=acme")
          expect(audit.body.items.map((i: any) => [i.action, i.actor, i.params])).toEqual([["limits.set", "ops", { override: expected }]])

          // The running pipeline's next ticks apply it: of acme's eleven rows, three are claimed.
          for (let i = 0; i < 10; i++) expect((yield* ingest(edge, "acme")).status).toBe(202)
          let acme = 0
          // Ticks half a second apart: the rate (2.5 a second) would allow more; the max inflight binds.
          for (let i = 0; i < 5; i++) {
            acme += (yield* pipeline.tick).claimed.filter((d) => d.ord === ord).length
            yield* Effect.sleep("500 millis")
          }
          expect(acme).toBe(expected.maxInflight)

          // A partial override keeps the other fields at their defaults.
          const partial = yield* putLimits(edge, GLOBAL, "globex", { ratePerSec: 10 })
          expect(partial.body).toEqual({ tenant: "globex", limits: { ...DEFAULTS, ratePerSec: 10 }, limits_override: { ratePerSec: 10 } })
          return ord
        })
      )

      // Closed and reopened: the store gives it back, to the service and over HTTP.
      yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* makeRocksDbStore(dir)
          const limits = yield* Limits.make(DEFAULTS).pipe(Effect.provideService(Store, store))
          expect(yield* limits.of([ord])).toEqual([expected])
          // Admission's in-memory view, read at start by tenant id.
          expect(limits.ingestOf("acme")).toEqual({ ingestPerSec: 1_000, maxQueuedBytes: 1_000_000 })
          expect(limits.ingestOf("globex")).toMatchObject({ ingestPerSec: DEFAULTS.ingestPerSec, maxQueuedBytes: DEFAULTS.maxQueuedBytes })
          expect((yield* checkStore(store)).differences).toEqual([])
        })
      )
      yield* Effect.scoped(
        Effect.gen(function* () {
          const edge = yield* startEdge(config, { store: layerRocksDb(dir) })
          expect((yield* call(edge, GLOBAL, "/v1/tenants/acme")).body).toMatchObject({ limits: expected, limits_override: expected })
          expect(yield* limitsOf(edge, [ord])).toEqual([expected])
          // After the restart the pipeline holds acme to three rows inflight from its first tick
          // (the rows inflight before it went back to due with boot recovery).
          yield* Effect.flatMap(Queue.Queue, (q) => q.recoverInflight(Date.now())).pipe(Effect.provide(edge.context))
          const pipeline = yield* pipelineOn(edge)
          let acme = 0
          // Ticks half a second apart: the rate (2.5 a second) would allow more; the max inflight binds.
          for (let i = 0; i < 5; i++) {
            acme += (yield* pipeline.tick).claimed.filter((d) => d.ord === ord).length
            yield* Effect.sleep("500 millis")
          }
          expect(acme).toBe(expected.maxInflight)
        })
      )
    }).pipe(Effect.scoped))

  it.live("a scoped token may not set limits, a bad body names the field, an unknown tenant is 404", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)
        expect((yield* ingest(edge, "acme")).status).toBe(202)
        const ord = yield* ordOf(edge, "acme")

        const scoped = yield* putLimits(edge, ACME, "acme", { weight: 3 })
        expect(scoped.status).toBe(403)
        expect(scoped.body.error).toBe("forbidden")
        // The scoped token still reads its tenant's limits beside the counters.
        expect((yield* call(edge, ACME, "/v1/tenants/acme")).body).toMatchObject({ limits: DEFAULTS, limits_override: {} })

        const refusals: ReadonlyArray<readonly [unknown, string]> = [
          [{ weight: 0 }, "weight: expected an integer from 1 to 1000"],
          [{ maxInflight: -1 }, "maxInflight: expected an integer from 0 to 100000 (0: no cap of its own)"],
          [{ ratePerSec: "fast" }, "ratePerSec: expected a number from 0 to 1000000 (0: unlimited)"],
          [[1], "body: expected a JSON object with any of weight, maxInflight, ratePerSec, ingestPerSec, maxQueuedBytes"],
          ["{not json", "body: expected a JSON object"]
        ]
        for (const [body, message] of refusals) {
          const r = yield* putLimits(edge, GLOBAL, "acme", body)
          expect([r.status, r.body], JSON.stringify(body)).toEqual([400, { error: "bad_body", message }])
        }
        // An unknown field is refused by name (the words are the edge's, api-errors.ts).
        const extra = yield* putLimits(edge, GLOBAL, "acme", { weight: 2, burst: 1 })
        expect([extra.status, extra.body.error]).toEqual([400, "bad_body"])
        expect(extra.body.message).toMatch(/^burst: .*weight.*maxInflight.*ratePerSec/)
        const big = yield* putLimits(edge, GLOBAL, "acme", JSON.stringify({ weight: 2, pad: "x".repeat(5000) }))
        expect([big.status, big.body.error]).toEqual([413, "too_large"])
        const unknown = yield* putLimits(edge, GLOBAL, "nobody", { weight: 2 })
        expect([unknown.status, unknown.body.error]).toEqual([404, "unknown_tenant"])

        // Nothing refused was stored or audited.
        expect(yield* limitsOf(edge, [ord])).toEqual([DEFAULTS])
        expect((yield* call(edge, GLOBAL, "/v1/audit")).body.items).toEqual([])
      })
    ))
})

/** What the additive step leaves: both sentinels and the meta key, or none of them. */
const addedState = (store: StoreShape) =>
  Effect.map(
    Effect.all([
      store.get("tenants", K.Families.tenant_limits.lo),
      store.get("tenants", K.Families.tenant_limits.hi),
      store.get("default", K.Meta.family("tenant_limits"))
    ]),
    (vs) => vs.map((v) => v !== undefined)
  )

/** Make the store look like one created before the family: no sentinels, no meta key. */
const forget = (store: StoreShape) =>
  store.write([
    del("tenants", K.Families.tenant_limits.lo),
    del("tenants", K.Families.tenant_limits.hi),
    del("default", K.Meta.family("tenant_limits"))
  ], { sync: true })

const additiveCase = (open: Effect.Effect<StoreShape, unknown, Scope.Scope>) =>
  Effect.gen(function* () {
    const once = <A, E>(f: (s: StoreShape) => Effect.Effect<A, E>) => Effect.scoped(Effect.flatMap(open, f))
    expect(yield* once(addedState)).toEqual([true, true, true]) // a new store has them from creation
    yield* once(forget)
    // Simulated older store: the next open writes them (and the key), and the check is clean.
    expect(yield* once((s) => Effect.zip(addedState(s), checkStore(s)))).toMatchObject([[true, true, true], { ok: true }])
    // Once the key exists a lost sentinel is never rewritten: the check keeps reporting it.
    yield* once((s) => s.write([del("tenants", K.Families.tenant_limits.lo)], { sync: true }))
    for (let i = 0; i < 2; i++) {
      const [state, report] = yield* once((s) => Effect.zip(addedState(s), checkStore(s)))
      expect(state).toEqual([false, true, true])
      expect(report.differences.map((d) => [d.problem, d.family])).toEqual([["corrupt", "tenant_limits"]])
    }
  })

describe("tenant limits: the additive family", () => {
  it.effect("a format 3 store created before tenant_limits gets its sentinels at open exactly once (memory)", () => {
    const db = new MemoryDb()
    return additiveCase(makeMemoryStore({ db }))
  })

  it.live("a format 3 store created before tenant_limits gets its sentinels at open exactly once (RocksDB)", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* additiveCase(makeRocksDbStore(dir))
      // The committed format 3 fixture was written before the family: its first open adds it, and it checks clean.
      const fixture = path.join(dir, "fixture")
      yield* Tarball.unpack(path.join(import.meta.dirname, "fixtures", "store-v3.tar.zst"), fixture)
      expect(fs.existsSync(fixture)).toBe(true)
      const [state, report] = yield* Effect.scoped(Effect.flatMap(makeRocksDbStore(fixture), (s) => Effect.zip(addedState(s), checkStore(s))))
      expect(state).toEqual([true, true, true])
      expect(report.differences).toEqual([])
    }).pipe(Effect.scoped))
})
