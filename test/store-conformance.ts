/**
 * The one conformance suite of the `Store` service: every layer runs it
 * (test/store-memory.test.ts, test/store-rocksdb.test.ts) and must pass it
 * unchanged, so the memory layer is a faithful stand-in for RocksDB.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, Layer, type Scope, Stream } from "effect"
import { asBuffer, encodeU32, Families, familiesOf, familyOf, Meta, range } from "../src/domain/keys.js"
import { type Batch, del, deleteRange, merge, put } from "../src/domain/ops.js"
import { foldFamily } from "../src/store/family.js"
import { Store, type StoreOpenError } from "../src/store/store.js"

export interface StoreHarness<L> {
  readonly name: string
  /** A new, empty store location, removed when the scope closes. */
  readonly fresh: Effect.Effect<L, never, Scope.Scope>
  readonly layer: (location: L, opts?: { readonly supportedFormat?: number }) => Layer.Layer<Store, StoreOpenError>
  /**
   * Make the next write fail as a whole: the returned ops, appended to a batch,
   * make the store reject it after the batch's other ops were taken in (the
   * memory layer arms an injected failure and returns no ops).
   */
  readonly poison: (location: L) => Effect.Effect<Batch, unknown, Store>
}

const b = (...bytes: Array<number>) => Buffer.from(bytes)
const hex = (k: Uint8Array | undefined) => (k === undefined ? undefined : asBuffer(k).toString("hex"))
const counter = (ord: number, field: number) => b(0, 0, (ord >> 8) & 0xff, ord & 0xff, field)
/** A key of `prefix` with a u16 suffix, in key order. */
const k = (prefix: number, i: number) => b(prefix, 0x10, i >> 8, i & 0xff)
const keysOf = (entries: ReadonlyArray<{ readonly key: Uint8Array }>) => entries.map((e) => hex(e.key))

/** The store of `layer`, open for the current scope. */
const open = (l: Layer.Layer<Store, StoreOpenError>) => Effect.map(Layer.build(l), Context.get(Store))

