/**
 * Issue 6 `bench/delivery-bench`: HOOKS queued hooks (one sink each, 1 KiB
 * bodies, 100 tenants, all due) drained by the real pipeline
 * (src/delivery/pipeline.ts on the RocksDB store, its own HTTP/1.1 sink client) to
 * a local sink in its own process answering 204 (bench/lib/target-server.ts).
 * WARMUP more rows are queued and delivered first, on the same pipeline (its
 * code compiled, as the bare loop's warm-up calls do for the bare loop); the
 * measured window runs from their end to the last outcome committed, and the
 * whole drain from its first tick is printed beside it.
 * Prints deliveries/s (the measured window), the sink's
 * observed maximum concurrency, the TCP connections the sink accepted (a
 * client that reuses its keep-alive connections opens about as many as its
 * concurrency), and the pipeline settings of each run.
 *
 * In the same run, before and after each drain, a bare client loop
 * (bench/lib/bare-client.ts: node:http, keep-alive, the same concurrency,
 * the same 1 KiB bodies, HOOKS calls after a short warm-up) against a second
 * sink of the same program gives the calls/s one Node process manages as a
 * client of that sink on this machine; the drain's deliveries/s is printed
 * as a ratio to the mean of the two (the load of a shared machine moves
 * between them, so neither one alone is the base), and the CPU of this
 * process a delivery beside the two loops' mean CPU a call, all threads and
 * the main thread's alone (the event loop, which bounds a drain), with the
 * drain's CPU split by thread.
 *
 * Two runs on fresh stores: the shipped defaults (`pipeline.*` defaults, sink
 * concurrency 16), which decide PASS, and a tuned run (shorter tick, more
 * inflight, more sink concurrency) printed for comparison: the gap between
 * the two is what the defaults cost. PASS (issue 29, ratios to the mean of
 * the two bare loops in the same run) needs every row delivered, none dead,
 * deliveries/s >= MIN_RATIO x the bare calls/s, and the CPU a delivery (all
 * threads) <= MAX_CPU_RATIO x the bare CPU a call. Printed beside them, for the defaults: the
 * parts of a delivery measured alone (bench/lib/delivery-floor.ts) and the pipeline's own work.
 * Run under tsx, it runs itself as the build bundles it (bench/lib/as-built.ts), so the drain is
 * not charged tsx's `keepNames`.
 * `--profile DIR`: a V8 CPU profile of the main thread over each measured window
 * (node:inspector), written to DIR as `<run>.cpuprofile`.
 * `--store postgres`: the defaults' drain on RocksDB and on PostgreSQL, against a floor of the bare
 * call plus a plain PostgreSQL writer (bench/lib/delivery-postgres.ts; summary `delivery-bench-postgres`).
 * Run: npx tsx bench/delivery-bench.ts [--quick] [--hooks N] [--warmup N] [--trace] [--profile DIR] [--store postgres]
 */
