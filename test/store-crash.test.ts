/**
 * Crash safety of the RocksDB store in a real process: a child commits synced
 * batches of puts and merges (test/support/store-crash-child.ts) and is
 * SIGKILLed at a random moment; after each kill the store reopens with every
 * batch whole or absent, every acknowledged batch present, and counters equal
 * to the merges of the batches that survived. While the child runs, an open
 * from this process fails with StoreLocked.
 */
import { expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Stream } from "effect"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { Families, familyDataRange } from "../src/domain/keys.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import { counters, PUTS } from "./support/store-crash-child.js"

const CHILD = join(import.meta.dirname, "support", "store-crash-child.ts")

/**
 * Run the child until it has acknowledged at least `minCommits`, run `meanwhile`, then SIGKILL it
 * after `delayMs`. Returns the last batch the child acknowledged.
 */
const runAndKill = (dir: string, thread: "main" | "worker", minCommits: number, delayMs: number, meanwhile: Effect.Effect<void>) =>
  Effect.gen(function* () {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, dir, thread], { stdio: ["ignore", "pipe", "pipe"] })
    yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
    const reached = yield* Deferred.make<void>()
    const exited = yield* Deferred.make<NodeJS.Signals | null>()
    let first: number | undefined
    let last = 0
    let stderr = ""
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    createInterface({ input: child.stdout }).on("line", (line) => {
      last = Number(line.replace("committed ", ""))
      first ??= last
      if (last - first + 1 >= minCommits) Deferred.doneUnsafe(reached, Exit.void)
    })
    child.on("exit", (_code, signal) => Deferred.doneUnsafe(exited, Exit.succeed(signal)))
    yield* Effect.raceFirst(
      Deferred.await(reached),
      Deferred.await(exited).pipe(Effect.flatMap(() => Effect.die(new Error(`child exited before ${minCommits} commits: ${stderr}`))))
    )
    yield* meanwhile
    yield* Effect.sleep(delayMs)
    child.kill("SIGKILL")
    expect(yield* Deferred.await(exited)).toBe("SIGKILL")
    return last
  }).pipe(Effect.scoped)

/** Every batch's rows, by batch number, and the counters, read from a reopened store. */
const inspect = (dir: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* makeRocksDbStore(dir, { commitThread: "main" })
      const perBatch = new Map<number, number>()
      const hooks = yield* Stream.runCollect(store.stream("hooks", familyDataRange(Families.hooks)))
      for (const { key } of hooks) {
        const n = Number(Buffer.from(key).readBigUInt64BE(0))
        perBatch.set(n, (perBatch.get(n) ?? 0) + 1)
      }
      const deliveries = yield* store.scan("deliveries", familyDataRange(Families.deliveries), { limit: 1_000_000 })
      const index = yield* store.scan("index", { lo: Buffer.from("Z"), hi: Buffer.from("[") }, { limit: 1_000_000 })
      const totals = yield* store.getCounters("counters", counters)
      return { perBatch, deliveries: deliveries.length, index: index.length, totals }
    })
  )

it.live(
  "every synced batch survives SIGKILL whole or not at all, and counters equal the surviving batches' merges",
  () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "ankusa-crash-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      let acknowledged = 0
      // Two kills on one store, one per commit path; the second also proves a store recovered once recovers again.
      for (const [round, thread] of (["worker", "main"] as const).entries()) {
        const minCommits = 3 + Math.floor(Math.random() * 20)
        const delayMs = Math.floor(Math.random() * 40)
        // While the child holds the store, another process cannot open it: a typed StoreLocked, not a crash.
        const locked = Effect.scoped(makeRocksDbStore(dir)).pipe(
          Effect.flip,
          Effect.map((e) => expect(e._tag).toBe("StoreLocked")),
          Effect.orDie
        )
        acknowledged = yield* runAndKill(dir, thread, minCommits, delayMs, round === 0 ? locked : Effect.void)
        const { perBatch, deliveries, index, totals } = yield* inspect(dir)
        const n = perBatch.size
        const context = `round ${round} (${thread}), killed ${delayMs} ms after ${minCommits} commits`
        // Whole or nothing, and no gaps: batches 1..n each with every row.
        expect([...perBatch.keys()].sort((a, b) => a - b), context).toEqual(Array.from({ length: n }, (_, i) => i + 1))
        expect([...perBatch.values()].every((c) => c === PUTS), context).toBe(true)
        expect(deliveries, context).toBe(n)
        expect(index, context).toBe(n)
        // Synced: every acknowledged batch is there (at most the one in flight beyond it).
        expect(n, context).toBeGreaterThanOrEqual(acknowledged)
        expect(n, context).toBeLessThanOrEqual(acknowledged + 1)
        expect(totals, context).toEqual([BigInt(n), BigInt(n * PUTS), BigInt(-n)])
      }
    }).pipe(Effect.scoped),
  // Each child spends most of its life starting (tsx and effect); generous for a loaded machine.
  60_000
)
