import { afterAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Context, Effect, Layer, type Scope } from "effect"
import fc from "fast-check"
import * as Counters from "../src/domain/counters.js"
import * as Deliveries from "../src/domain/deliveries.js"
import * as K from "../src/domain/keys.js"
import { del, merge, type Op } from "../src/domain/ops.js"
import * as Tenants from "../src/domain/tenants.js"
import { checkStore } from "../src/queue/format/check.js"
import * as Queue from "../src/queue/queue.js"
import { makeMemoryStore } from "../src/store/memory.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import { layerPostgres } from "../src/store/postgres.js"
import { Store, type StoreShape } from "../src/store/store.js"
import { type PgCluster, pgUnavailable, startCluster } from "./support/pg-cluster.js"
import { allocAll, allocOps, commit, envelope } from "./queue-helpers.js"

// ---------------------------------------------------------------------------
// A model of the queue: where every delivery row is, what it weighs.

type State =
  | { readonly t: "due"; readonly at: number; readonly kind: 0 | 1 }
  // `from`: the due row it was claimed from (an unclaim puts it back), when claimed by `claim`.
  | { readonly t: "inflight"; readonly from?: { readonly at: number; readonly kind: 0 | 1 } }
  | { readonly t: "dead"; readonly at: number }

interface MRow {
  readonly seq: number
  readonly sink: number
  readonly ord: number
  readonly size: number
  attempts: number
  state: State
}

interface MHook {
  readonly seq: number
  readonly ord: number
  readonly size: number
  readonly id: string
  sinks: number
}

class Model {
  readonly rows = new Map<string, MRow>()
  readonly hooks: Array<MHook> = []
  readonly archive = new Map<number, number>()
  readonly tenants = new Map<string, number>()
  nextOrd = 1
  nextSeq = 1
  now = 1_700_000_000_000

  rowsIn(t: State["t"], ord?: number): Array<MRow> {
    return [...this.rows.values()].filter((r) => r.state.t === t && (ord === undefined || r.ord === ord))
  }

  counters(): Counters.TenantCounters {
    const c = { ...Counters.zero }
    for (const r of this.rows.values()) {
      if (r.state.t === "due") c[r.state.kind === 0 ? "pending" : "scheduled"]++
      else c[r.state.t === "inflight" ? "inflight" : "dead"]++
      c.bytes += r.size
    }
    c.archive_pending = this.archive.size
    return c
  }
}

const key = (seq: number, sink: number) => `${seq}:${sink}`
const pickFrom = <A>(xs: ReadonlyArray<A>, pick: number): A | undefined => (xs.length === 0 ? undefined : xs[pick % xs.length])
const dueRef = (r: MRow & { state: { t: "due" } }): K.DueRef => ({ ord: r.ord, at: r.state.at, seq: r.seq, sink: r.sink })
const inflightRef = (r: MRow): K.InflightRef => ({ ord: r.ord, seq: r.seq, sink: r.sink })
const rowOf = (r: MRow, now: number): Deliveries.DeliveryRow => ({ attempts: r.attempts, lastStatus: 500, size: r.size, lastAt: now })
const isDue = (r: MRow): r is MRow & { state: { t: "due"; at: number; kind: 0 | 1 } } => r.state.t === "due"

const OPS = [
  "ingest",
  "claim",
  "retry",
  "deliver",
  "deadLetter",
  "revive",
  "recover",
  "unclaim",
  "expand",
  "purge",
  "settle",
  "drop",
  "orphanDrop",
  "tick",
  "purgeTenant",
  "recoverAll"
] as const

// Weighted so that long chains (ingest → claim → dead-letter → purge) are common.
const WEIGHT: Readonly<Record<(typeof OPS)[number], number>> = {
  ingest: 4,
  claim: 4,
  retry: 2,
  deliver: 2,
  deadLetter: 3,
  revive: 1,
  recover: 1,
  unclaim: 1,
  expand: 2,
  purge: 2,
  settle: 1,
  drop: 1,
  orphanDrop: 1,
  tick: 2,
  purgeTenant: 2,
  recoverAll: 1
}

const command = fc.record({
  op: fc.oneof(...OPS.map((op) => ({ arbitrary: fc.constant(op), weight: WEIGHT[op] }))),
  pick: fc.nat({ max: 10_000 }),
  dt: fc.nat({ max: 5_000 }),
  n: fc.integer({ min: 1, max: 3 }),
  tenant: fc.integer({ min: 0, max: 2 }),
  flag: fc.boolean()
})
type Command = typeof command extends fc.Arbitrary<infer A> ? A : never