export const storeConformance = <L>(h: StoreHarness<L>) => {
  const freshStore = Effect.flatMap(h.fresh, (loc) => Effect.map(open(h.layer(loc)), (store) => ({ loc, store })))
  const shared = Layer.unwrap(Effect.map(h.fresh, (loc) => h.layer(loc)))

  describe(`Store conformance: ${h.name}`, () => {
    layer(shared)("one store, many batches", (it) => {
      it.effect("a fresh store is format 3 and has the lo and hi sentinels of every family", () =>
        Effect.gen(function* () {
          const store = yield* Store
          expect(yield* store.format).toBe(3)
          for (const f of familiesOf(3)) {
            const [lo, hi] = yield* store.multiGet(f.cf, [f.lo, f.hi])
            expect(lo, `${f.name} lo`).toBeDefined()
            expect(hi, `${f.name} hi`).toBeDefined()
          }
        }))

      it.effect("a batch commits puts, deletes and merges of several families together", () =>
        Effect.gen(function* () {
          const store = yield* Store
          yield* store.write([put("hooks", b(1, 1), b(9)), put("index", b(0x44, 1), b(8))], { sync: true })
          yield* store.write(
            [
              put("hooks", b(1, 2), b(1)),
              put("deliveries", b(1, 2, 0), b(2)),
              put("tenants", b(0x74, 0, 0, 0, 7), b(3)),
              del("index", b(0x44, 1)),
              merge("counters", counter(7, 1), 5n),
              put("default", b(0x6d, 1), b(4))
            ],
            { sync: true }
          )
          expect(yield* store.multiGet("hooks", [b(1, 1), b(1, 2)])).toEqual([b(9), b(1)])
          expect(yield* store.get("deliveries", b(1, 2, 0))).toEqual(b(2))
          expect(yield* store.get("tenants", b(0x74, 0, 0, 0, 7))).toEqual(b(3))
          expect(yield* store.get("index", b(0x44, 1))).toBeUndefined()
          expect(yield* store.getCounters("counters", [counter(7, 1)])).toEqual([5n])
          expect(yield* store.get("default", b(0x6d, 1))).toEqual(b(4))
        }))

      it.effect("synced and unsynced writes are both visible to reads at once", () =>
        Effect.gen(function* () {
          const store = yield* Store
          yield* store.write([put("hooks", b(2, 1), b(1))], { sync: true })
          yield* store.write([put("hooks", b(2, 2), b(2))], { sync: false })
          yield* store.write([], { sync: true })
          expect(yield* store.multiGet("hooks", [b(2, 1), b(2, 2)])).toEqual([b(1), b(2)])
        }))

      it.effect("merges are signed 64-bit adds: negative totals, totals past 2^32, wrap at 2^64", () =>
        Effect.gen(function* () {
          const store = yield* Store
          const [neg, big, both, wrap, missing] = [counter(1, 1), counter(1, 2), counter(1, 3), counter(1, 4), counter(1, 5)]
          yield* store.write([merge("counters", neg, -5n), merge("counters", big, 1n << 32n), merge("counters", both, 3n)], { sync: true })
          yield* store.write(
            [
              merge("counters", neg, -2n),
              merge("counters", big, (1n << 32n) + 7n),
              merge("counters", both, -10n),
              merge("counters", both, 4n),
              merge("counters", wrap, (1n << 63n) - 1n),
              merge("counters", wrap, 2n)
            ],
            { sync: false }
          )
          expect(yield* store.getCounters("counters", [neg, big, both, wrap, missing])).toEqual([
            -7n,
            (1n << 33n) + 7n,
            -3n,
            -(1n << 63n) + 1n,
            0n
          ])
          // The counters sentinels read back as zero totals.
          expect(yield* store.getCounters("counters", [Families.counters.lo, Families.counters.hi])).toEqual([0n, 0n])
        }))

      it.effect("multiGet answers in request order with undefined for missing keys", () =>
        Effect.gen(function* () {
          const store = yield* Store
          yield* store.write([put("deliveries", b(3, 1), b(1)), put("deliveries", b(3, 3), b(3))], { sync: false })
          expect(yield* store.multiGet("deliveries", [b(3, 3), b(3, 2), b(3, 1), b(3, 3), b(3, 9)])).toEqual([
            b(3),
            undefined,
            b(1),
            b(3),
            undefined
          ])
          expect(yield* store.multiGet("deliveries", [])).toEqual([])
          expect(yield* store.get("deliveries", b(3, 2))).toBeUndefined()
        }))

      it.effect("scans are bounded, forward and reverse, within [lo, hi)", () =>
        Effect.gen(function* () {
          const store = yield* Store
          yield* store.write(
            Array.from({ length: 20 }, (_, i) => put("audit", k(0x30, i), b(i))),
            { sync: false }
          )
          const r = { lo: k(0x30, 5), hi: k(0x30, 15) }
          const fwd = yield* store.scan("audit", r, { limit: 3 })
          expect(keysOf(fwd)).toEqual([5, 6, 7].map((i) => hex(k(0x30, i))))
          expect(fwd.map((e) => hex(e.value))).toEqual(["05", "06", "07"])
          expect(keysOf(yield* store.scan("audit", r, { limit: 3, reverse: true }))).toEqual([14, 13, 12].map((i) => hex(k(0x30, i))))
          expect(yield* store.scan("audit", r, { limit: 100 })).toHaveLength(10)
          expect(yield* store.scan("audit", r, { limit: 100, reverse: true })).toHaveLength(10)
          expect(yield* store.scan("audit", r, { limit: 0 })).toEqual([])
          expect(yield* store.scan("audit", { lo: k(0x30, 9), hi: k(0x30, 9) }, { limit: 5 })).toEqual([])
          expect(yield* store.scan("audit", { lo: k(0x30, 9), hi: k(0x30, 3) }, { limit: 5 })).toEqual([])
        }))

      it.effect("first returns the first entry of a range, or the last with reverse, or undefined", () =>
        Effect.gen(function* () {
          const store = yield* Store
          yield* store.write([put("index", k(0x51, 4), b(4)), put("index", k(0x51, 8), b(8))], { sync: false })
          const r = range(b(0x51))
          expect(hex((yield* store.first("index", r))?.key)).toBe(hex(k(0x51, 4)))
          expect(hex((yield* store.first("index", r, { reverse: true }))?.key)).toBe(hex(k(0x51, 8)))
          expect(yield* store.first("index", { lo: k(0x51, 5), hi: k(0x51, 8) })).toBeUndefined()
          expect(yield* store.first("index", range(b(0x52)))).toBeUndefined()
        }))

      it.effect("a deleteRange deletes [lo, hi) as of its place in the batch, with the rest of the batch", () =>
        Effect.gen(function* () {
          const store = yield* Store
          yield* store.write(Array.from({ length: 12 }, (_, i) => put("index", k(0x52, i), b(i))), { sync: true })
          yield* store.write(
            [
              put("index", k(0x52, 100), b(1)), // written before the range delete in the same batch: deleted
              merge("counters", counter(2, 1), 9n),
              deleteRange("index", k(0x52, 2), k(0x52, 10)),
              put("index", k(0x52, 5), b(55)), // written after it: kept
              deleteRange("index", k(0x52, 100), k(0x52, 101))
            ],
            { sync: true }
          )
          const left = yield* store.scan("index", range(b(0x52)), { limit: 100 })
          expect(keysOf(left)).toEqual([0, 1, 5, 10, 11].map((i) => hex(k(0x52, i))))
          expect(yield* store.get("index", k(0x52, 5))).toEqual(b(55))
          expect(yield* store.getCounters("counters", [counter(2, 1)])).toEqual([9n])
          // An empty or inverted range deletes nothing.
          yield* store.write([deleteRange("index", k(0x52, 11), k(0x52, 0)), deleteRange("index", k(0x52, 0), k(0x52, 0))], { sync: false })
          expect(yield* store.scan("index", range(b(0x52)), { limit: 100 })).toHaveLength(5)
        }))

      it.effect("stream reads a range in chunks, forward and reverse, and stops early", () =>
        Effect.gen(function* () {
          const store = yield* Store
          const n = 2_345
          for (let i = 0; i < n; i += 500) {
            yield* store.write(
              Array.from({ length: Math.min(500, n - i) }, (_, j) => put("deliveries", k(0x61, i + j), b(1))),
              { sync: false }
            )
          }
          const r = range(b(0x61))
          const chunks = yield* Stream.runCollect(Stream.chunks(store.stream("deliveries", r, { chunk: 100 })))
          expect(chunks.every((c) => c.length <= 100)).toBe(true)
          const all = chunks.flat()
          expect(all).toHaveLength(n)
          expect(keysOf(all)).toEqual(Array.from({ length: n }, (_, i) => hex(k(0x61, i))))
          const rev = yield* Stream.runCollect(store.stream("deliveries", r, { reverse: true, chunk: 7 }))
          expect(keysOf(rev)).toEqual(Array.from({ length: n }, (_, i) => hex(k(0x61, n - 1 - i))))
          const head = yield* Stream.runCollect(store.stream("deliveries", r, { chunk: 10 }).pipe(Stream.take(3)))
          expect(keysOf(head)).toEqual([0, 1, 2].map((i) => hex(k(0x61, i))))
          expect(yield* Stream.runCollect(store.stream("deliveries", range(b(0x62))))).toHaveLength(0)
        }))

      it.effect("health says a store that has taken writes is not stalled and has had no background errors", () =>
        Effect.gen(function* () {
          const store = yield* Store
          yield* store.write([put("hooks", b(0x7e, 1), Buffer.alloc(4096))], { sync: true })
          const h = yield* store.health
          expect(h.writeStopped).toBe(false)
          expect(h.delayedWriteRate).toBe(0)
          expect(h.backgroundErrors).toBe(0)
          for (const n of [h.runningCompactions, h.runningFlushes, h.disk.sst, h.disk.wal, h.disk.other, h.disk.files]) {
            expect(Number.isSafeInteger(n) && n >= 0, String(n)).toBe(true)
          }
          expect(h.disk.truncated).toBe(false)
        }))

      it.effect("a write marks the tenants whose counters it merged, once it has ended", () =>
        Effect.gen(function* () {
          const store = yield* Store
          const mark = yield* store.marks.mark
          yield* store.write([put("hooks", b(0x7d, 1), b(1)), merge("counters", counter(41, 1), 1n)], { sync: false })
          expect(yield* store.marks.settled).toBe(true)
          expect(store.marks.movedSince(41, mark)).toBe(true)
          expect(store.marks.movedSince(42, mark)).toBe(false)
          expect(store.marks.movedSince(41, yield* store.marks.mark)).toBe(false)
        }))

      it.effect("reads are counted by family: point reads and scans", () =>
        Effect.gen(function* () {
          const store = yield* Store
          yield* store.resetStats
          yield* store.get("hooks", b(1, 1))
          yield* store.multiGet("index", [Families.due.lo, Families.dead.lo, Families.dead.hi])
          yield* store.getCounters("counters", [counter(0, 1)])
          yield* store.scan("index", range(Families.due.lo), { limit: 1 })
          yield* store.first("index", range(Families.active.lo))
          yield* Stream.runDrain(store.stream("index", range(Families.dead.lo)))
          const stats = yield* store.stats
          expect(stats.pointReads).toEqual({ hooks: 1, due: 1, dead: 2, counters: 1 })
          expect(stats.scans).toEqual({ due: 1, active: 1, dead: 1 })
          expect(familyOf("index", Families.due.lo)).toBe("due")
          yield* store.resetStats
          expect(yield* store.stats).toEqual({ scans: {}, pointReads: {} })
        }))
    })

    it.effect("a failed batch leaves nothing of any of its families", () =>
      Effect.gen(function* () {
        const { loc, store } = yield* freshStore
        yield* store.write([put("hooks", b(5, 0), b(0)), merge("counters", counter(5, 1), 1n)], { sync: true })
        const poison = yield* h.poison(loc).pipe(Effect.provideService(Store, store))
        const failed = yield* store
          .write(
            [
              put("hooks", b(5, 1), b(1)),
              put("deliveries", b(5, 1, 0), b(1)),
              put("index", k(0x44, 5), b(1)),
              put("tenants", b(0x74, 0, 0, 0, 5), b(1)),
              del("hooks", b(5, 0)),
              merge("counters", counter(5, 1), 41n),
              deleteRange("audit", k(0x30, 0), k(0x30, 99)),
              ...poison
            ],
            { sync: true }
          )
          .pipe(Effect.flip)
        expect(failed._tag).toBe("StoreError")
        expect(yield* store.multiGet("hooks", [b(5, 0), b(5, 1)])).toEqual([b(0), undefined])
        expect(yield* store.get("deliveries", b(5, 1, 0))).toBeUndefined()
        expect(yield* store.get("index", k(0x44, 5))).toBeUndefined()
        expect(yield* store.get("tenants", b(0x74, 0, 0, 0, 5))).toBeUndefined()
        expect(yield* store.getCounters("counters", [counter(5, 1)])).toEqual([1n])
        // The store goes on: the next batch commits.
        yield* store.write([put("hooks", b(5, 2), b(2))], { sync: true })
        expect(yield* store.get("hooks", b(5, 2))).toEqual(b(2))
      }))

    it.effect("a whole-family scan that does not reach the hi sentinel fails with StoreCorrupt naming family and last key", () =>
      Effect.gen(function* () {
        const { store } = yield* freshStore
        const row = Buffer.concat([Families.due.lo, Buffer.alloc(22, 1)])
        yield* store.write([put("index", row, b(0, 0, 0, 1, 0))], { sync: true })
        expect(yield* foldFamily(store, Families.due, 0, (n) => n + 1)).toBe(1)
        yield* store.write([del("index", Families.due.hi)], { sync: true })
        const err = yield* foldFamily(store, Families.due, 0, (n) => n + 1).pipe(Effect.flip)
        expect(err._tag).toBe("StoreCorrupt")
        if (err._tag !== "StoreCorrupt") return
        expect(err.family).toBe("due")
        expect(err.lastKey).toBe(hex(row))
        // Without its lo sentinel the scan fails too.
        yield* store.write([del("index", Families.inflight.lo)], { sync: true })
        const lo = yield* foldFamily(store, Families.inflight, 0, (n) => n + 1).pipe(Effect.flip)
        expect(lo).toMatchObject({ _tag: "StoreCorrupt", family: "inflight" })
      }))

    it.effect("a format 2 release refuses a format 3 store", () =>
      Effect.gen(function* () {
        const loc = yield* h.fresh
        expect(yield* Effect.scoped(Effect.flatMap(open(h.layer(loc)), (s) => s.format))).toBe(3)
        const err = yield* Effect.scoped(open(h.layer(loc, { supportedFormat: 2 }))).pipe(Effect.flip)
        expect(err).toMatchObject({ _tag: "StoreFormatNewer", found: 3, supported: 2 })
        // It opened nothing: the format 3 build opens the store again.
        expect(yield* Effect.scoped(Effect.flatMap(open(h.layer(loc)), (s) => s.format))).toBe(3)
      }))

    it.effect("a store stamped with a newer format than supported is refused", () =>
      Effect.gen(function* () {
        const loc = yield* h.fresh
        yield* Effect.scoped(Effect.flatMap(open(h.layer(loc)), (s) => s.write([put("default", Meta.format, encodeU32(4))], { sync: true })))
        const err = yield* Effect.scoped(open(h.layer(loc))).pipe(Effect.flip)
        expect(err).toMatchObject({ _tag: "StoreFormatNewer", found: 4, supported: 3 })
      }))

    it.effect("a format 2 build opens a format 2 store; format 3 code keeps its stamp and adds the new sentinels", () =>
      Effect.gen(function* () {
        const loc = yield* h.fresh
        const v2 = yield* Effect.scoped(
          Effect.flatMap(open(h.layer(loc, { supportedFormat: 2 })), (s) =>
            Effect.zip(s.format, s.write([put("hooks", b(7, 7), b(7))], { sync: true }))
          )
        )
        expect(v2[0]).toBe(2)
        const store = yield* open(h.layer(loc))
        expect(yield* store.format).toBe(2)
        expect(yield* store.get("hooks", b(7, 7))).toEqual(b(7))
        expect(yield* store.multiGet("counters", [Families.counters.lo, Families.counters.hi])).toEqual([Buffer.alloc(8), Buffer.alloc(8)])
      }))

    it.effect("a lost sentinel stays lost across a reopen, so the scan still reports it", () =>
      Effect.gen(function* () {
        const loc = yield* h.fresh
        yield* Effect.scoped(Effect.flatMap(open(h.layer(loc)), (s) => s.write([del("index", Families.dead.hi)], { sync: true })))
        const store = yield* open(h.layer(loc))
        const err = yield* foldFamily(store, Families.dead, 0, (n) => n + 1).pipe(Effect.flip)
        expect(err).toMatchObject({ _tag: "StoreCorrupt", family: "dead" })
      }))

    it.effect("everything written survives a reopen", () =>
      Effect.gen(function* () {
        const loc = yield* h.fresh
        yield* Effect.scoped(
          Effect.flatMap(open(h.layer(loc)), (s) =>
            s.write([put("hooks", b(8, 1), b(1)), merge("counters", counter(8, 1), -3n), put("index", k(0x53, 1), b(1))], { sync: true })
          )
        )
        const store = yield* open(h.layer(loc))
        expect(yield* store.get("hooks", b(8, 1))).toEqual(b(1))
        expect(yield* store.getCounters("counters", [counter(8, 1)])).toEqual([-3n])
        expect(yield* store.first("index", range(b(0x53)))).toEqual({ key: k(0x53, 1), value: b(1) })
        expect(yield* store.get("default", Meta.format)).toEqual(Buffer.from(encodeU32(3)))
      }))
  })
}