import { Duration, Effect, Layer } from "effect"
import { mkdirSync, writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"
import { dirname, join } from "node:path"
import { defaultSchedule } from "../src/domain/retry-schedule.js"
import * as Pipeline from "../src/delivery/pipeline.js"
import { Queue } from "../src/queue/queue.js"
import * as QueueLayer from "../src/queue/queue.js"
import * as Wake from "../src/queue/wake.js"
import { DEFAULT_SINK_CONCURRENCY } from "../src/delivery/sink-client.js"
import { openPostgresStore } from "../src/store/postgres.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import { Store } from "../src/store/store.js"
import { memoryOf, namedThreadsCpuMs, tempDir } from "./lib/proc.js"
import { builder, dueHooks } from "./lib/queued-store.js"
import { arg, finish, fmt, int, log, machine, main, mib, quick, table } from "./lib/report.js"
import { bareClientLoop, type BareResult, mainThreadCpuUs } from "./lib/bare-client.js"
import { reexecAsBuilt } from "./lib/as-built.js"
import { ownClientLoop, storeAlone } from "./lib/delivery-floor.js"
import { deliveryOnPostgres } from "./lib/delivery-postgres.js"
import { onPostgres, pgCpuMs } from "./lib/pg-cpu.js"
import { startTarget, type Target } from "./lib/target-server.js"

const HOOKS = arg("hooks", quick ? 10_000 : 50_000)
/** Rows delivered before the measured window opens (`--warmup`), on the same pipeline: its code compiled, as the bare loop's warm-up does for it. */
const WARMUP = arg("warmup", quick ? 5_000 : 25_000)
/** `--trace`: log the aggregate counters and RSS every second of a drain. */
const TRACE = process.argv.includes("--trace")
const PROFILE_DIR = process.argv.includes("--profile") ? process.argv[process.argv.indexOf("--profile") + 1] : undefined
const TENANTS = 100
const BODY_BYTES = 1_024
export const MIN_RATIO = 0.6
export const MAX_CPU_RATIO = 1.5
/** Bare calls before the measured bare loop (JIT and connections warm). */
const BARE_WARMUP_CALLS = 2_000
/** A run that has not drained after this long stops there: its rate is what it delivered so far. */
const DRAIN_TIMEOUT_MS = 2 * 60_000
/** TEN-1's transitions alone claim like the defaults' drain: about 4 tenants of about 50 rows a tick, about 90 outcomes a commit. */
const ALONE_VISITS = 4
const ALONE_PER_VISIT = 50
const ALONE_SETTLE_BATCH = 90
/** How often the aggregate counters are read to see the drain's end. */
const POLL_MS = 20

export interface Settings {
  readonly name: string
  readonly tickMs: number
  readonly maxInflight: number
  readonly concurrency: number
}

export const RUNS: ReadonlyArray<Settings> = [
  { name: "defaults", tickMs: Pipeline.Defaults.tickMs, maxInflight: Pipeline.Defaults.maxInflight, concurrency: DEFAULT_SINK_CONCURRENCY },
  { name: "tuned", tickMs: 10, maxInflight: 1_024, concurrency: 128 }
]

/** A drain; with `pg`, on PostgreSQL at `pg.url`, whose processes' CPU is counted too. */
export const run = (s: Settings, sink: Target, pg?: { readonly url: string; readonly postmaster: number }) =>
  Effect.scoped(
    Effect.gen(function* () {
      const dir = tempDir("delivery")
      yield* Effect.addFinalizer(() => Effect.sync(dir.remove))
      const store = pg === undefined ? yield* makeRocksDbStore(dir.path) : yield* openPostgresStore({ url: pg.url })
      const b = yield* builder(store, { sinks: ["sink"], bodyBytes: BODY_BYTES })
      const ords = Array.from({ length: TENANTS }, (_, i) => i + 1)
      yield* b.add(dueHooks(ords, WARMUP + HOOKS, Date.now() - 1_000, 60_000))
      const before = yield* Effect.promise(() => sink.stats())
      const base = Layer.succeed(Store, store)
      const queueLayer = QueueLayer.layer.pipe(Layer.provide(base))
      const queue = yield* Effect.provide(Queue, queueLayer)
      log(`delivery-bench ${s.name}: ${int(WARMUP + HOOKS)} hooks queued (${int(WARMUP)} to warm up); draining`)
      const snapshot = () => snapshotOf(pg?.postmaster)
      const whole = snapshot()
      // The measured window opens once the warm-up's rows are delivered: the pipeline that drains
      // the measured rows is the one the warm-up ran, its code compiled, as the bare loop's is.
      let warm: { readonly at: Snapshot; readonly left: number; readonly dead: number } | undefined
      let profiler: ((file: string) => Promise<void>) | undefined
      const drained = yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Layer.build(
            Pipeline.layer({
              tickMs: s.tickMs,
              maxInflight: s.maxInflight,
              sinks: [{ name: "sink", url: `${sink.url}/sink`, timeoutMs: 10_000, headers: {}, concurrency: s.concurrency, retry: defaultSchedule }]
            }).pipe(Layer.provide(Layer.mergeAll(base, Layer.succeed(Queue, queue), Wake.layer)))
          )
          let lastLog = performance.now()
          for (;;) {
            const c = yield* queue.aggregate
            const left = c.pending + c.scheduled + c.inflight
            if (warm === undefined && WARMUP + HOOKS - left - c.dead >= WARMUP) {
              if (PROFILE_DIR !== undefined) profiler = yield* Effect.promise(() => startProfile())
              warm = { at: snapshot(), left, dead: c.dead }
              log(`delivery-bench ${s.name}: warm-up delivered; measuring the other ${int(left)} rows`)
            }
            if (TRACE && performance.now() - lastLog > 1000) {
              lastLog = performance.now()
              log(`${JSON.stringify(c)} rss ${mib(process.memoryUsage.rss())}`)
            }
            if (left === 0) return { ok: true, counters: c }
            if (performance.now() - whole.at > DRAIN_TIMEOUT_MS) return { ok: false, counters: c }
            yield* Effect.sleep(Duration.millis(POLL_MS))
          }
        })
      )
      const end = snapshot()
      if (profiler !== undefined) yield* Effect.promise(() => profiler!(join(PROFILE_DIR!, `${s.name}.cpuprofile`)))
      const after = yield* Effect.promise(() => sink.stats())
      const left = drained.counters.pending + drained.counters.scheduled + drained.counters.inflight
      const from = warm ?? { at: end, left, dead: drained.counters.dead }
      const measured = windowOf(from.at, end, from.left - left - (drained.counters.dead - from.dead))
      return {
        settings: s,
        ...measured,
        // The whole drain from its first tick, warm-up included (printed, not gated).
        cold: windowOf(whole, end, WARMUP + HOOKS - left - drained.counters.dead),
        drained: drained.ok,
        dead: drained.counters.dead,
        left,
        sinkRequests: after.requests - before.requests,
        sinkMaxConcurrent: after.maxConcurrent,
        sinkConnections: after.connections - before.connections,
        sinkMaxOpen: after.maxOpen
      }
    })
  )