/** Transitions applied over all runs, by op: the property asserts each was exercised. */
const hits = new Map<string, number>()
const hit = (label: string) => {
  hits.set(label, (hits.get(label) ?? 0) + 1)
}

/** Apply one command to the store (through Deliveries transitions or the Queue) and to the model. */
const step = (store: StoreShape, queue: Queue.QueueShape, m: Model, c: Command) =>
  Effect.gen(function* () {
    const now = m.now
    switch (c.op) {
      case "ingest": {
        const name = `t${c.tenant}`
        let ord = m.tenants.get(name)
        const extra: Array<Op> = []
        if (ord === undefined) {
          ord = m.nextOrd++
          m.tenants.set(name, ord)
          extra.push(...Tenants.allocate(name, ord), Tenants.nextOrdOp(m.nextOrd))
        }
        const seq = m.nextSeq++
        const env = envelope({ id: `h${seq}`, tenant: name, bodyBytes: c.pick % 40, sinks: c.n })
        yield* commit(store, [Deliveries.ingest({ seq, ord, envelope: env, sinkCount: c.n, at: now, archive: c.flag })], extra)
        m.hooks.push({ seq, ord, size: env.length, id: `h${seq}`, sinks: c.n })
        for (let sink = 0; sink < c.n; sink++) {
          m.rows.set(key(seq, sink), { seq, sink, ord, size: env.length, attempts: 0, state: { t: "due", at: now, kind: 0 } })
        }
        if (c.flag) m.archive.set(seq, ord)
        hit(c.op)
        return
      }
      case "claim": {
        const due = m.rowsIn("due").filter(isDue)
        const chosen = [...new Set(Array.from({ length: c.n }, (_, i) => pickFrom(due, c.pick + i)!))].filter((r) => r !== undefined)
        if (chosen.length === 0) return
        yield* commit(store, chosen.map((r) => Deliveries.claim(dueRef(r), { size: r.size, kind: r.state.kind })))
        for (const r of chosen) (r as MRow).state = { t: "inflight", from: { at: r.state.at, kind: r.state.kind } }
        hit(c.op)
        return
      }
      case "retry": {
        const r = pickFrom(m.rowsIn("inflight"), c.pick)
        if (r === undefined) return
        r.attempts++
        yield* commit(store, [Deliveries.retry(inflightRef(r), rowOf(r, now), now + c.dt)])
        r.state = { t: "due", at: now + c.dt, kind: 1 }
        hit(c.op)
        return
      }
      case "deliver":
      case "orphanDrop": {
        const r = pickFrom(m.rowsIn("inflight"), c.pick)
        if (r === undefined) return
        const t = c.op === "deliver" ? Deliveries.delivered(inflightRef(r), r.size) : Deliveries.orphanDrop(inflightRef(r), r.size)
        yield* commit(store, [t])
        m.rows.delete(key(r.seq, r.sink))
        hit(c.op)
        return
      }
      case "deadLetter": {
        const r = pickFrom(m.rowsIn("inflight"), c.pick)
        if (r === undefined) return
        r.attempts++
        yield* commit(store, [Deliveries.deadLetter(inflightRef(r), rowOf(r, now), now, { sourceId: "src", id: `h${r.seq}` })])
        r.state = { t: "dead", at: now }
        hit(c.op)
        return
      }
      case "revive": {
        const r = pickFrom(m.rowsIn("dead"), c.pick)
        if (r === undefined || r.state.t !== "dead") return
        yield* commit(store, [Deliveries.revive({ at: r.state.at, seq: r.seq, sink: r.sink }, r.ord, r.size, now)])
        r.attempts = 0
        r.state = { t: "due", at: now, kind: 0 }
        hit(c.op)
        return
      }
      case "recover": {
        const r = pickFrom(m.rowsIn("inflight"), c.pick)
        if (r === undefined) return
        yield* commit(store, [Deliveries.recover(inflightRef(r), r.size, now)])
        r.state = { t: "due", at: now, kind: 0 }
        hit(c.op)
        return
      }
      case "unclaim": {
        // A tick that failed after its claim gives the rows back as they were.
        const r = pickFrom(m.rowsIn("inflight").filter((x) => x.state.t === "inflight" && x.state.from !== undefined), c.pick)
        if (r === undefined || r.state.t !== "inflight" || r.state.from === undefined) return
        const from = r.state.from
        yield* queue.unclaim([{ ref: { ord: r.ord, at: from.at, seq: r.seq, sink: r.sink }, value: { size: r.size, kind: from.kind } }])
        r.state = { t: "due", at: from.at, kind: from.kind }
        hit(c.op)
        return
      }
      case "expand": {
        const h = pickFrom(m.hooks, c.pick)
        if (h === undefined || h.sinks >= 6) return
        const sink = h.sinks++
        const at = now + (c.flag ? c.dt : 0)
        yield* commit(store, [Deliveries.expand({ ord: h.ord, seq: h.seq, sink, size: h.size, at })])
        m.rows.set(key(h.seq, sink), { seq: h.seq, sink, ord: h.ord, size: h.size, attempts: 0, state: { t: "due", at, kind: 0 } })
        hit(c.op)
        return
      }
      case "purge": {
        if (c.flag) {
          const r = pickFrom(m.rowsIn("due").filter(isDue), c.pick)
          if (r === undefined) return
          yield* commit(store, [Deliveries.purgeDue(dueRef(r), { size: r.size, kind: r.state.kind })])
          m.rows.delete(key(r.seq, r.sink))
        } else {
          const r = pickFrom(m.rowsIn("dead"), c.pick)
          if (r === undefined || r.state.t !== "dead") return
          yield* commit(store, [Deliveries.purgeDead({ at: r.state.at, seq: r.seq, sink: r.sink }, r.ord, r.size)])
          m.rows.delete(key(r.seq, r.sink))
        }
        hit(c.flag ? "purge:due" : "purge:dead")
        return
      }
      case "settle":
      case "drop": {
        const seq = pickFrom([...m.archive.keys()], c.pick)
        if (seq === undefined) return
        const ord = m.archive.get(seq)!
        yield* commit(store, [c.op === "settle" ? Deliveries.archiveSettle(seq, ord) : Deliveries.archiveDrop(seq, ord)])
        m.archive.delete(seq)
        hit(c.op)
        return
      }
      case "tick": {
        // The pipeline's cleanup after a visit (no claims here): stale markers go, live ones stay.
        m.now += c.dt
        const active = yield* queue.activeTenants(m.now)
        for (const a of active) {
          const r = yield* queue.cleanupMarkers(a.ord, m.now, a.buckets)
          if (r.deleted.length > 0) hit("tick:deleted")
        }
        return
      }
      case "purgeTenant": {
        // Prefer a tenant with rows to purge, so the purge has work.
        const withRows = [...new Set([...m.rowsIn("dead"), ...m.rowsIn("due")].map((r) => r.ord))]
        const ord = pickFrom(withRows.length > 0 ? withRows : [...m.tenants.values()], c.pick)
        if (ord === undefined) return
        const kinds: ReadonlyArray<Queue.PurgeKind> = c.flag ? ["pending", "dead"] : ["dead"]
        const r = yield* queue.purgeTenant(ord, kinds, { chunk: 2 })
        const gone = [...m.rowsIn("dead", ord), ...(c.flag ? m.rowsIn("due", ord) : [])]
        expect(r.pending + r.dead).toBe(gone.length)
        for (const g of gone) m.rows.delete(key(g.seq, g.sink))
        if (r.pending > 0) hit("purgeTenant:pending")
        if (r.dead > 0) hit("purgeTenant:dead")
        return
      }
      case "recoverAll": {
        const n = yield* queue.recoverInflight(now)
        const inflight = m.rowsIn("inflight")
        expect(n).toBe(inflight.length)
        for (const r of inflight) r.state = { t: "due", at: now, kind: 0 }
        if (n > 0) hit(c.op)
        return
      }
    }
  })

