/**
 * The store's health (`StoreShape.health`) and its gauges: RocksDB's read on
 * a real store in a temp directory, the memory store's answer, the bounded
 * directory listing, and the scheduled read behind `ankusa_store_*`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Logger, Metric } from "effect"
import { TestClock } from "effect/testing"
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { put } from "../src/domain/ops.js"
import { scrape } from "../src/observability/prometheus.js"
import * as StoreHealth from "../src/observability/store-health.js"
import { layerMemory, memoryHealth } from "../src/store/memory.js"
import { diskUsage, kindOf } from "../src/store/rocksdb-health.js"
import { layerRocksDb } from "../src/store/rocksdb.js"
import { Store, StoreError, type StoreHealth as Health, type StoreShape } from "../src/store/store.js"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "ankusa-health-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const open = <E>(l: Layer.Layer<Store, E>) => Effect.map(Layer.build(l), Context.get(Store))

/** Bytes of `dir`'s files by kind, read here with sync fs (what the health read must equal). */
const onDisk = (dir: string) => {
  const bytes = { sst: 0, wal: 0, other: 0 }
  let files = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (!e.isFile()) continue
    bytes[kindOf(e.name)] += statSync(join(dir, e.name)).size
    files++
  }
  return { ...bytes, files }
}

const rows = (n: number, tag: number) =>
  Array.from({ length: n }, (_, i) => put("hooks", Buffer.from([tag, i >> 8, i & 0xff]), Buffer.alloc(1024, i)))

const gauge = (m: Metric.Gauge<number>) => Metric.value(m).pipe(Effect.map((s) => s.value))

/** A store whose health is `read`; every other call is the memory store's. */
const storeWith = (read: Effect.Effect<Health, StoreError>) =>
  Effect.map(open(layerMemory()), (s): StoreShape => ({ ...s, health: read }))

