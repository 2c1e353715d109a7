import { describe, expect, it } from "@effect/vitest"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Result, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as Counters from "../src/domain/counters.js"
import * as Deliveries from "../src/domain/deliveries.js"
import * as HookId from "../src/domain/hook-id.js"
import * as Keys from "../src/domain/keys.js"
import { TenantLimit } from "../src/domain/tenants.js"
import { layerMemory, MemoryDb } from "../src/store/memory.js"
import { layerRocksDb } from "../src/store/rocksdb.js"
import { Store, type StoreShape } from "../src/store/store.js"
import { layer as tenantsLayer, Tenants } from "../src/queue/tenants.js"
import { layer as wakeLayer, Wake } from "../src/queue/wake.js"
import { type IngestRequest, type IngestResult, layer as writerLayer, type SubmitError, Writer, WriterClosed, type WriterOptions, type WriterShape } from "../src/queue/writer.js"
import { answerItem, type Item } from "../src/queue/writer-batch.js"

const req = (tenantId: string | null, o: Partial<IngestRequest> = {}): IngestRequest => ({
  tenantId,
  sourceId: "src",
  sinks: ["s0"],
  body: Buffer.from(`{"t":${JSON.stringify(tenantId)}}`),
  contentType: "application/json",
  headers: {},
  idempotencyKey: null,
  archive: false,
  ...o
})

/** A store wrapper that counts commits and can hold the Writer just after one commit, before it answers. */
class Probe {
  writes = 0
  held = false
  hold: Deferred.Deferred<void> | undefined
  readonly layer = Layer.effect(
    Store,
    Effect.map(
      Store,
      (s): StoreShape => ({
        ...s,
        write: (batch, opts) =>
          Effect.suspend(() => {
            this.writes++
            return s.write(batch, opts)
          }).pipe(
            Effect.andThen(
              Effect.suspend(() => {
                const h = this.hold
                if (h === undefined) return Effect.void
                this.hold = undefined
                this.held = true
                return Deferred.await(h).pipe(Effect.ensuring(Effect.sync(() => (this.held = false))))
              })
            )
          )
      })
    )
  )
}

type StoreLayer = Layer.Layer<Store, unknown>

interface Backend {
  readonly name: string
  /** A fresh handle on the same data each call (a "restart"). */
  readonly open: () => StoreLayer
}

const memoryBackend = (): Backend => {
  const db = new MemoryDb()
  return { name: "memory", open: () => layerMemory({ db }) }
}

/** RocksDB in a temp dir, removed when the scope closes. */
const rocksBackend = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "ankusa-writer-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
).pipe(Effect.map((dir): Backend => ({ name: "rocksdb", open: () => layerRocksDb(dir) })))

const stack = (store: StoreLayer, probe: Probe, opts: WriterOptions = {}) =>
  Layer.mergeAll(writerLayer(opts).pipe(Layer.provide(wakeLayer)), tenantsLayer).pipe(Layer.provideMerge(probe.layer.pipe(Layer.provide(store))))

const waitUntil = (cond: Effect.Effect<boolean>) =>
  Effect.gen(function* () {
    while (!(yield* cond)) yield* Effect.sleep(1)
  })

/**
 * Submit `lead` and hold the Writer in that commit (at the probe): requests submitted meanwhile
 * wait in its queue. `release` lets the commit finish.
 */
const holdCommit = (writer: WriterShape, probe: Probe, lead: IngestRequest) =>
  Effect.gen(function* () {
    const hold = yield* Deferred.make<void>()
    probe.hold = hold
    const fiber = yield* Effect.forkChild(writer.submit(lead))
    yield* waitUntil(Effect.sync(() => probe.held))
    return { fiber, release: Deferred.succeed(hold, undefined) }
  })

/**
 * Commit `reqs` as ONE batch, queued in order: hold the Writer right after it
 * commits `lead`, queue every request, then release it.
 */
