/**
 * Physical erasure (TEN-5; docs/storage.md "Physical erasure"): the bodies of
 * an erased tenant carry a random marker, and after the documented bound (the
 * erase done, then one restart of the store and the compactions it starts)
 * no file under the data directory holds it: the WAL, every SST, the
 * archive's segments (their gzip frames opened) and everything else. The
 * same search finds a kept tenant's marker afterwards, so it is able to.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { scanFrames, SEGMENT_MAGIC } from "../src/domain/segment.js"
import * as Erase from "../src/lifecycle/erase.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import { fill, openWorld, run, storeDirOf } from "./erase-world.js"
import { rmDir, tempDir } from "./lifecycle-helpers.js"

const files = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]))

/** The files of `dataDir` that hold `marker`: raw bytes, and inside each gzip frame of an archive segment. */
const holders = (dataDir: string, marker: Buffer): Array<string> =>
  files(dataDir).filter((f) => {
    const bytes = fs.readFileSync(f)
    if (bytes.includes(marker)) return true
    if (!bytes.subarray(0, SEGMENT_MAGIC.length).equals(SEGMENT_MAGIC)) return false
    return scanFrames(bytes, SEGMENT_MAGIC).frames.some((fr) => zlib.gunzipSync(fr.payload).includes(marker))
  })

const wals = (dataDir: string) => fs.readdirSync(storeDirOf(dataDir)).filter((n) => n.endsWith(".log"))

/**
 * Open the store alone and close it once the flushes and compactions its open starts are over:
 * none running, and `settled` true (at most 20 s: a busy CI machine may start them late).
 */
const restart = (dataDir: string, settled: () => boolean = () => true) =>
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* makeRocksDbStore(storeDirOf(dataDir))
      for (let i = 0; i < 400; i++) {
        const h = yield* store.health
        if (h.runningCompactions === 0 && h.runningFlushes === 0 && i >= 5 && settled()) break
        yield* Effect.sleep(50)
      }
    })
  )

describe("physical erasure", () => {
  it.live(
    "no byte of an erased tenant's bodies remains in the data directory after the documented bound",
    () =>
      Effect.acquireUseRelease(
        Effect.sync(() => tempDir("erase-physical")),
        (dir) =>
          Effect.gen(function* () {
            const { markers } = yield* Effect.scoped(Effect.flatMap(openWorld(dir), (w) => fill(w, ["acme", "globex"], 30)))
            // A restart first, so the bodies are in SST files too, not only in the WAL and memtables.
            yield* restart(dir)
            const kept = markers.get("acme")!
            const erased = markers.get("globex")!
            const before = holders(dir, erased)
            expect(before.some((f) => f.endsWith(".sst")), before.join()).toBe(true)
            expect(before.some((f) => f.endsWith(".seg")), before.join()).toBe(true)
            const walsBefore = wals(dir)

            yield* Effect.scoped(
              Effect.flatMap(openWorld(dir, { inflightTimeoutMs: 100, pollMs: 20 }), (w) =>
                run(w, Effect.flatMap(Erase.Erase, (e) => Effect.andThen(e.start("globex", "ops"), e.awaitDone("globex"))))
              )
            )
            // The bound: one restart after the erase is done (RocksDB flushes the memtables and drops the old WAL at open) and the compactions it starts.
            yield* restart(dir, () => holders(dir, erased).length === 0)

            expect(holders(dir, erased)).toEqual([])
            expect(wals(dir).filter((n) => walsBefore.includes(n))).toEqual([])
            const still = holders(dir, kept)
            expect(still.some((f) => f.endsWith(".sst")), still.join()).toBe(true)
            expect(still.some((f) => f.endsWith(".seg")), still.join()).toBe(true)
          }),
        (dir) => Effect.sync(() => rmDir(dir))
      ),
    60_000
  )
})
