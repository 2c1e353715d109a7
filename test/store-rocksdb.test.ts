import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer } from "effect"
import { spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { range } from "../src/domain/keys.js"
import { ColumnFamilies, deleteRange, merge, put } from "../src/domain/ops.js"
import type { CommitThread } from "../src/store/rocksdb-commit.js"
import { MAX_WRITE_BUFFERS, storeMemoryBound } from "../src/store/rocksdb-open.js"
import { layerRocksDb, type RocksDbOptions } from "../src/store/rocksdb.js"
import { Store } from "../src/store/store.js"
import { storeConformance } from "./store-conformance.js"

/** Small, so that a poisoned batch is cheap to build; the conformance ranges stay below it. */
const BOUND = 64

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "ankusa-store-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const openStore = (dir: string, options: RocksDbOptions = {}) => Effect.map(Layer.build(layerRocksDb(dir, options)), Context.get(Store))

for (const commitThread of ["worker", "main"] as const satisfies ReadonlyArray<CommitThread>) {
  storeConformance<string>({
    name: `rocksdb (commits on ${commitThread})`,
    fresh: tempDir,
    layer: (dir, opts) => layerRocksDb(dir, { ...opts, commitThread, maxRangeDeleteKeys: BOUND }),
    // A range delete that expands past the bound fails the batch after its other ops were added to the WriteBatch.
    poison: () =>
      Effect.gen(function* () {
        const store = yield* Store
        const prefix = Buffer.from("t:poison:")
        yield* store.write(
          Array.from({ length: BOUND + 1 }, (_, i) => put("default", Buffer.concat([prefix, Buffer.from([i])]))),
          { sync: false }
        )
        return [deleteRange("default", range(prefix).lo, range(prefix).hi)]
      })
  })
}

describe("Store on RocksDB", () => {
  it.effect("a second open of the same directory fails with StoreLocked, not a crash", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* openStore(dir)
      const err = yield* Effect.scoped(openStore(dir)).pipe(Effect.flip)
      expect(err._tag).toBe("StoreLocked")
      expect(err.message).toMatch(/already open/)
    }))

  it.effect("a deleteRange past maxRangeDeleteKeys fails its batch with a StoreError naming the bound", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const store = yield* openStore(dir, { maxRangeDeleteKeys: 10 })
      const key = (i: number) => Buffer.from([0x70, i])
      yield* store.write(Array.from({ length: 11 }, (_, i) => put("index", key(i))), { sync: true })
      const err = yield* store.write([put("hooks", Buffer.from([1]), Buffer.from([1])), deleteRange("index", key(0), key(11))], { sync: true }).pipe(Effect.flip)
      expect(err.message).toMatch(/RANGE_TOO_LARGE.*maxRangeDeleteKeys \(10 keys per batch\)/)
      expect(yield* store.get("hooks", Buffer.from([1]))).toBeUndefined()
      // At the bound it passes.
      yield* store.write([deleteRange("index", key(0), key(10))], { sync: true })
      expect(yield* store.scan("index", range(Buffer.from([0x70])), { limit: 20 })).toHaveLength(1)
    }))

  it.effect("a merge outside the counters family is refused before it reaches RocksDB", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const store = yield* openStore(dir)
      const err = yield* store.write([put("hooks", Buffer.from([2]), Buffer.from([2])), merge("hooks", Buffer.from([3]), 1n)], { sync: true }).pipe(Effect.flip)
      expect(err.message).toMatch(/only counters has a merge operator/)
      // RocksDB would have applied the put and then stopped every later write.
      expect(yield* store.get("hooks", Buffer.from([2]))).toBeUndefined()
      yield* store.write([put("hooks", Buffer.from([4]), Buffer.from([4]))], { sync: true })
    }))

  it.effect("a format 2 build refuses ops on format 3 column families", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const store = yield* openStore(dir, { supportedFormat: 2 })
      const err = yield* store.write([put("tenants", Buffer.from([0x74]), Buffer.from([1]))], { sync: true }).pipe(Effect.flip)
      expect(err.message).toMatch(/tenants is not open in a format 2 build/)
    }))

  it.effect("commits from concurrent fibers apply in call order, and a failure fails only its own write", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const store = yield* openStore(dir, { maxRangeDeleteKeys: 1, commitThread: "worker" })
      const key = Buffer.from([9, 9])
      yield* store.write([put("index", Buffer.from([0x71, 1])), put("index", Buffer.from([0x71, 2]))], { sync: false })
      const tooWide = deleteRange("index", Buffer.from([0x71]), Buffer.from([0x72]))
      const exits = yield* Effect.all(
        Array.from({ length: 40 }, (_, i) =>
          Effect.exit(store.write(i === 20 ? [put("hooks", key, Buffer.from([i])), tooWide] : [put("hooks", key, Buffer.from([i]))], { sync: i % 2 === 0 }))
        ),
        { concurrency: "unbounded" }
      )
      expect(exits.map(Exit.isSuccess)).toEqual(Array.from({ length: 40 }, (_, i) => i !== 20))
      expect(yield* store.get("hooks", key)).toEqual(Buffer.from([39]))
    }))

  it.effect("column families are created with their options", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* Effect.scoped(openStore(dir))
      const file = readdirSync(dir).filter((f) => f.startsWith("OPTIONS-")).sort().at(-1)!
      const sections = new Map(
        readFileSync(join(dir, file), "utf8")
          .split("[CFOptions ")
          .slice(1)
          .map((s) => [s.slice(1, s.indexOf('"', 1)), s] as const)
      )
      expect([...sections.keys()].sort()).toEqual(["audit", "counters", "default", "deliveries", "hooks", "index", "tenants"])
      const opt = (cf: string, name: string) => new RegExp(`\\n\\s*${name}=([^\\n]*)`).exec(sections.get(cf)!)?.[1]
      expect(opt("counters", "merge_operator")).toBe("UInt64AddOperator")
      expect(opt("counters", "write_buffer_size")).toBe(String(1024 * 1024))
      expect(opt("counters", "compression")).toBe("kNoCompression")
      expect(opt("counters", "compression_per_level") ?? "").not.toMatch(/ZSTD/)
      expect(opt("index", "write_buffer_size")).toBe(String(16 * 1024 * 1024))
      // docs/storage.md "Memory": every family's write buffers are bounded by our options, none by the binding's 64 MiB default.
      const buffers = { default: 2, hooks: 16, deliveries: 8, index: 16, audit: 2, tenants: 2, counters: 1 }
      for (const [cf, mib] of Object.entries(buffers)) {
        expect([cf, opt(cf, "write_buffer_size"), opt(cf, "max_write_buffer_number")]).toEqual([cf, String(mib * 1024 * 1024), String(MAX_WRITE_BUFFERS)])
      }
      expect(storeMemoryBound(ColumnFamilies)).toBe((6 * (2 + 16 + 8 + 16 + 2 + 2 + 1) + 7 * 8) * 1024 * 1024)
      expect(opt("hooks", "merge_operator")).toBe("nullptr")
    }))
})

describe("rocksdb close", () => {
  it("a store on worker commits closes before the process exits", { timeout: 60_000 }, () => {
    const dir = mkdtempSync(join(tmpdir(), "ankusa-store-close-"))
    try {
      const child = spawnSync(process.execPath, ["--import", "tsx", join(import.meta.dirname, "support/store-close-child.ts"), dir], {
        encoding: "utf8",
        timeout: 50_000
      })
      expect(child.stderr).toBe("")
      expect(child.stdout).toBe("closed\n")
      expect(child.status).toBe(0)
      // Closed: RocksDB released its lock, so the directory opens again.
      expect(readdirSync(dir)).toContain("LOCK")
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