/** Start the V8 profiler of this thread; the returned function stops it and writes the profile. */
const startProfile = async () => {
  const session = new Session()
  session.connect()
  await session.post("Profiler.enable")
  await session.post("Profiler.setSamplingInterval", { interval: 200 })
  await session.post("Profiler.start")
  return async (file: string) => {
    const { profile } = await session.post("Profiler.stop")
    mkdirSync(dirname(file), { recursive: true })
    writeFileSync(file, JSON.stringify(profile))
    session.disconnect()
    log(`profile written: ${file}`)
  }
}

type Threads = ReturnType<typeof namedThreadsCpuMs>

interface Snapshot {
  readonly at: number
  readonly cpu: NodeJS.CpuUsage
  readonly main: number | undefined
  readonly threads: Threads
  /** CPU ms of every PostgreSQL process so far (`--store postgres`). */
  readonly pg?: number
}

const snapshotOf = (postmaster?: number): Snapshot => ({
  at: performance.now(),
  cpu: process.cpuUsage(),
  main: mainThreadCpuUs(),
  threads: namedThreadsCpuMs(),
  ...(postmaster === undefined ? {} : { pg: pgCpuMs(postmaster) })
})

/** Deliveries/s and CPU a delivery (all threads, the main thread, by thread) between two snapshots. */
const windowOf = (from: Snapshot, to: Snapshot, deliveries: number) => {
  const n = Math.max(1, deliveries)
  const seconds = (to.at - from.at) / 1000
  return {
    seconds,
    deliveries,
    rate: deliveries / seconds,
    // This process's CPU (all threads: the event loop, the commit worker, RocksDB's) a delivery.
    cpuUsPerDelivery: (to.cpu.user + to.cpu.system - from.cpu.user - from.cpu.system) / n,
    // The main thread's alone (the event loop: the tick, the sink calls, the committer's posts).
    mainCpuUsPerDelivery: from.main === undefined || to.main === undefined ? undefined : (to.main - from.main) / n,
    // µs a delivery by thread: main, the commit worker, RocksDB's, the rest.
    threads: perDelivery(threadSplit(from.threads, to.threads), n),
    // The PostgreSQL processes' CPU a delivery (0 on RocksDB).
    pgCpuUsPerDelivery: from.pg === undefined || to.pg === undefined ? 0 : ((to.pg - from.pg) * 1000) / n
  }
}

/** CPU ms between two readings: the main thread, worker threads (the commit worker), RocksDB's (`rocksdb:*`), the rest (V8's helpers, libuv). */
const threadSplit = (before: Threads, after: Threads) => {
  const split = { main: 0, worker: 0, rocksdb: 0, other: 0 }
  for (const [tid, t] of after) {
    const d = t.ms - (before.get(tid)?.ms ?? 0)
    if (tid === String(process.pid)) split.main += d
    else if (t.name.startsWith("rocksdb")) split.rocksdb += d
    else if (t.name === "WorkerThread") split.worker += d
    else split.other += d
  }
  return split
}

const perDelivery = (ms: ReturnType<typeof threadSplit>, n: number) => {
  const us = (x: number) => (x * 1000) / Math.max(1, n)
  return { main: us(ms.main), worker: us(ms.worker), rocksdb: us(ms.rocksdb), other: us(ms.other) }
}