// ---------------------------------------------------------------------------
// Markers: writers enqueue at past, present and future seconds; the pipeline claims and cleans up,
// with other writers' commits placed before, inside and after its cleanup.

// Concurrent writes mostly hit the tenant being cleaned, in recent seconds: where its stale markers are.
// (`toCleaned`: the write goes to the cleaned tenant, in the second of one of its scanned markers.)
const write = fc.record({ toCleaned: fc.constantFrom(true, true, true, false), ord: fc.integer({ min: 1, max: 2 }), dBucket: fc.integer({ min: -3, max: 1 }), pick: fc.nat(), ms: fc.nat({ max: 999 }) })
type WriteCmd = typeof write extends fc.Arbitrary<infer A> ? A : never
const markerCommand = fc.record({
  op: fc.constantFrom("enqueue", "enqueue", "enqueue", "claim", "claim", "claim", "cleanup", "cleanup", "advance"),
  ord: fc.integer({ min: 1, max: 2 }),
  dBucket: fc.integer({ min: -3, max: 3 }),
  ms: fc.nat({ max: 999 }),
  // Between steps 1 and 2 is where a lost marker would come from: weighted up.
  where: fc.constantFrom("scan", "first", "first", "first", "delete", "after"),
  writes: fc.array(write, { maxLength: 4 })
})