const oneBatch = (
  probe: Probe,
  lead: IngestRequest,
  reqs: ReadonlyArray<IngestRequest>,
  beforeRelease: Effect.Effect<void> = Effect.void
) =>
  Effect.gen(function* () {
    const writer = yield* Writer
    const { fiber: leadFiber, release } = yield* holdCommit(writer, probe, lead)
    const fibers: Array<Fiber.Fiber<Result.Result<IngestResult, SubmitError>>> = []
    for (const r of reqs) {
      fibers.push(yield* Effect.forkChild(Effect.result(writer.submit(r))))
      yield* waitUntil(Effect.map(writer.queued, (n) => n === fibers.length))
    }
    yield* beforeRelease
    const before = probe.writes
    yield* release
    const leadResult = yield* Fiber.join(leadFiber)
    const results = yield* Effect.forEach(fibers, Fiber.join)
    return { lead: leadResult, results, commits: probe.writes - before }
  })

const LIMIT = { limit: 1_000_000 }

/** ?n as tenant → ord and ?t as ord → tenant. */
const tenantTables = Effect.gen(function* () {
  const store = yield* Store
  const n = yield* store.scan("tenants", Keys.familyDataRange(Keys.Families.tenant_ords), LIMIT)
  const t = yield* store.scan("tenants", Keys.familyDataRange(Keys.Families.tenants), LIMIT)
  return {
    byName: new Map(n.map((e) => [Keys.decodeTenantOrdKey(e.key), Keys.decodeU32(e.value)] as const)),
    byOrd: new Map(t.map((e) => [Keys.decodeTenantKey(e.key), Keys.asBuffer(e.value).toString("utf8")] as const))
  }
})

const meta = Effect.gen(function* () {
  const store = yield* Store
  const [seq, ord] = yield* store.multiGet("default", [Keys.Meta.nextSeq, Keys.Meta.nextOrd])
  return { nextSeq: seq === undefined ? undefined : Keys.decodeU64(seq), nextOrd: ord === undefined ? undefined : Keys.decodeU32(ord) }
})

const countersOf = (ord: number) =>
  Effect.flatMap(Store, (s) => s.getCounters("counters", Counters.keysOf(ord))).pipe(Effect.map(Counters.fromTotals))

const dueSeqs = (ord: number) =>
  Effect.flatMap(Store, (s) => s.scan("index", Deliveries.tenantDueRange(ord), LIMIT)).pipe(
    Effect.map((rows) => new Set(rows.map((e) => Keys.decodeDueKey(e.key).seq)))
  )

const hookCount = Effect.flatMap(Store, (s) => s.scan("hooks", Keys.familyDataRange(Keys.Families.hooks), LIMIT)).pipe(
  Effect.map((rows) => rows.length)
)

const nameOf = (t: string | null) => t ?? "default"

/** ?n and ?t are mirror images, ords dense from 1, and the Tenants service agrees. */
const expectConsistentTenants = (expected: ReadonlySet<string>) =>
  Effect.gen(function* () {
    const { byName, byOrd } = yield* tenantTables
    const tenants = yield* Tenants
    expect(new Set(byName.keys())).toEqual(expected)
    expect([...byName.values()].sort((a, b) => a - b)).toEqual(Array.from({ length: expected.size }, (_, i) => i + 1))
    expect(byOrd.size).toBe(byName.size)
    for (const [name, ord] of byName) {
      expect(byOrd.get(ord)).toBe(name)
      expect(yield* tenants.ord(name)).toBe(ord)
      expect(yield* tenants.name(ord)).toBe(name)
    }
    expect(yield* tenants.count).toBe(expected.size)
    expect((yield* meta).nextOrd).toBe(expected.size + 1)
    return byName
  })