describe("store health", () => {
  it.effect("RocksDB: after writes and a reopen, SST and WAL bytes are > 0, the kinds add up to the directory, writes are not stopped", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* Effect.scoped(Effect.flatMap(open(layerRocksDb(dir)), (s) => s.write(rows(500, 1), { sync: true })))
      // Reopening replays the WAL into memtables and flushes them: SSTs, then a fresh WAL for the next write.
      const store = yield* open(layerRocksDb(dir))
      yield* store.write(rows(10, 2), { sync: true })
      const h = yield* store.health
      const disk = onDisk(dir)
      expect(h.disk.sst).toBeGreaterThan(0)
      expect(h.disk.wal).toBeGreaterThan(0)
      expect(h.disk).toEqual({ ...disk, truncated: false })
      expect(h.writeStopped).toBe(false)
      expect(h.delayedWriteRate).toBe(0)
      expect(h.backgroundErrors).toBe(0)
      expect(h.runningCompactions).toBeGreaterThanOrEqual(0)
      expect(h.runningFlushes).toBeGreaterThanOrEqual(0)
    }))

  it.effect("RocksDB: a health read of a closed store fails with a StoreError, not a crash", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const store = yield* Effect.scoped(open(layerRocksDb(dir)))
      const err = yield* store.health.pipe(Effect.flip)
      expect(err).toBeInstanceOf(StoreError)
      expect(err.message).toMatch(/not open/)
    }))

  it.effect("the directory listing counts regular files by kind, at most its bound, and says when it stopped there", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const sizes = { "000010.sst": 10, "000011.sst": 11, "000012.log": 12, MANIFEST: 13, CURRENT: 14 }
      for (const [name, size] of Object.entries(sizes)) writeFileSync(join(dir, name), Buffer.alloc(size))
      mkdirSync(join(dir, "archive"))
      writeFileSync(join(dir, "archive", "000001.log"), Buffer.alloc(99))

      const all = yield* diskUsage(dir)
      expect(all).toEqual({ sst: 10 + 11, wal: 12, other: 13 + 14, files: 5, truncated: false })

      const bounded = yield* diskUsage(dir, 2)
      expect(bounded.files).toBe(2)
      expect(bounded.truncated).toBe(true)
      expect(bounded.sst + bounded.wal + bounded.other).toBeLessThan(all.sst + all.wal + all.other)

      const err = yield* diskUsage(join(dir, "missing")).pipe(Effect.flip)
      expect(err.op).toBe("health")
    }))

  it.effect("the memory store is a healthy, empty store: nothing stopped or failed, no bytes on disk", () =>
    Effect.gen(function* () {
      const store = yield* open(layerMemory())
      yield* store.write(rows(10, 1), { sync: true })
      expect(yield* store.health).toEqual({
        writeStopped: false,
        delayedWriteRate: 0,
        backgroundErrors: 0,
        runningCompactions: 0,
        runningFlushes: 0,
        disk: { sst: 0, wal: 0, other: 0, files: 0, truncated: false }
      })
      expect(yield* store.health).toEqual(memoryHealth)
    }))

  it.effect("a health read sets every store gauge, and the series render in the Prometheus text", () =>
    Effect.gen(function* () {
      const reading: Health = {
        writeStopped: true,
        delayedWriteRate: 16 * 1024 * 1024,
        backgroundErrors: 3,
        runningCompactions: 2,
        runningFlushes: 1,
        disk: { sst: 1_000_000, wal: 64_000, other: 12_345, files: 9, truncated: false }
      }
      const store = yield* storeWith(Effect.succeed(reading))
      expect(yield* StoreHealth.tick.pipe(Effect.provideService(Store, store))).toEqual(reading)
      const text = yield* scrape
      expect(text).toContain("# TYPE ankusa_store_write_stopped gauge\nankusa_store_write_stopped 1\n")
      expect(text).toContain(`ankusa_store_delayed_write_rate_bytes ${reading.delayedWriteRate}\n`)
      expect(text).toContain(`ankusa_store_background_errors ${reading.backgroundErrors}\n`)
      expect(text).toContain(`ankusa_store_running_compactions ${reading.runningCompactions}\n`)
      expect(text).toContain(`ankusa_store_running_flushes ${reading.runningFlushes}\n`)
      for (const kind of ["sst", "wal", "other"] as const) {
        expect(text).toContain(`ankusa_store_disk_bytes{kind="${kind}"} ${reading.disk[kind]}\n`)
      }
      expect(text).toContain(`ankusa_store_disk_files ${reading.disk.files}\n`)

      yield* StoreHealth.publish({ ...reading, writeStopped: false })
      expect(yield* gauge(StoreHealth.writeStopped)).toBe(0)
    }))

  it.effect("a failed health read is logged and the next one runs on time", () =>
    Effect.gen(function* () {
      const logs: Array<string> = []
      let reads = 0
      const reading: Health = { ...memoryHealth, runningFlushes: 7, disk: { ...memoryHealth.disk, wal: 4321, files: 1 } }
      const store = yield* storeWith(
        Effect.suspend(() => (++reads === 1 ? Effect.fail(new StoreError({ op: "health", message: "injected" })) : Effect.succeed(reading)))
      )
      const intervalMs = 1_000
      yield* Layer.build(StoreHealth.layer({ intervalMs })).pipe(
        Effect.provideService(Store, store),
        Effect.provide(Logger.layer([Logger.make(({ message }) => logs.push(String(message)))]))
      )
      yield* TestClock.adjust(intervalMs - 1)
      expect(reads).toBe(1)
      expect(logs.some((l) => l.includes("store health: read failed"))).toBe(true)
      yield* TestClock.adjust(1)
      expect(reads).toBe(2)
      expect(yield* gauge(StoreHealth.runningFlushes)).toBe(reading.runningFlushes)
      expect(yield* gauge(StoreHealth.diskBytesOf("wal"))).toBe(reading.disk.wal)
    }))

  it.effect("a listing that stopped at its bound is warned of once", () =>
    Effect.gen(function* () {
      const logs: Array<string> = []
      const store = yield* storeWith(Effect.succeed({ ...memoryHealth, disk: { ...memoryHealth.disk, files: 2, truncated: true } }))
      yield* Layer.build(StoreHealth.layer({ intervalMs: 1_000 })).pipe(
        Effect.provideService(Store, store),
        Effect.provide(Logger.layer([Logger.make(({ message }) => logs.push(String(message)))]))
      )
      yield* TestClock.adjust(5_000)
      expect(logs.filter((l) => l.includes("more files than one read lists"))).toHaveLength(1)
    }))
})