/** Due rows whose marker is missing (the store check's marker test, alone, for speed). */
const missingMarkers = (store: StoreShape) =>
  Effect.gen(function* () {
    const due = yield* store.scan("index", K.familyDataRange(K.Families.due), { limit: 10_000 })
    const refs = due.map((e) => K.decodeDueKey(e.key))
    const found = yield* store.multiGet("index", refs.map((r) => Deliveries.markerKey(K.bucketOf(r.at), r.ord)))
    return refs.filter((_, i) => found[i] === undefined)
  })

// ---------------------------------------------------------------------------
// Concurrency: many fibers, one tenant, each walking its own rows through different builders.

const FIBERS = 32

const concurrentWriters = (store: StoreShape) =>
  Effect.gen(function* () {
    const queue = Queue.make(store)
    yield* store.write(allocOps(1), { sync: true })
    const ord = 1
    const now = 1_700_000_000_000
    const expected = { ...Counters.zero }
    const script = (i: number) =>
      Effect.gen(function* () {
        const seq = i + 1
        const env = envelope({ id: `h${seq}`, tenant: "t1", bodyBytes: 10 + i, sinks: 2 })
        const size = env.length
        const at = now + i
        const d0: K.DueRef = { ord, at, seq, sink: 0 }
        const d1: K.DueRef = { ord, at, seq, sink: 1 }
        const f0: K.InflightRef = { ord, seq, sink: 0 }
        const f1: K.InflightRef = { ord, seq, sink: 1 }
        const kind0: K.DueValue = { size, kind: 0 }
        const row = Deliveries.freshRow(size)
        // Yield before every commit so the fibers' batches interleave.
        const c = (...ts: ReadonlyArray<Deliveries.Transition>) => Effect.andThen(Effect.yieldNow, commit(store, ts))
        yield* c(Deliveries.ingest({ seq, ord, envelope: env, sinkCount: 2, at, archive: true }))
        switch (i % 4) {
          case 0: // claim both, deliver both, settle the archive: nothing left
            yield* c(Deliveries.claim(d0, kind0), Deliveries.claim(d1, kind0))
            yield* c(Deliveries.delivered(f0, size))
            yield* c(Deliveries.delivered(f1, size))
            yield* c(Deliveries.archiveSettle(seq, ord))
            return
          case 1: // a retry, then dead; the other sink waits
            yield* c(Deliveries.claim(d0, kind0))
            yield* c(Deliveries.retry(f0, { ...row, attempts: 1 }, at + 1000))
            yield* c(Deliveries.claim({ ...d0, at: at + 1000 }, { size, kind: 1 }))
            yield* c(Deliveries.deadLetter(f0, { ...row, attempts: 2 }, at + 2000, { sourceId: "src", id: `h${seq}` }))
            expected.dead++
            expected.pending++
            expected.bytes += 2 * size
            expected.archive_pending++
            return
          case 2: // dead, revived, claimed, dropped as an orphan; the other sink claimed and recovered
            yield* c(Deliveries.claim(d0, kind0))
            yield* c(Deliveries.deadLetter(f0, row, at, { sourceId: "src", id: `h${seq}` }))
            yield* c(Deliveries.revive({ at, seq, sink: 0 }, ord, size, at + 5))
            yield* c(Deliveries.claim({ ...d0, at: at + 5 }, kind0))
            yield* c(Deliveries.orphanDrop(f0, size))
            yield* c(Deliveries.claim(d1, kind0))
            yield* c(Deliveries.recover(f1, size, at + 7))
            expected.pending++
            expected.bytes += size
            expected.archive_pending++
            return
          default: // a third sink expanded, one sink retried, one purged
            yield* c(Deliveries.expand({ ord, seq, sink: 2, size, at }))
            yield* c(Deliveries.claim(d1, kind0))
            yield* c(Deliveries.retry(f1, { ...row, attempts: 1 }, at + 60_000))
            yield* c(Deliveries.purgeDue(d0, kind0))
            yield* c(Deliveries.archiveDrop(seq, ord))
            expected.pending++
            expected.scheduled++
            expected.bytes += 2 * size
            return
        }
      })
    yield* Effect.forEach(
      Array.from({ length: FIBERS }, (_, i) => i),
      script,
      { concurrency: "unbounded", discard: true }
    )
    expect(yield* queue.counters(ord)).toEqual(expected)
    expect(yield* queue.aggregate).toEqual(expected)
    expect((yield* checkStore(store)).differences).toEqual([])
  })