const ordinalCase = (backend: Backend) =>
  Effect.gen(function* () {
    // Phase 1: many concurrent submits over overlapping tenants, small batches.
    const phase1 = Array.from({ length: 400 }, (_, i) => req(i % 7 === 0 ? null : `t${i % 23}`))
    const first = yield* Effect.gen(function* () {
      const writer = yield* Writer
      const results = yield* Effect.forEach(phase1, (r) => writer.submit(r), { concurrency: "unbounded" })
      const names = new Set(phase1.map((r) => nameOf(r.tenantId)))
      const byName = yield* expectConsistentTenants(names)
      // Every hook sits under its own tenant's ordinal.
      for (const name of names) {
        const seqs = new Set(results.filter((_, i) => nameOf(phase1[i]!.tenantId) === name).map((r) => r.seq))
        expect(yield* dueSeqs(byName.get(name)!)).toEqual(seqs)
      }
      // First-sight order: a tenant's ordinal order is the order of its first committed hook.
      const firstSeq = (name: string) => Math.min(...results.filter((_, i) => nameOf(phase1[i]!.tenantId) === name).map((r) => r.seq))
      const byFirstSight = [...names].sort((a, b) => firstSeq(a) - firstSeq(b))
      expect(byFirstSight.map((n) => byName.get(n))).toEqual(byFirstSight.map((_, i) => i + 1))
      expect(new Set(results.map((r) => r.seq)).size).toBe(results.length)
      return { byName, maxSeq: Math.max(...results.map((r) => r.seq)) }
    }).pipe(Effect.provide(stack(backend.open(), new Probe(), { maxBatch: 16 })))

    // Phase 2: restart on the same store; old and new tenants concurrently.
    const fresh = Array.from({ length: 10 }, (_, i) => `u${i}`)
    const phase2 = Array.from({ length: 200 }, (_, i) => req(i % 2 === 0 ? fresh[(i / 2) % 10]! : `t${i % 23}`))
    yield* Effect.gen(function* () {
      const writer = yield* Writer
      const results = yield* Effect.forEach(phase2, (r) => writer.submit(r), { concurrency: "unbounded" })
      const names = new Set([...first.byName.keys(), ...fresh])
      const byName = yield* expectConsistentTenants(names)
      for (const [name, ord] of first.byName) expect(byName.get(name)).toBe(ord)
      const k = first.byName.size
      expect(fresh.map((n) => byName.get(n)!).sort((a, b) => a - b)).toEqual(fresh.map((_, i) => k + 1 + i))
      // Seqs are never reused across a restart either.
      expect(Math.min(...results.map((r) => r.seq))).toBeGreaterThan(first.maxSeq)
    }).pipe(Effect.provide(stack(backend.open(), new Probe(), { maxBatch: 16 })))
  })

const shutdownCase = (backend: Backend) =>
  Effect.gen(function* () {
    const probe = new Probe()
    const scope = yield* Scope.make()
    const ctx = yield* Layer.buildWithScope(stack(backend.open(), probe), scope)
    const writer = Context.get(ctx, Writer)
    const { fiber: lead, release } = yield* holdCommit(writer, probe, req("a"))
    const queued = yield* Effect.forEach(["a", "b", "c"], (t) => Effect.forkChild(writer.submit(req(t))))
    yield* waitUntil(Effect.map(writer.queued, (n) => n === 3))
    const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
    yield* Effect.sleep(5)
    const late = yield* Effect.result(writer.submit(req("d")))
    expect(Result.isFailure(late) && late.failure._tag === "WriterClosed").toBe(true)
    yield* release
    yield* Fiber.join(closing)
    const seqs = [(yield* Fiber.join(lead)).seq, ...(yield* Effect.forEach(queued, (f) => Effect.map(Fiber.join(f), (r) => r.seq)))]
    // After a restart every answered hook is there.
    yield* Effect.gen(function* () {
      const store = yield* Store
      for (const seq of seqs) expect(yield* store.get("hooks", Keys.hookKey(seq))).toBeDefined()
      yield* expectConsistentTenants(new Set(["a", "b", "c"]))
    }).pipe(Effect.provide(stack(backend.open(), new Probe())))
  })

const isTenantLimit = (e: Result.Result<IngestResult, SubmitError>, max: number) =>
  Result.isFailure(e) && e.failure instanceof TenantLimit && e.failure.max === max

