/**
 * TEN-1 §7, §11: format 2 → 3 migration throughput. Builds a format 2 store
 * of `--rows` index rows (default 10⁶: due, retrying, inflight, dead and
 * archive rows of 1,000 tenants, plus hooks with no tenant, no envelope and
 * no hooks row) with unsynced batches, closes it, then opens it with this
 * build, waits until the store is settled (below), and runs the boot migration (`Migrate.runPending`: `STEP_ROWS` rows
 * per synced step). Prints rows/s and peak RSS. PASS: every row moved, the counters equal a fold,
 * and the migration's CPU a row (every thread) at most MAX_OVER_BUILD x the build's CPU a row
 * (generating, encoding and writing the same rows in unsynced batches, the same process). The
 * issue's target was 100,000 rows/s; this host's speed moves by 4.5 x between sessions, and the
 * gates that met it (132,325 and 159,668 rows/s) had 1.32 x of margin; the migration is 1.43 to
 * 1.45 x the build (two runs on 2026-12-07), so 1.9 x is that target with that margin.
 * The CPU time of the whole process during the migration (every thread:
 * the event loop, the commit worker, RocksDB's own) is printed too, since
 * the machine is shared and wall time stretches with its load, and split by
 * thread (Linux /proc): the event loop (reads, decoding, batch building and
 * encoding), the threads started with the store (the commit worker, RocksDB's
 * flushes and compactions) and the rest (V8's GC and compiler helpers).
 *
 * Settled: the binding has no flush or compactRange call, so the build's
 * memtables reach disk the way a restart puts them there: closed, and
 * reopened, which flushes the recovered WAL into L0 files; then the timer
 * waits until RocksDB has no flush and no compaction running for
 * SETTLE_QUIET_MS on end (`Store.health`'s DB-wide counts). Compactions are
 * scheduled as soon as a level is over its target, so a quiet second means
 * none is owed: the build's compaction debt is not charged to the migration.
 * Run: npx tsx bench/migration-bench.ts [--rows N] [--step ROWS] [--main] [--quick]
 */
import { Effect } from "effect"
import * as TenantKeys from "../src/domain/migrations/tenant-keys.js"
import * as Fixture from "../src/queue/format/fixture.js"
import { checkStore, formatReport } from "../src/queue/format/check.js"
import * as Migrate from "../src/queue/format/migrate.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import type { StoreShape } from "../src/store/store.js"
import { memoryOf, namedThreadsCpuMs, tempDir } from "./lib/proc.js"
import { arg, finish, fmt, int, log, machine, mib, quick, table } from "./lib/report.js"

const ROWS = arg("rows", quick ? 100_000 : 1_000_000)
const TENANTS = 1_000
/** Old rows per migration step (`--step`; default the migration's own `STEP_ROWS`). */
/** The migration's CPU a row at most this many times the build's (writing the same rows), in the same run. */
export const MAX_OVER_BUILD = 1.9
const STEP = arg("step", TenantKeys.STEP_ROWS)
/** Hooks generated and written per unsynced batch while building the store. */
const BUILD_HOOKS_PER_BATCH = 2_000
/** `--main`: commit on the event loop instead of the commit worker (the boot default). */
const COMMIT_THREAD = process.argv.includes("--main") ? "main" : "worker"
/** RSS sampling period during the migration. */
const SAMPLE_MS = 50
/** The store is settled once no flush and no compaction has run for this long (polled every SETTLE_POLL_MS). */
const SETTLE_QUIET_MS = 1_000
const SETTLE_POLL_MS = 50
/** A store not settled after this long fails the bench. */
const SETTLE_MAX_MS = 180_000

type Threads = ReturnType<typeof namedThreadsCpuMs>

/**
 * CPU ms spent between two readings: the main thread, the store's threads (RocksDB's by their
 * `rocksdb:*` names, whenever they were born: its thread pool is the process's, started by the
 * build's store; the commit worker, born after `before`), the rest (V8's helpers).
 */
const cpuSplit = (before: Threads, at: Threads, after: Threads) => {
  const split = { main: 0, store: 0, worker: 0, rocksdb: 0, other: 0 }
  for (const [tid, t] of after) {
    const d = t.ms - (at.get(tid)?.ms ?? 0)
    if (tid === String(process.pid)) split.main += d
    else if (t.name.startsWith("rocksdb")) split.rocksdb += d
    else if (!before.has(tid)) split.worker += d
    else split.other += d
  }
  split.store = split.worker + split.rocksdb
  return split
}

/** Index rows one format 2 fixture hook writes (its due/inflight/dead rows and archive obligation). */
const rowsOf = (h: Fixture.FixtureHook) => h.sinks.filter((s) => s.state !== "delivered").length + (h.archive ? 1 : 0)

/** Wait until RocksDB runs no flush or compaction for SETTLE_QUIET_MS on end; the ms waited. */
const settle = (store: StoreShape) =>
  Effect.gen(function* () {
    const t0 = performance.now()
    let quietSince = performance.now()
    for (;;) {
      const h = yield* store.health
      const now = performance.now()
      if (h.runningCompactions > 0 || h.runningFlushes > 0) quietSince = now
      else if (now - quietSince >= SETTLE_QUIET_MS) return now - t0 - SETTLE_QUIET_MS
      if (now - t0 > SETTLE_MAX_MS) return yield* Effect.die(new Error(`store not settled after ${SETTLE_MAX_MS} ms`))
      yield* Effect.sleep(SETTLE_POLL_MS)
    }
  })

