/**
 * Where should RocksDB commits run? For each `commitThread` ("main", "worker"):
 * 1. latency: sequential synced commits of a batch shaped like 256 ingested
 *    hooks (~2,300 ops), p50/p99 of the `store.write` effect, and how long
 *    the event loop was busy per commit (eventLoopUtilization, wall time)
 *    and the main thread's CPU time per commit (Linux /proc; unlike wall
 *    times it does not stretch on a loaded machine);
 * 2. the main event loop's delay (perf_hooks.monitorEventLoopDelay) while two
 *    writers commit such batches back to back, plus commits per second.
 * Run: npx tsx bench/store-commit.ts [--rounds N] [--seconds S]
 * Results and the decision: docs/architecture.md, "Where commits run".
 */
import { Effect, Fiber } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { monitorEventLoopDelay, performance } from "node:perf_hooks"
import * as Keys from "../src/domain/keys.js"
import { type Batch, merge, type Op, put } from "../src/domain/ops.js"
import type { CommitThread } from "../src/store/rocksdb-commit.js"
import { encodeBatch } from "../src/store/rocksdb-wire.mjs"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import type { StoreShape } from "../src/store/store.js"
import { mainThreadCpuMs } from "./lib/proc.js"
import { arg } from "./lib/report.js"

const ROUNDS = arg("rounds", 200)
const SECONDS = arg("seconds", 5)
const HOOKS = 256
const SINKS = 2
const TENANTS = 8

let seq = 1
/** One Writer commit of 256 hooks: hook row, per sink a delivery row, due row and marker, archive, dedupe, expiry; counters. */
const hookBatch = (): Batch => {
  const ops: Array<Op> = []
  const at = Date.now()
  const envelope = Buffer.alloc(600, 0x61)
  for (let h = 0; h < HOOKS; h++, seq++) {
    const ord = 1 + (h % TENANTS)
    ops.push(put("hooks", Keys.hookKey(seq), envelope))
    for (let sink = 0; sink < SINKS; sink++) {
      ops.push(put("deliveries", Keys.deliveryKey(seq, sink), Buffer.alloc(80, 0x62)))
      ops.push(put("index", Keys.dueKey(ord, at, seq, sink), Keys.dueValue(700, 0)))
    }
    ops.push(put("index", Keys.activeKey(Keys.bucketOf(at), ord)))
    ops.push(put("index", Keys.archiveKey(seq), Keys.archiveValue(700, ord)))
    ops.push(put("index", Keys.dedupeKey(`tenant-${ord}`, `key-${seq}`), Buffer.alloc(40)))
    ops.push(put("index", Keys.expiryKey(at + 86_400_000, `tenant-${ord}`, `key-${seq}`)))
  }
  for (const ord of [0, ...Array.from({ length: TENANTS }, (_, i) => i + 1)]) {
    for (const field of [1, 5, 6]) ops.push(merge("counters", Keys.counterKey(ord, field), 32n))
  }
  ops.push(put("default", Keys.Meta.nextSeq, Keys.encodeU64(seq)))
  return ops
}

const pct = (xs: Array<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}
const ms = (n: number) => n.toFixed(2)

const batches = Array.from({ length: 16 }, hookBatch)

const latency = (store: StoreShape) =>
  Effect.gen(function* () {
    const times: Array<number> = []
    const elu = performance.eventLoopUtilization()
    const cpu0 = mainThreadCpuMs()
    for (let i = 0; i < ROUNDS; i++) {
      const t0 = performance.now()
      yield* store.write(batches[i % batches.length]!, { sync: true })
      times.push(performance.now() - t0)
    }
    const busyMs = performance.eventLoopUtilization(elu).active / ROUNDS
    const cpuMs = (mainThreadCpuMs() - cpu0) / ROUNDS
    return { times, busyMs, cpuMs }
  })

/** Two writers back to back for SECONDS; the loop delay is sampled every 1 ms by Node. */
const loopDelay = (store: StoreShape) =>
  Effect.gen(function* () {
    let commits = 0
    const until = Date.now() + SECONDS * 1000
    const writer = Effect.gen(function* () {
      while (Date.now() < until) {
        yield* store.write(batches[commits % batches.length]!, { sync: true })
        commits++
        // Back to the event loop between commits, as a server fiber does while it awaits I/O
        // (Effect.yieldNow alone may stay in the microtask queue and starve the loop's timers).
        yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
      }
    })
    const h = monitorEventLoopDelay({ resolution: 1 })
    h.enable()
    const fibers = yield* Effect.all([Effect.forkChild(writer), Effect.forkChild(writer)])
    yield* Fiber.joinAll(fibers)
    h.disable()
    return { p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6, max: h.max / 1e6, perSecond: commits / SECONDS }
  })

const run = (thread: CommitThread) =>
  Effect.scoped(
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "ankusa-bench-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const store = yield* makeRocksDbStore(dir, { commitThread: thread })
      yield* latency(store).pipe(Effect.asVoid) // warm-up: WAL, memtables, JIT
      const { busyMs, cpuMs, times } = yield* latency(store)
      const loop = yield* loopDelay(store)
      return { busyMs, cpuMs, loop, thread, times }
    })
  )

const program = Effect.gen(function* () {
  const sample = batches[0]!
  for (let i = 0; i < 20; i++) encodeBatch(sample, () => 0)
  const encodeStart = performance.now()
  const encodeCpu = mainThreadCpuMs()
  for (let i = 0; i < 200; i++) encodeBatch(sample, () => 0)
  const encodeMs = (performance.now() - encodeStart) / 200
  const encodeCpuMs = (mainThreadCpuMs() - encodeCpu) / 200
  console.log(
    `batch: ${sample.length} ops (${HOOKS} hooks x ${SINKS} sinks, ${TENANTS} tenants); ` +
      `encode to one buffer ${ms(encodeMs)} ms wall, ${ms(encodeCpuMs)} ms CPU`
  )
  console.log(`rounds ${ROUNDS}, loop-delay window ${SECONDS} s, node ${process.version}, load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}`)
  for (const thread of ["main", "worker"] as const) {
    const { busyMs, cpuMs, loop, times } = yield* run(thread)
    console.log(
      `${thread.padEnd(6)} synced write p50 ${ms(pct(times, 50))} ms  p99 ${ms(pct(times, 99))} ms  loop busy ${ms(busyMs)} ms/commit, main-thread CPU ${ms(cpuMs)} ms/commit | ` +
        `2 writers: ${loop.perSecond.toFixed(0)} commits/s, event-loop delay p50 ${ms(loop.p50)} ms  p99 ${ms(loop.p99)} ms  max ${ms(loop.max)} ms`
    )
  }
})

Effect.runPromise(program).catch((e) => {
  console.error(e)
  process.exit(1)
})