interface StoreCase {
  readonly name: string
  readonly open: Effect.Effect<StoreShape, unknown, Scope.Scope>
}

const stores: ReadonlyArray<StoreCase> = [
  { name: "memory", open: makeMemoryStore() },
  {
    // Real concurrency: the batches of the fibers are committed by RocksDB's worker thread in whatever order they arrive.
    name: "RocksDB",
    open: Effect.acquireRelease(
      Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-queue-"))),
      (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
    ).pipe(Effect.flatMap((dir) => makeRocksDbStore(dir)))
  },
  // Real concurrency on a server: the fibers' batches are transactions on several connections, merging the same counters.
  ...(pgUnavailable === undefined
    ? [{
        name: "PostgreSQL",
        open: Effect.promise(async () => {
          cluster ??= await startCluster()
          return cluster.createDatabase()
        }).pipe(Effect.flatMap((url) => Effect.map(Layer.build(layerPostgres({ url })), Context.get(Store))))
      }]
    : [])
]

let cluster: PgCluster | undefined
afterAll(async () => {
  await cluster?.stop()
})

describe("queue transitions", () => {
  it("counters equal a fold after any sequence of transitions", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 80, size: "max" }), (commands) =>
        Effect.runPromise(
          Effect.gen(function* () {
            const store = yield* makeMemoryStore()
            const queue = Queue.make(store)
            const m = new Model()
            for (const c of commands) yield* step(store, queue, m, c)
            const report = yield* checkStore(store)
            // Counters of every tenant and the aggregate equal the fold; ?X mirrors ?x; every due row has its marker.
            expect(report.differences).toEqual([])
            expect(report.ok).toBe(true)
            // The fold saw the rows the model says exist, and the aggregate equals the model too.
            const want = m.counters()
            expect(report.rows["due"] ?? 0).toBe(want.pending + want.scheduled)
            expect(report.rows["inflight"] ?? 0).toBe(want.inflight)
            expect(report.rows["dead"] ?? 0).toBe(want.dead)
            expect(report.rows["dead_by_tenant"] ?? 0).toBe(want.dead)
            expect(yield* queue.aggregate).toEqual(want)
            for (const ord of m.tenants.values()) {
              const t = { ...Counters.zero }
              for (const r of m.rows.values()) {
                if (r.ord !== ord) continue
                if (r.state.t === "due") t[r.state.kind === 0 ? "pending" : "scheduled"]++
                else t[r.state.t === "inflight" ? "inflight" : "dead"]++
                t.bytes += r.size
              }
              t.archive_pending = [...m.archive.values()].filter((o) => o === ord).length
              expect(yield* queue.counters(ord)).toEqual(t)
            }
          })
        )
      ),
      { numRuns: 120 }
    )
    // The runs exercised every transition (a property that never reaches one proves nothing about it).
    const labels = [...OPS.filter((o) => o !== "tick" && o !== "purge" && o !== "purgeTenant"), "purge:due", "purge:dead", "tick:deleted", "purgeTenant:pending", "purgeTenant:dead"]
    expect(labels.filter((l) => (hits.get(l) ?? 0) === 0)).toEqual([])
  })

  it("store check reports a counter off, a missing marker, a broken mirror and an unallocated ordinal", () =>
    Effect.runPromise(
      Effect.gen(function* () {
        const store = yield* makeMemoryStore()
        const now = 1_700_000_000_000
        const env = envelope({ id: "h1", tenant: "t1", sinks: 2 })
        yield* commit(store, [Deliveries.ingest({ seq: 1, ord: 1, envelope: env, sinkCount: 2, at: now, archive: false })], allocOps(1))
        const r0: K.InflightRef = { ord: 1, seq: 1, sink: 0 }
        yield* commit(store, [Deliveries.claim({ ...r0, at: now }, { size: env.length, kind: 0 })])
        yield* commit(store, [Deliveries.deadLetter(r0, Deliveries.freshRow(env.length), now, { sourceId: "s", id: "h1" })])
        expect((yield* checkStore(store)).differences).toEqual([])

        // Break one thing of each kind behind the transitions' back.
        const broken: Array<Op> = [
          merge("counters", K.counterKey(1, Counters.Fields.pending), 1n),
          Deliveries.markerDel(K.bucketOf(now), 1),
          del("index", Deliveries.byTenantKeyOfDead(1, { at: now, seq: 1, sink: 0 })),
          ...Deliveries.expand({ ord: 7, seq: 2, sink: 0, size: 3, at: now }).ops
        ]
        yield* store.write(broken, { sync: false })
        const report = yield* checkStore(store)
        const problems = report.differences.map((d) => `${d.problem}:${d.ord}:${d.field ?? ""}`)
        expect(report.ok).toBe(false)
        expect(problems).toEqual(
          expect.arrayContaining(["counter:1:pending", "counter:0:pending", "missing_marker:1:", "missing_by_tenant:1:", "counter:7:pending", "ord_not_allocated:7:"])
        )
      })
    ))
  it("no due row without a marker", async () => {
    // Cleanups where writes landed between steps 1 and 2 and step 3 put a marker back.
    let raced = 0
    await fc.assert(
      fc.asyncProperty(fc.array(markerCommand, { minLength: 1, maxLength: 40, size: "max" }), (commands) =>
        Effect.runPromise(
          Effect.gen(function* () {
            const store = yield* makeMemoryStore()
            const queue = Queue.make(store)
            yield* store.write(allocAll(3), { sync: false })
            let now = 1_700_000_000_500
            let seq = 1
            const enqueue = (w: { readonly ord: number; readonly dBucket: number; readonly ms: number }) =>
              commit(store, [Deliveries.expand({ ord: w.ord, seq: seq++, sink: 0, size: 1, at: (K.bucketOf(now) + w.dBucket) * 1000 + w.ms })])
            // Each concurrent write is its own batch, as from its own writer.
            const writers = (ord: number, scanned: ReadonlyArray<number>, ws: ReadonlyArray<WriteCmd>) =>
              Effect.forEach(
                ws,
                (w) =>
                  w.toCleaned && scanned.length > 0
                    ? enqueue({ ord, dBucket: scanned[w.pick % scanned.length]! - K.bucketOf(now), ms: w.ms })
                    : enqueue(w),
                { discard: true }
              )
            for (const c of commands) {
              switch (c.op) {
                case "enqueue":
                  yield* enqueue(c)
                  break
                case "claim": {
                  const first = yield* queue.firstDue(c.ord)
                  if (first !== undefined) yield* commit(store, [Deliveries.claim(first.ref, first.value)])
                  break
                }
                case "advance":
                  now += c.ms * 4
                  break
                case "cleanup": {
                  const active = yield* queue.activeTenants(now)
                  const a = active.find((t) => t.ord === c.ord)
                  const scanned = a?.buckets ?? []
                  if (c.where === "scan") yield* writers(c.ord, scanned, c.writes)
                  if (a !== undefined) {
                    const r = yield* queue.cleanupMarkers(a.ord, now, a.buckets, {
                      between: (p) => (p === c.where ? writers(c.ord, scanned, c.writes) : Effect.void)
                    })
                    if (c.where === "first" && r.restored.length > 0) raced++
                  } else if (c.where === "first" || c.where === "delete") yield* writers(c.ord, scanned, c.writes)
                  if (c.where === "after") yield* writers(c.ord, scanned, c.writes)
                  break
                }
              }
              expect(yield* missingMarkers(store)).toEqual([])
            }
            expect((yield* checkStore(store)).differences).toEqual([])
          })
        )
      ),
      { numRuns: 150 }
    )
    // The race the cleanup exists for was exercised, not just the quiet path.
    // (Several buckets at once, every interleaving point: test/queue-active.test.ts.)
    expect(raced).toBeGreaterThan(0)
  })

  describe.each(stores)("on the $name store", ({ open }) => {
    it("concurrent writers do not lose counts", () =>
      Effect.runPromise(Effect.scoped(Effect.flatMap(open, concurrentWriters))))
  })
})