const build = (dir: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* makeRocksDbStore(dir, { supportedFormat: 2 })
      let rows = 0
      let seq = 1
      while (rows < ROWS) {
        const hooks = Fixture.syntheticHooks({ hooks: BUILD_HOOKS_PER_BATCH, tenants: TENANTS, firstSeq: seq })
        const take: Array<Fixture.FixtureHook> = []
        for (const h of hooks) {
          if (rows >= ROWS) break
          take.push(h)
          rows += rowsOf(h)
        }
        seq += take.length
        yield* Fixture.writeV2(store, take, { hooksPerBatch: BUILD_HOOKS_PER_BATCH })
      }
      return { rows, hooks: seq - 1 }
    })
  )

const main = Effect.gen(function* () {
  const dir = tempDir("migration-bench")
  try {
    log(`building a format 2 store of ${int(ROWS)} rows (${machine()})`)
    const t0 = performance.now()
    const b0 = process.cpuUsage()
    const built = yield* build(dir.path)
    const b = process.cpuUsage(b0)
    // The baseline: writing the same rows (generated, encoded, unsynced batches), every thread.
    const buildUs = (b.user + b.system) / Math.max(1, built.rows)
    log(`built ${int(built.rows)} rows of ${int(built.hooks)} hooks in ${int(performance.now() - t0)} ms, ${fmt(buildUs, 2)} µs CPU a row`)

    let peak = memoryOf("self").rss
    const sampler = setInterval(() => (peak = Math.max(peak, memoryOf("self").rss)), SAMPLE_MS)
    const result = yield* Effect.scoped(
      Effect.gen(function* () {
        const beforeOpen = namedThreadsCpuMs()
        const store = yield* makeRocksDbStore(dir.path, { commitThread: COMMIT_THREAD })
        const settleCpu0 = process.cpuUsage()
        const settledMs = yield* settle(store)
        const settleCpu = process.cpuUsage(settleCpu0)
        const settleCpuMs = (settleCpu.user + settleCpu.system) / 1000
        log(`store settled: compactions ran ${int(settledMs)} ms after the open (${int(settleCpuMs)} ms CPU), then ${SETTLE_QUIET_MS} ms quiet`)
        const atStart = namedThreadsCpuMs()
        const start = performance.now()
        const cpu0 = process.cpuUsage()
        const report = yield* Migrate.runPending(store, {
          stepRows: STEP,
          onProgress: (p) => Effect.sync(() => log(`${int(p.rows)} rows, ${int(p.rowsPerSecond)} rows/s`))
        })
        const ms = performance.now() - start
        const cpu = process.cpuUsage(cpu0)
        const threads = cpuSplit(beforeOpen, atStart, namedThreadsCpuMs())
        clearInterval(sampler)
        const check = yield* checkStore(store)
        return { report, ms, cpuMs: (cpu.user + cpu.system) / 1000, threads, check, settledMs }
      })
    ).pipe(Effect.ensuring(Effect.sync(() => clearInterval(sampler))))

    const run = result.report.runs[0]
    const moved = run?.rows ?? 0
    const rate = (moved * 1000) / result.ms
    const perRow = (ms: number) => `${fmt((ms * 1000) / Math.max(1, moved), 1)} µs`
    const t = result.threads
    table(
      ["rows", "steps", "commits on", "wall ms", "CPU ms", "rows/s", "CPU/row: event loop", "store threads (commit worker, RocksDB)", "other threads", "peak RSS (migration)", "peak RSS (process)"],
      [[int(moved), int(run?.steps ?? 0), COMMIT_THREAD, int(result.ms), int(result.cpuMs), int(rate), perRow(t.main), `${perRow(t.store)} (${perRow(t.worker)}, ${perRow(t.rocksdb)})`, perRow(t.other), mib(peak), mib(memoryOf("self").peak)]]
    )
    if (!result.check.ok) console.log(formatReport(result.check))
    const rowUs = (result.cpuMs * 1000) / Math.max(1, moved)
    const overBuild = rowUs / buildUs
    const pass = result.report.format === 3 && moved === built.rows && result.check.ok && overBuild <= MAX_OVER_BUILD
    return {
      pass,
      detail: `${int(moved)} rows migrated 2 -> 3, ${fmt(rowUs, 2)} µs CPU a row, ${fmt(overBuild, 2)} x the build's ${fmt(buildUs, 2)} (rule <= ${MAX_OVER_BUILD}); ${int(rate)} rows/s (not gated; ${int(STEP)} rows/step); CPU a row: event loop ${perRow(t.main)}, store threads ${perRow(t.store)} (commit worker ${perRow(t.worker)}, RocksDB ${perRow(t.rocksdb)}), other ${perRow(t.other)}), peak RSS ${mib(peak)}, check ${result.check.ok ? "clean" : "FAILED"}, store settled ${int(result.settledMs)} ms after its open`
    }
  } finally {
    dir.remove()
  }
})

Effect.runPromise(main).then(
  (r) => finish("migration-bench", r.pass, r.detail),
  (e) => {
    console.error(e)
    process.exit(1)
  }
)
