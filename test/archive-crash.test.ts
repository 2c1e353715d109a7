/**
 * The archive across SIGKILL: a real child ingests and compacts on RocksDB
 * (test/support/archive-crash-child.ts) and is killed, at random moments and
 * right after a block is fsynced but before its settle commits. Each restart
 * runs the archive's repair; then no segment holds a byte the cursor does not
 * cover or a frame that fails its CRC, every hook is archived exactly once or
 * still owed, and in the end every acknowledged hook is in a segment.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { createInterface } from "node:readline"
import * as K from "../src/domain/keys.js"
import { scanFrames, SEGMENT_MAGIC } from "../src/domain/segment.js"
import * as Archive from "../src/lifecycle/archive.js"
import { listFiles, readSegment } from "../src/lifecycle/archive-files.js"
import { Store } from "../src/store/store.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import { aggregate, rmDir, rowsOf, tempDir } from "./lifecycle-helpers.js"
import { BLOCK_BYTES, SEGMENT_BYTES } from "./support/archive-crash-child.js"
import * as Queue from "../src/queue/queue.js"

const CHILD = join(import.meta.dirname, "support", "archive-crash-child.ts")

/** Run the child; kill it after `settles` compactor steps plus `delayMs`, or when it reports a paused append. Returns the last acknowledged seq. */
const runAndKill = (storeDir: string, archiveDir: string, mode: { readonly pause: boolean; readonly settles: number; readonly delayMs: number }) =>
  Effect.callback<{ readonly acked: number; readonly settled: number; readonly paused: boolean }, Error>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, storeDir, archiveDir], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, PAUSE: mode.pause ? "1" : "0" }
    })
    let acked = 0
    let settled = 0
    let settles = 0
    let paused = false
    let killing = false
    let stderr = ""
    const kill = (after: number) => {
      if (killing) return
      killing = true
      setTimeout(() => child.kill("SIGKILL"), after)
    }
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    createInterface({ input: child.stdout }).on("line", (line) => {
      const [what, n] = line.split(" ")
      if (what === "ingested") acked = Number(n)
      if (what === "settled") settled = Number(n)
      if (what === "settled" && ++settles >= mode.settles && !mode.pause) kill(mode.delayMs)
      if (what === "appended") {
        paused = true
        kill(0)
      }
    })
    child.on("exit", (code, signal) => {
      if (signal === "SIGKILL") resume(Effect.succeed({ acked, settled, paused }))
      else resume(Effect.fail(new Error(`child exited with ${code}: ${stderr}`)))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** Restart: open the store and the archive (which repairs), then check what is on disk against the store. */
const restartAndVerify = (storeDir: string, archiveDir: string, drain: boolean) =>
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* makeRocksDbStore(storeDir)
      const archive = yield* Archive.make({ dir: archiveDir, enabled: true, segmentBytes: SEGMENT_BYTES, blockBytes: BLOCK_BYTES }).pipe(
        Effect.provideService(Store, store),
        Effect.provideService(Queue.Queue, Queue.make(store))
      )
      const repair = archive.repair
      if (drain) yield* archive.drain
      const cursor = yield* archive.cursor
      const segs = (yield* listFiles(archiveDir)).filter((f) => f.kind === "seg")
      // No byte past the committed cursor, no frame that fails its CRC.
      for (const s of segs) {
        const bytes = fs.readFileSync(s.path)
        const scan = scanFrames(bytes, SEGMENT_MAGIC)
        expect(scan.stop._tag, `${s.name}: ${JSON.stringify(scan.stop)}`).toBe("end")
        expect(scan.goodEnd).toBe(bytes.length)
      }
      if (cursor !== undefined) {
        expect(segs[segs.length - 1]!.firstSeq).toBe(cursor.segment)
        expect(fs.statSync(segs[segs.length - 1]!.path).size).toBe(cursor.segmentEnd)
      }
      const archived: Array<number> = []
      for (const s of segs) for (const r of yield* readSegment(s.path)) archived.push(r.seq)
      const owed = (yield* rowsOf(store, K.Families.archive)).map((e) => K.decodeArchiveKey(e.key))
      const hooks = (yield* rowsOf(store, K.Families.hooks)).map((e) => K.decodeHookKey(e.key))
      // Exactly once, or still owed: never both, never neither.
      expect(new Set(archived).size).toBe(archived.length)
      expect([...archived, ...owed].sort((a, b) => a - b)).toEqual(hooks)
      expect((yield* aggregate(store)).archive_pending).toBe(owed.length)
      return { repair, archived, owed, hooks, cursor }
    })
  )

it.live(
  "a torn archive segment is repaired after SIGKILL",
  () =>
    Effect.gen(function* () {
      const storeDir = tempDir("archive-crash-store")
      const archiveDir = tempDir("archive-crash-segments")
      yield* Effect.addFinalizer(() => Effect.sync(() => (rmDir(storeDir), rmDir(archiveDir))))
      let acked = 0
      let tornRepaired = 0
      // Killed paused between a block's fsync and its settle, at random, and paused again.
      for (const pause of [true, false, true]) {
        const r = yield* runAndKill(storeDir, archiveDir, { pause, settles: 2 + Math.floor(Math.random() * 6), delayMs: Math.floor(Math.random() * 30) })
        acked = Math.max(acked, r.acked)
        const v = yield* restartAndVerify(storeDir, archiveDir, false)
        // Every acknowledged hook survived the kill, archived or owed.
        expect(v.hooks.length).toBeGreaterThanOrEqual(acked)
        // Every acknowledged settle survived it too.
        expect(v.cursor?.lastSeq ?? 0).toBeGreaterThanOrEqual(r.settled)
        if (r.paused) {
          // A block fsynced but never settled: its bytes past the cursor were cut at restart.
          expect(v.repair.repaired).toBeGreaterThan(0)
          tornRepaired++
        }
      }
      expect(tornRepaired).toBe(2)
      // In the end every acknowledged hook is in a segment, once.
      const end = yield* restartAndVerify(storeDir, archiveDir, true)
      expect(end.owed).toEqual([])
      expect(end.archived.length).toBeGreaterThanOrEqual(acked)
      expect(end.archived.slice(0, acked)).toEqual(Array.from({ length: acked }, (_, i) => i + 1))
    }),
  // Three child starts; each is a few seconds on a loaded two-core machine.
  240_000
)
