import { describe, expect, it } from "@effect/vitest"
import { Effect, Metric, Stream } from "effect"
import * as Counters from "../src/domain/counters.js"
import * as Deliveries from "../src/domain/deliveries.js"
import * as K from "../src/domain/keys.js"
import * as M from "../src/observability/delivery-metrics.js"
import * as Gauges from "../src/observability/gauges.js"
import * as Queue from "../src/queue/queue.js"
import * as Tenants from "../src/queue/tenants.js"
import { scrape } from "../src/observability/prometheus.js"
import { Store, type StoreShape } from "../src/store/store.js"
import * as TopTenants from "../src/observability/top-tenants-metric.js"
import { makeIngest, memoryWorld, rocksWorld, type World } from "./pipeline-world.js"

/**
 * The store with its reads split by kind, per family: range reads (`scan`,
 * `stream`: a fold would show here) and one-entry seeks (`first`). The
 * store's own stats count a seek as a scan; this tells them apart.
 */
const instrument = (s: StoreShape) => {
  const ranges: Record<string, number> = {}
  const seeks: Record<string, number> = {}
  const add = (m: Record<string, number>, f: string) => {
    m[f] = (m[f] ?? 0) + 1
  }
  const store: StoreShape = {
    ...s,
    scan: (cf, r, o) => Effect.suspend(() => (add(ranges, K.familyOf(cf, r.lo)), s.scan(cf, r, o))),
    stream: (cf, r, o) => Stream.suspend(() => (add(ranges, K.familyOf(cf, r.lo)), s.stream(cf, r, o))),
    first: (cf, r, o) => Effect.suspend(() => (add(seeks, K.familyOf(cf, r.lo)), s.first(cf, r, o)))
  }
  return { store, ranges, seeks, reset: () => [ranges, seeks].forEach((m) => Object.keys(m).forEach((k) => delete m[k])) }
}

const gaugesOn = (store: StoreShape) =>
  Effect.flatMap(Tenants.make.pipe(Effect.provideService(Store, store)), (tenants) =>
    Gauges.make.pipe(Effect.provideService(Tenants.Tenants, tenants), Effect.provideService(Queue.Queue, Queue.make(store)))
  )

const gauge = (m: Metric.Gauge<number>) => Metric.value(m).pipe(Effect.map((s) => s.value))

/** Every field of the counters, folded from the families themselves (what the gauges must equal without reading them). */
const fold = (w: World) =>
  Effect.gen(function* () {
    const rows = (f: K.Family) => Stream.runCollect(w.store.stream(f.cf, K.familyDataRange(f))).pipe(Effect.map((c) => [...c]))
    const c: Record<Counters.FieldName, number> = { ...Counters.zero }
    for (const e of yield* rows(K.Families.due)) {
      const v = K.decodeDueValue(e.value)
      c[v.kind === 0 ? "pending" : "scheduled"]++
    }
    c.inflight = (yield* rows(K.Families.inflight)).length
    c.dead = (yield* rows(K.Families.dead)).length
    c.archive_pending = (yield* rows(K.Families.archive)).length
    for (const e of yield* rows(K.Families.deliveries)) c.bytes += Deliveries.decodeRow(e.value)!.size
    return c
  })