describe("Writer", () => {
  it.live("tenant ordinal is assigned once and never reused", () => ordinalCase(memoryBackend()))

  it.live("tenants.max refuses a new tenant with tenant_limit and an existing tenant is never refused at the cap", () =>
    Effect.gen(function* () {
      const db = new MemoryDb()
      const probe = new Probe()
      const run = <A, E>(eff: Effect.Effect<A, E, Writer | Tenants | Store>) =>
        eff.pipe(Effect.provide(stack(layerMemory({ db }), probe, { tenantsMax: 2 })))
      yield* run(
        Effect.gen(function* () {
          const writer = yield* Writer
          yield* writer.submit(req("a"))
          // One batch: b takes the last ordinal; c and default would be the third tenant.
          const one = yield* oneBatch(probe, req("a"), [req("a"), req("b"), req("c"), req(null), req("b")])
          expect(one.commits).toBe(1)
          const [a, b, c, dflt, b2] = one.results
          expect(Result.isSuccess(a!) && Result.isSuccess(b!) && Result.isSuccess(b2!)).toBe(true)
          expect(isTenantLimit(c!, 2)).toBe(true)
          expect(isTenantLimit(dflt!, 2)).toBe(true)
          yield* expectConsistentTenants(new Set(["a", "b"]))
          // Existing tenants keep working at the cap; the refused one stays refused.
          const again = yield* oneBatch(probe, req("b"), [req("c"), req("a"), req("b")])
          expect(again.commits).toBe(1)
          expect(isTenantLimit(again.results[0]!, 2)).toBe(true)
          expect(again.results.slice(1).every(Result.isSuccess)).toBe(true)
          // Nothing was queued for a refused request: one hook per accepted request.
          // The first submit and the two lead requests, plus each batch's accepted ones.
          const accepted = 3 + one.results.filter(Result.isSuccess).length + again.results.filter(Result.isSuccess).length
          expect(yield* hookCount).toBe(accepted)
          expect((yield* countersOf(Counters.AGGREGATE)).pending).toBe(accepted)
        })
      )
      // After a restart (cold cache) an existing tenant is still accepted at the cap.
      yield* run(
        Effect.gen(function* () {
          const writer = yield* Writer
          expect((yield* writer.submit(req("b"))).duplicate).toBe(false)
          expect(isTenantLimit(yield* Effect.result(writer.submit(req("d"))), 2)).toBe(true)
          yield* expectConsistentTenants(new Set(["a", "b"]))
        })
      )
    })
  )

  it.live("a failed commit fails every request of the batch and allocates nothing", () =>
    Effect.gen(function* () {
      const db = new MemoryDb()
      const probe = new Probe()
      yield* Effect.gen(function* () {
        const writer = yield* Writer
        const store = yield* Store
        yield* writer.submit(req("a"))
        const batch = [req("n1"), req("n2", { idempotencyKey: "k" }), req("a"), req("n1")]
        const failed = yield* oneBatch(probe, req("a"), batch, Effect.sync(() => (db.failNextWrite = 1)))
        expect(failed.commits).toBe(1)
        expect(failed.results.every((r) => Result.isFailure(r) && r.failure._tag === "StoreError")).toBe(true)
        // Nothing allocated: no ordinal, no seq, no dedupe key, no counts.
        yield* expectConsistentTenants(new Set(["a"]))
        expect(yield* meta).toEqual({ nextSeq: failed.lead.seq + 1, nextOrd: 2 })
        expect(yield* store.get("index", Keys.dedupeKey("n2", "k"))).toBeUndefined()
        expect((yield* countersOf(Counters.AGGREGATE)).pending).toBe(2)
        // The next batches work, continue where the last commit left off, and found the cache unwritten.
        yield* store.resetStats
        const n2 = yield* writer.submit(req("n2", { idempotencyKey: "k" }))
        const n1 = yield* writer.submit(req("n1"))
        expect((yield* store.stats).pointReads["tenant_ords"]).toBe(2)
        expect([n2.seq, n1.seq]).toEqual([failed.lead.seq + 1, failed.lead.seq + 2])
        expect(n2.duplicate).toBe(false)
        const byName = yield* expectConsistentTenants(new Set(["a", "n1", "n2"]))
        expect([byName.get("n2"), byName.get("n1")]).toEqual([2, 3])
        expect((yield* countersOf(Counters.AGGREGATE)).pending).toBe(4)
      }).pipe(Effect.provide(stack(layerMemory({ db }), probe)))
    })
  )

  it.live("onCommit runs after each successful commit and not after a failed one", () =>
    Effect.gen(function* () {
      const db = new MemoryDb()
      let woken = 0
      // A Wake that counts its signals, with or without tenants (the pipeline's waits are not needed here).
      const signal = Effect.sync(() => void woken++)
      const wake = Layer.succeed(Wake, { signal, hint: () => signal, await: Effect.never, takeHints: () => [], held: () => undefined, holdBy: () => {} })
      const layer = Layer.mergeAll(writerLayer().pipe(Layer.provide(wake))).pipe(
        Layer.provideMerge(layerMemory({ db }))
      )
      yield* Effect.gen(function* () {
        const writer = yield* Writer
        yield* writer.submit(req("a"))
        expect(woken).toBe(1)
        db.failNextWrite = 1
        expect(Result.isFailure(yield* Effect.result(writer.submit(req("a"))))).toBe(true)
        expect(woken).toBe(1)
        yield* writer.submit(req("b"))
        expect(woken).toBe(2)
      }).pipe(Effect.provide(layer))
    })
  )

  it.live("a hook for a destination whose breaker is open is written due at its probe, and a tenant with only such rows is not hinted", () =>
    Effect.gen(function* () {
      const layer = writerLayer().pipe(Layer.provideMerge(wakeLayer), Layer.provideMerge(layerMemory({ db: new MemoryDb() })))
      yield* Effect.gen(function* () {
        const writer = yield* Writer
        const wake = yield* Wake
        const store = yield* Store
        const probeAt = Date.now() + 60_000
        // The pipeline's holds: "down" open until probeAt, nothing else.
        wake.holdBy({ through: () => probeAt, until: (name, now) => (name === "down" && now < probeAt ? probeAt : undefined) })
        const mixed = yield* writer.submit(req("a", { sinks: ["up", "down"] }))
        expect(wake.takeHints().length).toBe(1)
        const heldOnly = yield* writer.submit(req("b", { sinks: ["down"] }))
        expect(wake.takeHints()).toEqual([])
        const { byName } = yield* tenantTables
        const atOf = (ord: number) =>
          Effect.map(store.scan("index", Deliveries.tenantDueRange(ord), LIMIT), (rows) =>
            new Map(rows.map((e) => [`${Keys.decodeDueKey(e.key).seq}:${Keys.decodeDueKey(e.key).sink}`, Keys.decodeDueKey(e.key).at] as const))
          )
        const a = yield* atOf(byName.get("a")!)
        const b = yield* atOf(byName.get("b")!)
        expect(a.get(`${mixed.seq}:0`)).toBeLessThan(probeAt)
        expect(a.get(`${mixed.seq}:1`)).toBe(probeAt)
        expect(b.get(`${heldOnly.seq}:0`)).toBe(probeAt)
        // Each held row has its marker in the probe's bucket (TEN-1 §5), so the marker scan finds it then.
        for (const ord of [byName.get("a")!, byName.get("b")!]) {
          expect(yield* store.get("index", Keys.activeKey(Keys.bucketOf(probeAt), ord))).toBeDefined()
        }
        // Counted as any new row: pending, not scheduled.
        expect((yield* countersOf(byName.get("b")!)).pending).toBe(1)
        // Past the holds' time nothing is held: a new row is due at once.
        wake.holdBy({ through: () => 0, until: () => probeAt })
        const later = yield* writer.submit(req("b", { sinks: ["down"] }))
        expect((yield* atOf(byName.get("b")!)).get(`${later.seq}:0`)).toBeLessThan(probeAt)
        expect(wake.takeHints().length).toBe(1)
      }).pipe(Effect.provide(layer))
    })
  )

  it.live("counters after ingest equal the expected pending, bytes and archive_pending per tenant", () =>
    Effect.gen(function* () {
      const writer = yield* Writer
      const store = yield* Store
      const tenants = yield* Tenants
      const reqs = Array.from({ length: 90 }, (_, i) =>
        req(i % 5 === 0 ? null : `c${i % 4}`, {
          sinks: Array.from({ length: 1 + (i % 4) }, (_, s) => `s${s}`),
          body: Buffer.alloc(1 + ((i * 37) % 300), i),
          archive: i % 3 === 0
        })
      )
      const results = yield* Effect.forEach(reqs, (r) => writer.submit(r), { concurrency: "unbounded" })
      const expected = new Map<string, Counters.TenantCounters>()
      const total = { ...Counters.zero }
      for (let i = 0; i < reqs.length; i++) {
        const r = reqs[i]!
        // bytes counts the stored envelope once per delivery row (TEN-1 §4).
        const size = (yield* store.get("hooks", Keys.hookKey(results[i]!.seq)))!.length
        const name = nameOf(r.tenantId)
        const cur = { ...(expected.get(name) ?? Counters.zero) }
        cur.pending += r.sinks.length
        cur.bytes += r.sinks.length * size
        cur.archive_pending += r.archive ? 1 : 0
        expected.set(name, cur)
        total.pending += r.sinks.length
        total.bytes += r.sinks.length * size
        total.archive_pending += r.archive ? 1 : 0
      }
      for (const [name, want] of expected) expect(yield* countersOf(yield* tenants.ord(name))).toEqual(want)
      expect(yield* countersOf(Counters.AGGREGATE)).toEqual(total)
    }).pipe(Effect.provide(stack(layerMemory(), new Probe(), { maxBatch: 8 })))
  )

  it.live("a duplicate idempotency key answers the first id and queues nothing", () => {
    const probe = new Probe()
    return Effect.gen(function* () {
      const writer = yield* Writer
      // In one batch: the second copy answers with the first; another tenant's same key is its own.
      const one = yield* oneBatch(probe, req("a"), [
        req("a", { idempotencyKey: "k1" }),
        req("a", { idempotencyKey: "k1" }),
        req("b", { idempotencyKey: "k1" }),
        req(null, { idempotencyKey: "k2" }),
        req("default", { idempotencyKey: "k2" })
      ])
      expect(one.commits).toBe(1)
      const [a1, a2, b1, d1, d2] = one.results.map((r) => Result.getOrThrow(r))
      expect(a1!.duplicate).toBe(false)
      expect(a2).toEqual({ id: a1!.id, seq: a1!.seq, duplicate: true })
      expect(b1!.duplicate).toBe(false)
      expect(b1!.seq).not.toBe(a1!.seq)
      expect(d2).toEqual({ id: d1!.id, seq: d1!.seq, duplicate: true })
      const hooks = yield* hookCount
      const pendingA = (yield* countersOf(yield* (yield* Tenants).ord("a"))).pending
      // Across batches: the first answer, no commit, nothing queued.
      const writes = probe.writes
      const again = yield* Effect.forEach([req("a", { idempotencyKey: "k1" }), req(null, { idempotencyKey: "k2" })], (r) => writer.submit(r))
      expect(again).toEqual([
        { id: a1!.id, seq: a1!.seq, duplicate: true },
        { id: d1!.id, seq: d1!.seq, duplicate: true }
      ])
      expect(probe.writes).toBe(writes)
      expect(yield* hookCount).toBe(hooks)
      expect((yield* countersOf(yield* (yield* Tenants).ord("a"))).pending).toBe(pendingA)
    }).pipe(Effect.provide(stack(layerMemory(), probe)))
  })

  it.effect("an idempotency key answers with the first hook only within its window", () =>
    Effect.gen(function* () {
      const writer = yield* Writer
      const k = req("a", { idempotencyKey: "k" })
      const first = yield* writer.submit(k)
      yield* TestClock.adjust(999)
      expect(yield* writer.submit(k)).toEqual({ ...first, duplicate: true })
      yield* TestClock.adjust(1)
      const second = yield* writer.submit(k)
      expect(second.duplicate).toBe(false)
      expect(second.seq).toBeGreaterThan(first.seq)
      expect(yield* writer.submit(k)).toEqual({ ...second, duplicate: true })
    }).pipe(Effect.provide(stack(layerMemory(), new Probe(), { dedupeWindowMs: 1000 })))
  )

  it.live("a full queue answers Overloaded at once and the queued requests still commit", () => {
    const probe = new Probe()
    return Effect.gen(function* () {
      const writer = yield* Writer
      const { fiber: lead, release } = yield* holdCommit(writer, probe, req("a"))
      const queued = yield* Effect.forEach([req("a"), req("b")], (r) => Effect.forkChild(writer.submit(r)))
      yield* waitUntil(Effect.map(writer.queued, (n) => n === 2))
      // By count: the third waiting request is refused without waiting.
      const refused = yield* Effect.result(writer.submit(req("c")))
      expect(Result.isFailure(refused) && refused.failure._tag === "Overloaded" && refused.failure.reason === "requests").toBe(true)
      yield* release
      yield* Fiber.join(lead)
      for (const f of queued) expect((yield* Fiber.join(f)).duplicate).toBe(false)
      expect(yield* writer.queued).toBe(0)
      expect(yield* Effect.flip((yield* Tenants).ord("c"))).toMatchObject({ _tag: "TenantNotFound" })
    }).pipe(Effect.provide(stack(layerMemory(), probe, { queueCapacity: 2 })))
  })

  it.live("the queue's byte bound answers Overloaded and an empty queue still takes a large request", () => {
    const probe = new Probe()
    return Effect.gen(function* () {
      const writer = yield* Writer
      const { fiber: lead, release } = yield* holdCommit(writer, probe, req("a"))
      const big = yield* Effect.forkChild(writer.submit(req("a", { body: Buffer.alloc(64) })))
      yield* waitUntil(Effect.map(writer.queued, (n) => n === 1))
      const refused = yield* Effect.result(writer.submit(req("a", { body: Buffer.alloc(1) })))
      expect(Result.isFailure(refused) && refused.failure._tag === "Overloaded" && refused.failure.reason === "bytes").toBe(true)
      yield* release
      yield* Fiber.join(lead)
      expect((yield* Fiber.join(big)).duplicate).toBe(false)
      // The bound is released as requests are taken.
      expect((yield* writer.submit(req("a", { body: Buffer.alloc(32) }))).duplicate).toBe(false)
    }).pipe(Effect.provide(stack(layerMemory(), probe, { queueBytes: 32 })))
  })

  it.live("shutdown commits the queued requests and refuses new ones", () => shutdownCase(memoryBackend()))

  it.live("the tenant cache is bounded, cleared whole when full, and a hit reads nothing", () =>
    Effect.gen(function* () {
      const writer = yield* Writer
      const store = yield* Store
      const misses = (t: string) =>
        Effect.gen(function* () {
          yield* store.resetStats
          yield* writer.submit(req(t))
          return (yield* store.stats).pointReads["tenant_ords"] ?? 0
        })
      expect(yield* misses("t1")).toBe(1)
      expect(yield* misses("t1")).toBe(0)
      expect(yield* misses("t2")).toBe(1)
      // Full at 2: t3 clears the cache whole, so t1 misses again and t3 hits.
      expect(yield* misses("t3")).toBe(1)
      expect(yield* misses("t1")).toBe(1)
      expect(yield* misses("t1")).toBe(0)
      yield* expectConsistentTenants(new Set(["t1", "t2", "t3"]))
    }).pipe(Effect.provide(stack(layerMemory(), new Probe(), { tenantCacheEntries: 2 })))
  )

  it.live("hook ids carry the node and the seq, and the node id survives a restart", () =>
    Effect.gen(function* () {
      const db = new MemoryDb()
      const submit = (t: string) => Effect.flatMap(Writer, (w) => w.submit(req(t))).pipe(Effect.provide(stack(layerMemory({ db }), new Probe())))
      const a = yield* submit("a")
      const b = yield* submit("b")
      expect(HookId.parse(a.id)?.seq).toBe(a.seq)
      expect(HookId.parse(b.id)).toEqual({ node: HookId.parse(a.id)!.node, seq: b.seq })
      const other = yield* Effect.flatMap(Writer, (w) => w.submit(req("a"))).pipe(Effect.provide(stack(layerMemory(), new Probe())))
      expect(HookId.parse(other.id)!.node).not.toBe(HookId.parse(a.id)!.node)
    })
  )

  it.live("exclusive runs with no ingest commit in between", () => {
    const probe = new Probe()
    return Effect.gen(function* () {
      const writer = yield* Writer
      yield* writer.submit(req("a"))
      const inside = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const section = yield* Effect.forkChild(
        writer.exclusive(Effect.andThen(Deferred.succeed(inside, undefined), Deferred.await(release)).pipe(Effect.as(probe.writes)))
      )
      yield* Deferred.await(inside)
      const writes = probe.writes
      const pending = yield* Effect.forkChild(writer.submit(req("b")))
      yield* Effect.sleep(20)
      // The request was taken but its commit waits for the section.
      expect(probe.writes).toBe(writes)
      yield* Deferred.succeed(release, undefined)
      expect(yield* Fiber.join(section)).toBe(writes)
      expect((yield* Fiber.join(pending)).duplicate).toBe(false)
      expect(probe.writes).toBe(writes + 1)
    }).pipe(Effect.provide(stack(layerMemory(), probe)))
  })

  it.live("a request the store cannot key is refused before it is queued", () =>
    Effect.gen(function* () {
      const writer = yield* Writer
      const bad = yield* Effect.result(writer.submit(req("a\u0000b")))
      expect(Result.isFailure(bad) && bad.failure._tag === "InvalidIngest").toBe(true)
      const badKey = yield* Effect.result(writer.submit(req("a", { idempotencyKey: "" })))
      expect(Result.isFailure(badKey) && badKey.failure._tag === "InvalidIngest").toBe(true)
      const noSinks = yield* Effect.result(writer.submit(req("a", { sinks: [] })))
      expect(Result.isFailure(noSinks) && noSinks.failure._tag === "InvalidIngest").toBe(true)
      expect(yield* hookCount).toBe(0)
    }).pipe(Effect.provide(stack(layerMemory(), new Probe())))
  )

  it("a request is answered once, and its item lets go of the request and the callback as it answers", () => {
    const answers: Array<Exit.Exit<IngestResult, SubmitError>> = []
    const request = req("a")
    const item: Item = { req: request, done: (exit) => answers.push(exit), bytes: request.body.length }
    const first = Exit.succeed({ id: "h_1", seq: 1, duplicate: false })
    answerItem(item, first)
    answerItem(item, Exit.fail(new WriterClosed()))
    expect(answers).toEqual([first])
    expect(item.req).not.toBe(request)
    expect(item.req.body.length).toBe(0)
  })
})

// Concurrency and durability on the real store: reopening the temp dir is the restart.
describe("Writer on RocksDB", () => {
  it.live("tenant ordinal is assigned once and never reused", () => Effect.scoped(Effect.flatMap(rocksBackend, ordinalCase)))

  it.live("shutdown commits the queued requests and refuses new ones", () => Effect.scoped(Effect.flatMap(rocksBackend, shutdownCase)))
})