/** The bare client loop against a sink: warm-up, then HOOKS calls at the run's concurrency. */
export const bareRun = async (s: Settings, sink: Target): Promise<BareResult> => {
  const url = `${sink.url}/sink`
  const body = Buffer.alloc(BODY_BYTES, 0x61)
  await bareClientLoop(url, body, BARE_WARMUP_CALLS, s.concurrency)
  log(`delivery-bench ${s.name}: bare client loop, ${int(HOOKS)} calls at concurrency ${s.concurrency}`)
  return bareClientLoop(url, body, HOOKS, s.concurrency)
}

/** The sinks' client alone and TEN-1's transitions alone (bench/lib/delivery-floor.ts), at the defaults' shapes. */
const partsAlone = async (s: Settings, sink: Target) => {
  log(`delivery-bench ${s.name}: the sinks' client alone, then TEN-1's transitions alone (no calls)`)
  const client = await ownClientLoop(`${sink.url}/sink`, Buffer.alloc(BODY_BYTES, 0x61), HOOKS, BARE_WARMUP_CALLS, s.concurrency)
  const store = await Effect.runPromise(
    storeAlone({ tenants: TENANTS, bodyBytes: BODY_BYTES, warmup: WARMUP, rows: HOOKS, visits: ALONE_VISITS, perVisit: ALONE_PER_VISIT, settleBatch: ALONE_SETTLE_BATCH })
  )
  return { client, store }
}

/** The mean of the bare loops before and after a drain: the base of both rules. */
export const meanOf = (a: BareResult, b: BareResult) => ({
  rate: (a.rate + b.rate) / 2,
  cpuUsPerCall: (a.cpuUsPerCall + b.cpuUsPerCall) / 2,
  mainCpuUsPerCall: a.mainCpuUsPerCall === undefined || b.mainCpuUsPerCall === undefined ? undefined : (a.mainCpuUsPerCall + b.mainCpuUsPerCall) / 2,
  failed: a.failed + b.failed
})

