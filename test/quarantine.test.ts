import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Metric } from "effect"
import { TestClock } from "effect/testing"
import { Families, familyDataRange } from "../src/domain/keys.js"
import { quarantineDropped, withReason } from "../src/observability/lifecycle-metrics.js"
import * as Q from "../src/lifecycle/quarantine.js"
import { Store } from "../src/store/store.js"
import { layerMemory, MemoryDb } from "../src/store/memory.js"

const env = (db: MemoryDb, o: Partial<Q.QuarantineOptions>) =>
  Q.layer(o).pipe(Layer.provideMerge(layerMemory({ db })))

const input = (tenant: string, n: number, bodyBytes = 10) => ({
  tenant,
  source: "src",
  reason: "signature_mismatch",
  headers: { "webhook-id": `msg_${n}` },
  body: Buffer.alloc(bodyBytes, n % 256)
})

const dropped = (reason: string) =>
  Metric.value(withReason(quarantineDropped, reason)).pipe(Effect.map((s: Metric.CounterState<number>) => s.count))

/** Every `?q` row in the store, oldest first, with its tenant and index. */
const rows = Effect.gen(function* () {
  const store = yield* Store
  const r = familyDataRange(Families.quarantine)
  return yield* store.scan("index", r, { limit: 100_000 })
})

describe("quarantine", () => {
  it.effect("quarantine is bounded and scoped", () =>
    Effect.gen(function* () {
      const db = new MemoryDb()
      const maxCount = 5
      const countDropsBefore = yield* dropped("count")
      yield* Effect.gen(function* () {
        const q = yield* Q.Quarantine
        const kept: Array<number> = []
        for (let i = 0; i < 12; i++) {
          yield* TestClock.adjust(1)
          const r = yield* q.put(input(i % 2 === 0 ? "a" : "b", i))
          kept.push(r!.qid)
        }
        // Bounded by count: only the newest maxCount remain, in the store and in the totals.
        const all = yield* rows
        expect(all.length).toBe(maxCount)
        expect((yield* q.size).count).toBe(maxCount)
        const newest = yield* q.list({ scope: null, limit: 100 })
        expect(newest.records.map((r) => r.qid)).toEqual(kept.slice(-maxCount).reverse())
        expect((yield* dropped("count")) - countDropsBefore).toBe(12 - maxCount)

        // Scoped: a token for "a" sees only a's records, newest first, and pages with a cursor.
        const p1 = yield* q.list({ scope: ["a"], limit: 2 })
        expect(p1.records.every((r) => r.tenant === "a")).toBe(true)
        expect(p1.records.length).toBe(2)
        const p2 = yield* q.list({ scope: ["a"], limit: 2, ...(p1.cursor === null ? {} : { cursor: p1.cursor }) })
        const aAll = newest.records.filter((r) => r.tenant === "a")
        expect([...p1.records, ...p2.records].map((r) => r.qid)).toEqual(aAll.map((r) => r.qid))
        expect(p2.cursor).toBeNull()
        expect((yield* q.list({ scope: ["a"], tenant: "b", limit: 10 })).records).toEqual([])
        // The record round-trips: body bytes, headers, reason.
        const one = aAll[0]!
        const i = kept.indexOf(one.qid)
        expect(Buffer.from(one.body).equals(Buffer.from(input("a", i).body))).toBe(true)
        expect(one.headers).toEqual(input("a", i).headers)

        // Delete by tenant touches only that tenant.
        const bBefore = newest.records.filter((r) => r.tenant === "b").length
        expect(yield* q.deleteTenant("a")).toBe(aAll.length)
        const left = yield* q.list({ scope: null, limit: 100 })
        expect(left.records.length).toBe(bBefore)
        expect(left.records.every((r) => r.tenant === "b")).toBe(true)
        expect((yield* q.size).count).toBe(bBefore)
      }).pipe(Effect.provide(env(db, { maxCount, maxBytes: 1 << 20 })))

      // Bounded by bytes: a reopened service folds the totals back and keeps the byte bound.
      const bytesDropsBefore = yield* dropped("bytes")
      yield* Effect.gen(function* () {
        const q = yield* Q.Quarantine
        const maxBytes = 600
        for (let i = 0; i < 20; i++) {
          yield* TestClock.adjust(1)
          yield* q.put(input("c", 100 + i, 100))
          const s = yield* q.size
          expect(s.bytes).toBeLessThanOrEqual(maxBytes)
          const all = yield* rows
          expect(all.reduce((n, e) => n + e.key.length + e.value.length, 0)).toBe(s.bytes)
          expect(all.length).toBe(s.count)
        }
        expect((yield* dropped("bytes")) - bytesDropsBefore).toBeGreaterThan(0)
        // A record larger than the whole bound is refused, not stored.
        expect(yield* q.put(input("c", 999, 10_000))).toBeUndefined()
      }).pipe(Effect.provide(env(db, { maxCount: 1_000, maxBytes: 600 })))

      // Retention: records older than the bound are pruned.
      yield* Effect.gen(function* () {
        const q = yield* Q.Quarantine
        const before = (yield* q.size).count
        expect(before).toBeGreaterThan(0)
        yield* TestClock.adjust(60_000)
        yield* q.put(input("d", 1))
        expect(yield* q.prune).toBe(before)
        const left = yield* q.list({ scope: null, limit: 100 })
        expect(left.records.map((r) => r.tenant)).toEqual(["d"])
      }).pipe(Effect.provide(env(db, { retention: 30_000 })))
    })
  )

  it.effect("a quarantine write of a tenant an erase refused after the edge's check is not kept", () =>
    Effect.gen(function* () {
      const db = new MemoryDb()
      yield* Effect.gen(function* () {
        const q = yield* Q.Quarantine
        // The Writer's refusal as the edge passes it: a set that erase's step 1 fills.
        const refused = new Set<string>()
        const erased = (t: string) => refused.has(t)
        // Kept before the refusal: there for the erase's step 6 to delete.
        expect((yield* q.put(input("gone", 1), erased))?.tenant).toBe("gone")
        refused.add("gone")
        expect(yield* q.deleteTenant("gone")).toBe(1)
        // A request the edge let through before the refusal, written after it: refused, not kept.
        const late = yield* Effect.flip(q.put(input("gone", 2), erased))
        expect(late._tag).toBe("TenantErased")
        // Another tenant's write is kept as before.
        expect((yield* q.put(input("other", 3), erased))?.tenant).toBe("other")
        expect((yield* rows).length).toBe(1)
        expect((yield* q.size).count).toBe(1)
        expect((yield* q.list({ scope: ["gone"], limit: 10 })).records).toEqual([])
      }).pipe(Effect.provide(env(db, {})))
    })
  )
})