describe("gauges", () => {
  it.live("queue gauges read counters", () =>
    Effect.gen(function* () {
      const w = yield* rocksWorld
      const ingest = makeIngest(w.store)
      const now = Date.now()
      // A backlog in every family: due (first attempts and retries), inflight, dead (+ by tenant), archive.
      const hooks = yield* ingest(
        Array.from({ length: 60 }, (_, i) => ({ tenant: `t${i % 7}`, sinks: ["a", "b"], at: now - 50_000 + i * 500, archive: i % 3 === 0 }))
      )
      const ords = [...new Set(hooks.map((h) => h.ord))]
      const claimed: Array<Queue.DueEntry> = []
      for (const ord of ords) claimed.push(...(yield* w.queue.dueForTenant(ord, now, 0, 6, 1 << 30)))
      yield* w.store.write(Deliveries.batch(claimed.map((d) => Deliveries.claim(d.ref, d.value))), { sync: false })
      const ref = (d: Queue.DueEntry): K.InflightRef => ({ ord: d.ref.ord, seq: d.ref.seq, sink: d.ref.sink })
      const row = (d: Queue.DueEntry): Deliveries.DeliveryRow => ({ attempts: 1, lastStatus: 500, size: d.value.size, lastAt: now })
      const outcomes = claimed.map((d, i) =>
        i % 3 === 0
          ? Deliveries.retry(ref(d), row(d), now + 3_600_000)
          : i % 3 === 1
            ? Deliveries.deadLetter(ref(d), row(d), now, { sourceId: "src", id: `msg_${d.ref.seq}` })
            : undefined
      )
      yield* w.store.write(Deliveries.batch(outcomes.filter((t) => t !== undefined)), { sync: false })
      const folded = yield* fold(w)
      // The backlog really is in every family the gauges must not scan.
      // `waiting` needs an ordered destination (test/ordered-store-check.test.ts); it is read with the others.
      for (const f of Counters.FieldNames) if (f !== "waiting") expect(folded[f]).toBeGreaterThan(0)

      const probe = instrument(w.store)
      const gauges = yield* gaugesOn(probe.store)
      yield* w.store.resetStats
      probe.reset()
      const t0 = Date.now()
      const r = yield* gauges.tick
      const t1 = Date.now()
      const stats = yield* w.store.stats

      // No range read of due, inflight, dead, dead_by_tenant or archive, and no hook or row read.
      for (const f of ["due", "inflight", "dead", "dead_by_tenant", "archive"]) expect(probe.ranges[f] ?? 0).toBe(0)
      for (const f of ["inflight", "dead", "dead_by_tenant", "archive"]) expect(stats.scans[f] ?? 0).toBe(0)
      // The store counts each seek as a scan: every due "scan" it saw is one of oldestDueAge's seeks (TEN-1 §5, ≤ 33).
      expect(stats.scans["due"] ?? 0).toBe(probe.seeks["due"] ?? 0)
      expect(probe.seeks["due"] ?? 0).toBeLessThanOrEqual(Queue.OLDEST_AGE_MAX_STALE + 1)
      expect(stats.pointReads["hooks"] ?? 0).toBe(0)
      expect(stats.pointReads["deliveries"] ?? 0).toBe(0)
      // Counter reads: one a field of ord 0, and one pending read per active tenant (top tenants).
      const active = yield* w.queue.activeTenants(t1)
      expect(stats.pointReads["counters"]).toBe(Counters.FieldNames.length + active.length)

      // What they report equals a fold of the families.
      expect(r.counters).toEqual(folded)
      for (const f of Counters.FieldNames) expect(yield* gauge(M.queue[f])).toBe(folded[f])
      // The oldest due age is exact: the tick's clock minus the earliest due `at` (the fold's, here).
      const due = yield* Stream.runCollect(w.store.stream("index", K.familyDataRange(K.Families.due))).pipe(
        Effect.map((c) => [...c].map((e) => K.decodeDueKey(e.key).at).filter((at) => at <= t0))
      )
      const earliest = Math.min(...due)
      expect(r.oldestDueAgeMs).toBeGreaterThanOrEqual(t0 - earliest)
      expect(r.oldestDueAgeMs).toBeLessThanOrEqual(t1 - earliest)
      expect(yield* gauge(M.oldestDueAge)).toBe(r.oldestDueAgeMs / 1000)
      expect(r.tenants).toBe(ords.length)
      expect(yield* gauge(M.tenants)).toBe(ords.length)
    })
  )

  it.live("top tenants by pending", () =>
    Effect.gen(function* () {
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const now = Date.now()
      // Tenant pN has N pending rows (N = 1..150); sN has only retries due later, dN only dead rows: neither is pending.
      const specs = []
      for (let n = 1; n <= 150; n++) for (let k = 0; k < n; k++) specs.push({ tenant: `p${n}`, sinks: ["a"], at: now - 30_000 + k })
      specs.push({ tenant: "s1", sinks: ["a"], at: now - 40_000 }, { tenant: "d1", sinks: ["a"], at: now - 40_000 })
      const hooks = yield* ingest(specs)
      const ordOf = (t: string) => hooks.find((h) => h.tenant === t)!.ord
      for (const t of ["s1", "d1"]) {
        const [d] = yield* w.queue.dueForTenant(ordOf(t), now, 0, 1, 1 << 30)
        const ref = { ord: d!.ref.ord, seq: d!.ref.seq, sink: d!.ref.sink }
        const row = { attempts: 1, lastStatus: 503, size: d!.value.size, lastAt: now }
        yield* w.store.write(Deliveries.batch([Deliveries.claim(d!.ref, d!.value)]), { sync: false })
        const next = t === "s1" ? Deliveries.retry(ref, row, now - 10_000) : Deliveries.deadLetter(ref, row, now, { sourceId: "src", id: "x" })
        yield* w.store.write(Deliveries.batch([next]), { sync: false })
      }

      const gauges = yield* gaugesOn(w.store)
      const r = yield* gauges.tick
      const want = Array.from({ length: 100 }, (_, i) => ({ tenant: `p${150 - i}`, pending: 150 - i }))
      expect(r.top.map((t) => ({ tenant: t.tenant, pending: t.pending }))).toEqual(want)
      expect(TopTenants.current()).toEqual(want)
      const text = yield* scrape
      for (const t of want) expect(text).toContain(`ankusa_tenant_pending{tenant="${t.tenant}"} ${t.pending}\n`)
      // s1's retry is due now (scheduled, not pending); d1 is dead: neither ranks.
      expect(r.top.some((t) => t.tenant === "s1" || t.tenant === "d1")).toBe(false)

      // A tenant that leaves the top leaves /metrics; the next one in line enters. At most 100 series.
      const purged = yield* w.queue.purgeTenant(ordOf("p150"), ["pending"])
      expect(purged.pending).toBe(150)
      const r2 = yield* gauges.tick
      expect(r2.top[0]!.tenant).toBe("p149")
      expect(r2.top[r2.top.length - 1]!.tenant).toBe("p50")
      const text2 = yield* scrape
      expect(text2).not.toContain(`tenant="p150"`)
      expect(text2).toContain(`ankusa_tenant_pending{tenant="p50"} 50\n`)
      expect(text2.split("\n").filter((l) => l.startsWith("ankusa_tenant_pending{"))).toHaveLength(Gauges.TOP_TENANTS)
    })
  )

  it.live("top tenants are ranked among the first 10,000 active tenants", () =>
    Effect.gen(function* () {
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const now = Date.now()
      // 10,000 tenants waiting longest with one pending row each, then 5 newer ones with 3 each.
      const old = Array.from({ length: Gauges.TOP_TENANTS_SCANNED }, (_, i) => ({ tenant: `o${i}`, sinks: ["a"], at: now - 60_000 }))
      const late = Array.from({ length: 5 }, (_, i) => Array.from({ length: 3 }, () => ({ tenant: `n${i}`, sinks: ["a"], at: now - 1_000 }))).flat()
      yield* ingest([...old, ...late])
      yield* w.store.resetStats
      const r = yield* (yield* gaugesOn(w.store)).tick
      expect(r.top).toHaveLength(Gauges.TOP_TENANTS)
      expect(r.top.every((t) => t.tenant.startsWith("o") && t.pending === 1)).toBe(true)
      // One pending read per active tenant looked at, plus one a field of the aggregate.
      expect((yield* w.store.stats).pointReads["counters"]).toBe(Gauges.TOP_TENANTS_SCANNED + Counters.FieldNames.length)
    })
  )
})