// The pipeline runs here as the build makes it, not as tsx transforms it (bench/lib/as-built.ts).
if (!(await reexecAsBuilt(import.meta.url))) if (onPostgres) main("delivery-bench-postgres", () => deliveryOnPostgres({ run, bareRun, meanOf, defaults: RUNS[0]!, shape: { tenants: TENANTS, bodyBytes: BODY_BYTES, warmup: WARMUP, rows: HOOKS, visits: ALONE_VISITS, perVisit: ALONE_PER_VISIT, settleBatch: ALONE_SETTLE_BATCH } }))
else main("delivery-bench", async () => {
  console.log(`delivery-bench: ${int(HOOKS)} hooks, 1 sink each, ${BODY_BYTES} B bodies, ${TENANTS} tenants; ${machine()}${quick ? "; --quick" : ""}`)
  const results = []
  for (const s of RUNS) {
    // A fresh sink per run, so its stats (max concurrency, connections) are this run's drain's
    // alone, and a second one of the same program for the bare loops.
    const sink = await startTarget({ status: 204 })
    const bareSink = await startTarget({ status: 204 })
    try {
      // The bare loop before and after the drain: the machine is shared and its load moves, so the
      // mean of the two is the base the rules and the printed ratios use.
      const before = await bareRun(s, bareSink)
      const r = await Effect.runPromise(run(s, sink))
      const after = await bareRun(s, bareSink)
      // The parts alone, for the defaults: the sinks' own client, then TEN-1's transitions without calls.
      const parts = s.name === "defaults" ? await partsAlone(s, bareSink) : undefined
      results.push({ ...r, bare: meanOf(before, after), bares: [before, after] as const, parts })
    } finally {
      await sink.close()
      await bareSink.close()
    }
  }
  table(
    ["run", "tickMs", "maxInflight", "sink concurrency", "deliveries/s", "bare calls/s (before, after)", "ratio", "CPU µs a delivery (bare a call: before, after)", "main thread µs (bare)", "threads µs: main, commit worker, RocksDB, other", "seconds", "whole drain with warm-up: /s, CPU µs", "sink requests", "sink max concurrent", "sink connections (max open)", "dead", "left"],
    results.map((r) => [
      r.settings.name,
      int(r.settings.tickMs),
      int(r.settings.maxInflight),
      int(r.settings.concurrency),
      int(r.rate),
      `${int(r.bares[0].rate)}, ${int(r.bares[1].rate)}${r.bare.failed > 0 ? ` (${int(r.bare.failed)} failed)` : ""}`,
      fmt(r.rate / r.bare.rate, 2),
      `${fmt(r.cpuUsPerDelivery, 0)} (${fmt(r.bares[0].cpuUsPerCall, 0)}, ${fmt(r.bares[1].cpuUsPerCall, 0)})`,
      r.mainCpuUsPerDelivery === undefined || r.bare.mainCpuUsPerCall === undefined ? "-" : `${fmt(r.mainCpuUsPerDelivery, 0)} (${fmt(r.bare.mainCpuUsPerCall, 0)})`,
      [r.threads.main, r.threads.worker, r.threads.rocksdb, r.threads.other].map((x) => fmt(x, 1)).join(", "),
      fmt(r.seconds, 1),
      `${int(r.cold.rate)}, ${fmt(r.cold.cpuUsPerDelivery, 0)}`,
      int(r.sinkRequests),
      int(r.sinkMaxConcurrent),
      `${int(r.sinkConnections)} (${int(r.sinkMaxOpen)})`,
      int(r.dead),
      int(r.left)
    ])
  )
  console.log(
    `ratio: deliveries/s over the mean of the two bare loops; CPU: this process's, all threads (bare: the mean of the two loops); main thread: the event loop's alone (/proc). bench process peak RSS ${mib(memoryOf("self").peak)}`
  )
  const d = results[0]!
  const t = results[1]!
  const parts = d.parts!
  const floor = parts.client.cpuUs + parts.store.cpuUs
  console.log(
    `parts alone (defaults): the sinks' client ${fmt(parts.client.cpuUs, 1)} µs a call (main thread ${fmt(parts.client.mainUs ?? NaN, 1)}), ` +
      `TEN-1's transitions ${fmt(parts.store.cpuUs, 1)} µs a delivery (main thread ${fmt(parts.store.mainUs ?? NaN, 1)}): ${fmt(floor, 1)} µs, ` +
      `${fmt(floor / d.bare.cpuUsPerCall, 2)} x the bare call; the drain ${fmt(d.cpuUsPerDelivery, 1)} µs is ${fmt(d.cpuUsPerDelivery / floor, 2)} x their sum, ` +
      `the pipeline's own work ${fmt(d.cpuUsPerDelivery - floor, 1)} µs a delivery`
  )
  const clean = d.drained && d.dead === 0 && d.left === 0 && d.bare.failed === 0
  const ratio = d.rate / d.bare.rate
  const cpuRatio = d.cpuUsPerDelivery / Math.max(1e-9, d.bare.cpuUsPerCall)
  console.log(
    `rules (ratios to the mean bare loop in this run): deliveries/s ${fmt(ratio, 2)} x its calls/s (at least ${MIN_RATIO}), ` +
      `CPU a delivery ${fmt(cpuRatio, 2)} x its CPU a call (at most ${MAX_CPU_RATIO})`
  )
  finish(
    "delivery-bench",
    clean && ratio >= MIN_RATIO && cpuRatio <= MAX_CPU_RATIO,
    `${int(d.rate)} deliveries/s with the defaults, ratio ${fmt(ratio, 2)} to the mean bare loop's ${int(d.bare.rate)} calls/s (rule >= ${MIN_RATIO}), ` +
      `CPU ${fmt(d.cpuUsPerDelivery, 0)} µs a delivery, ${fmt(cpuRatio, 2)} x bare ${fmt(d.bare.cpuUsPerCall, 0)} a call (rule <= ${MAX_CPU_RATIO})` +
      `${d.mainCpuUsPerDelivery === undefined || d.bare.mainCpuUsPerCall === undefined ? "" : `, main thread ${fmt(d.mainCpuUsPerDelivery, 0)} (bare ${fmt(d.bare.mainCpuUsPerCall, 0)})`}, ` +
      `sink max concurrency ${d.sinkMaxConcurrent}; parts alone ${fmt(floor, 0)} µs (client ${fmt(parts.client.cpuUs, 0)}, transitions ${fmt(parts.store.cpuUs, 0)}), pipeline's own ${fmt(d.cpuUsPerDelivery - floor, 0)}; ` +
      `tuned (tickMs ${t.settings.tickMs}, maxInflight ${t.settings.maxInflight}, concurrency ${t.settings.concurrency}) ${int(t.rate)}/s, ` +
      `bare ${int(t.bare.rate)} calls/s, ratio ${fmt(t.rate / t.bare.rate, 2)}, ` +
      `sink max concurrency ${t.sinkMaxConcurrent}${clean ? "" : `; NOT drained cleanly (dead ${d.dead}, left ${d.left}, bare failures ${d.bare.failed})`}`
  )
})
