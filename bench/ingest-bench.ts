/**
 * Issue 6 `bench/ingest-bench`: ingest through the real server.
 *
 * 1. The store alone: a synced batch of 256 ingested hooks (1 KiB bodies,
 *    2 sinks, built by `Deliveries.ingest` + `Deliveries.batch` as the Writer
 *    builds it) committed on each commit path (`commitThread` "main" and
 *    "worker"): µs per hook, and the main thread's share (building the ops and
 *    encoding them into the one buffer the committer receives). Also 64-hook
 *    batches: 64 closed-loop connections never give the Writer more, and it
 *    commits one batch at a time, so 64 / (one 64-hook commit) bounds the
 *    server whatever the HTTP side does.
 * 2. `ankusa serve` in a child process (RocksDB, synced acks, default writer
 *    settings) under a closed-loop load generator on 127.0.0.1
 *    (bench/lib/load.ts): 64 keep-alive connections, 1 KiB bodies to a source
 *    whose tenant comes from a header, 1,000 tenants round-robin, a route to
 *    2 sinks, WARMUP s then SECONDS s measured. Dispatch is parked so the
 *    figure is ingest alone (as the queue it is compared with was measured
 *    enqueueing only): both sinks point at a server that never answers, with
 *    `pipeline.maxInflight` 1 and `pipeline.tickMs` 60 s, so the pipeline holds
 *    one claimed row and claims nothing more. Delivery has its own bench.
 * 3. The same load against a bare `node:http` server that reads the body and
 *    answers 202 (bench/lib/target-server.ts): the limit of one Node process
 *    here, so the result is also a ratio. Then the same bare server answering
 *    in batches, each as long after its first request as the server's linger
 *    and commit took in that round: what answering after a group commit costs
 *    node:http alone (printed, not gated).
 *
 * Prints hooks/s, p50/p99 latency, the server's event-loop delay p99 (its
 * `ankusa_event_loop_delay_seconds{quantile="0.99"}`, the worst 5 s window of
 * the measured time) and its peak RSS (VmHWM); the store alone's CPU by thread, and the floor
 * with the ops: the bare server's CPU a request, plus the store's own threads a hook at 64-hook
 * synced batches (as many hooks as the server took, on a fresh store: FLOOR_MIN_ROUNDS), plus this
 * build's ops and encoding a hook (64-hook batches). Pass (issue 29):
 * the server's CPU a hook (all threads) <= MAX_FLOOR_RATIO x that floor, the worst round's p99 at
 * most MAX_P99_OVER_BARE x the bare server's CPU a request in this run, and every answer a 202.
 * The p99 rule is the issue's 20 ms where the bare server took 14.6 µs a request (the gate on
 * 61e4159): with 64 connections in a closed loop the latency is 64 / hooks/s, and hooks/s follows
 * the CPU a hook, which follows this host's speed (the bare server 14.6 to 65.5 µs a request
 * between sessions), so a fixed 20 ms measured the host. The rate and its ratio to the bare server are printed, not gated: on 2 cores
 * shared with the load generator the rate follows the CPU a hook.
 * `--store postgres`: the same load against the server on PostgreSQL, beside RocksDB, against a
 * floor of a plain PostgreSQL writer (bench/lib/ingest-postgres.ts; summary `ingest-bench-postgres`).
 * Run: npx tsx bench/ingest-bench.ts [--quick] [--seconds S] [--store postgres]
 */
import { Effect } from "effect"
import { defaults as defaultConfig } from "../src/domain/config.js"
import { EVENT_LOOP_WINDOW_MS } from "../src/observability/event-loop-metrics.js"
import { DEFAULT_COMMIT_THREAD } from "../src/store/rocksdb.js"
import { encodeBatch } from "../src/store/rocksdb-wire.mjs"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import { ingestBatches } from "./lib/ingest-batches.js"
import { ingestOnPostgres } from "./lib/ingest-postgres.js"
import { type LoadResult, rawPost, runLoad } from "./lib/load.js"
import { onPostgres, pgCpuMs } from "./lib/pg-cpu.js"
import { cpuOf, memoryOf, namedThreadsCpuMs, tempDir } from "./lib/proc.js"
import { arg, cpuTicks, finish, fmt, int, log, machine, main, mib, percentile, quick, stealBetween, table } from "./lib/report.js"
import { metricValue, startServe } from "./lib/serve-child.js"
import { startTarget } from "./lib/target-server.js"

const SECONDS = arg("seconds", quick ? 5 : 20)
const WARMUP_SECONDS = arg("warmup", quick ? 2 : 3)
const CONNECTIONS = 64
const TENANTS = 1_000
const BODY_BYTES = 1_024
const SINKS = ["a", "b"]
/** The server's CPU a hook at most this many times the floor with the ops (issue 29). */
export const MAX_FLOOR_RATIO = 1.25
/** The worst round's p99 at most this many times the bare server's CPU a request (20 ms over 14.6 µs). */
export const MAX_P99_OVER_BARE = 1_370
/**
 * Store-alone batch sizes: the Writer's default maxBatch (256), and 64: with 64 connections in a
 * closed loop no batch holds more than 64 hooks, so one synced 64-hook commit bounds the server.
 */
const STORE_BATCH_SIZES = [64, 256] as const
const STORE_ROUNDS = quick ? 60 : 300
/**
 * The floor's store alone (64-hook batches, the default commit path) writes as many hooks as the
 * server took over its whole load, warm-up included, on a fresh store as the server's is: RocksDB's
 * flushes and compactions a hook grow with what the store has taken (the hooks family flushes two
 * 16 MiB memtables at a time, about 29,000 hooks, and each level's compaction starts later), so a
 * floor written to a smaller store would not charge its own threads what the server's pay. At least
 * FLOOR_MIN_ROUNDS rounds.
 */
const FLOOR_MIN_ROUNDS = quick ? 1_000 : 2_500
/** Alternating rounds of the server, the bare server and the floor's store alone (1 with `--quick`). */
const ROUNDS = arg("rounds", quick ? 1 : 2)
/** How often /metrics is read for the event-loop gauge during the load. */
const SCRAPE_MS = 500

// ---------------------------------------------------------------------------
// 1. The store alone

const SHAPE = { tenants: TENANTS, sinks: SINKS, bodyBytes: BODY_BYTES }

const storeAlone = (thread: "main" | "worker", hooks: number, rounds: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      const dir = tempDir("ingest-store")
      yield* Effect.addFinalizer(() => Effect.sync(dir.remove))
      const store = yield* makeRocksDbStore(dir.path, { commitThread: thread })
      const build = ingestBatches(SHAPE, hooks)
      const commit: Array<number> = []
      const building: Array<number> = []
      const encoding: Array<number> = []
      let cpu0 = namedThreadsCpuMs()
      for (let r = 0; r < rounds + 5; r++) {
        if (r === 5) cpu0 = namedThreadsCpuMs()
        const t0 = performance.now()
        const batch = build()
        const t1 = performance.now()
        encodeBatch(batch, () => 0)
        const t2 = performance.now()
        yield* store.write(batch, { sync: true })
        const t3 = performance.now()
        if (r < 5) continue // warm-up
        building.push(t1 - t0)
        encoding.push(t2 - t1)
        commit.push(t3 - t2)
      }
      const perHook = (xs: Array<number>) => (percentile(xs, 50) * 1000) / hooks
      // CPU of the measured rounds by thread (/proc, 10 ms ticks): this thread (build, encode and, on
      // the main path, the write) and every other (the commit worker, RocksDB's threads, V8's helpers).
      const cpu1 = namedThreadsCpuMs()
      const mainTid = String(process.pid)
      // The others by what they are (/proc comm): the commit worker, RocksDB's flushes and compactions, the rest (V8's helpers).
      const others = { worker: 0, rocksdb: 0, other: 0 }
      for (const [tid, t] of cpu1) {
        if (tid === mainTid) continue
        const ms = t.ms - (cpu0.get(tid)?.ms ?? 0)
        if (t.name === "WorkerThread") others.worker += ms
        else if (t.name.startsWith("rocksdb")) others.rocksdb += ms
        else others.other += ms
      }
      const measured = rounds * hooks
      const perMeasured = (ms: number) => (ms * 1000) / measured
      const cpuMain = perMeasured((cpu1.get(mainTid)?.ms ?? 0) - (cpu0.get(mainTid)?.ms ?? 0))
      const cpuOthers = perMeasured(others.worker + others.rocksdb + others.other)
      const cpuBy = { worker: perMeasured(others.worker), rocksdb: perMeasured(others.rocksdb), other: perMeasured(others.other) }
      return {
        thread,
        hooks,
        ops: build().length,
        build: perHook(building),
        encode: perHook(encoding),
        commit: perHook(commit),
        p50: percentile(commit, 50),
        p99: percentile(commit, 99),
        cpuMain,
        cpuOthers,
        cpuBy,
        // One synced batch at a time (the Writer commits serially): hooks per second at most.
        bound: hooks / (percentile(building, 50) + percentile(encoding, 50) + percentile(commit, 50)) * 1000
      }
    })
  )

// ---------------------------------------------------------------------------
// 2 and 3. The server and the bare server under the same load

const requestsFor = (origin: string, path: string) => {
  const host = new URL(origin).host
  const body = Buffer.alloc(BODY_BYTES, 0x7a)
  return Array.from({ length: TENANTS }, (_, i) =>
    rawPost(path, host, { "content-type": "application/json", "x-tenant": `tenant-${i + 1}` }, body)
  )
}

/** The worst 5 s window's event-loop delay p99 published while the load was measured. */
const watchLoopDelay = (url: string) => {
  const seen: Array<{ readonly at: number; readonly p99: number }> = []
  let last: number | undefined
  const timer = setInterval(() => {
    void fetch(`${url}/metrics`)
      .then((r) => r.text())
      .then((text) => {
        const v = metricValue(text, 'ankusa_event_loop_delay_seconds{quantile="0.99"}')
        if (v !== undefined && v !== last) seen.push({ at: performance.now(), p99: v * 1000 })
        last = v
      })
      .catch(() => {})
  }, SCRAPE_MS)
  return {
    /** Windows published at least one window after `from` (so they lie in the load) and up to `to` plus a scrape. */
    worst: (from: number, to: number) => {
      clearInterval(timer)
      const inside = seen.filter((s) => s.at >= from + EVENT_LOOP_WINDOW_MS && s.at <= to + SCRAPE_MS * 2)
      return inside.length === 0 ? NaN : Math.max(...inside.map((s) => s.p99))
    }
  }
}

export interface ServerRun {
  readonly load: LoadResult
  readonly loopP99: number
  readonly peakRss: number
  readonly accepted?: number
  /** CPU (ms) over the whole load, warm-up included: the server's (every thread, the main thread) and the load generator's. */
  readonly cpu: Cpu
  /** Writer commits over the whole load: count, requests answered, seconds committing. */
  readonly writer?: { readonly commits: number; readonly requests: number; readonly seconds: number }
}

const writerTotals = (text: string) => ({
  commits: metricValue(text, "ankusa_writer_batch_requests_count") ?? 0,
  requests: metricValue(text, "ankusa_writer_batch_requests_sum") ?? 0,
  seconds: metricValue(text, "ankusa_writer_commit_seconds_sum") ?? 0
})

export interface Cpu {
  /** The server's process (every thread). */
  readonly all: number
  /** With `--store postgres`: every PostgreSQL process (bench/lib/pg-cpu.ts). */
  readonly pg?: number
  readonly main: number
  /** The main thread's system time (ms). */
  readonly mainSystem: number
  /** The host's steal over the load: the share of the machine's CPU time the hypervisor gave to other guests. */
  readonly steal: number | undefined
  readonly generator: number
  /** The server's threads other than the main one, by what they are (/proc comm), in ms. */
  readonly by: { readonly worker: number; readonly rocksdb: number; readonly other: number }
  /** The same by /proc comm (ms). */
  readonly names: ReadonlyMap<string, number>
}

/** The server's CPU (every thread, the main thread, the others by kind) and this process's (the load generator's) over `f`, in ms. */
const cpuDuring = async <A>(pid: number, f: () => Promise<A>, postmaster?: number): Promise<[A, Cpu]> => {
  const pg0 = postmaster === undefined ? 0 : pgCpuMs(postmaster)
  const before = cpuOf(pid)
  const threads0 = namedThreadsCpuMs(pid)
  const generator = process.cpuUsage()
  const ticks = cpuTicks()
  const a = await f()
  const steal = stealBetween(ticks, cpuTicks())
  const after = cpuOf(pid)
  const threads1 = namedThreadsCpuMs(pid)
  const g = process.cpuUsage(generator)
  const pg = postmaster === undefined ? {} : { pg: pgCpuMs(postmaster) - pg0 }
  const by = { worker: 0, rocksdb: 0, other: 0 }
  const names = new Map<string, number>()
  for (const [tid, t] of threads1) {
    if (tid === String(pid)) continue
    const ms = t.ms - (threads0.get(tid)?.ms ?? 0)
    names.set(t.name, (names.get(t.name) ?? 0) + ms)
    if (t.name === "WorkerThread") by.worker += ms
    else if (t.name.startsWith("rocksdb")) by.rocksdb += ms
    else by.other += ms
  }
  return [a, { ...pg, all: after.all - before.all, main: after.main - before.main, mainSystem: after.mainSystem - before.mainSystem, steal, generator: (g.user + g.system) / 1000, by, names }]
}

/** Requests over the whole load (warm-up included), the warm-up taken at the measured rate. */
const hooksOf = (r: ServerRun) => r.load.rate * (SECONDS + WARMUP_SECONDS)
/** CPU over the whole load per request (µs). */
const perReq = (r: ServerRun, ms: number) => (ms * 1000) / Math.max(1, hooksOf(r))

type StoreRun = Effect.Success<ReturnType<typeof storeAlone>>

interface Round {
  readonly a: ServerRun
  readonly b: ServerRun
  /** The bare server answering in batches (`bare(dMs)`), and the batch's delay in ms. */
  readonly d: ServerRun
  readonly dMs: number
  /** The floor's store alone. */
  readonly w64: StoreRun
  readonly floorHooks: number
}

const underLoad = async (origin: string, path: string) =>
  runLoad({ origin, connections: CONNECTIONS, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS, requests: requestsFor(origin, path) })

/** `ankusa serve` under the load; with `pg`, on PostgreSQL at `pg.url`, whose processes' CPU is counted too. */
const ankusa = async (pg?: { readonly url: string; readonly postmaster: number }): Promise<ServerRun> => {
  const sink = await startTarget({ hang: true })
  const dir = tempDir("ingest-serve")
  try {
    const server = await startServe({
      dataDir: dir.path,
      config: {
        sources: [{ id: "bench", tenant: { header: "x-tenant" }, routes: SINKS }],
        sinks: SINKS.map((name) => ({ name, url: `${sink.url}/${name}`, timeoutMs: 300_000, concurrency: 1 })),
        pipeline: { maxInflight: 1, tickMs: 60_000 },
        http: { demoSink: false },
        log: { level: "info" },
        ...(pg === undefined ? {} : { store: { kind: "postgres", postgres: { url: pg.url } } })
      }
    })
    try {
      log(`ankusa serve${pg === undefined ? "" : " on PostgreSQL"} pid ${server.pid} at ${server.url}; load ${WARMUP_SECONDS} s warm-up + ${SECONDS} s`)
      const loop = watchLoopDelay(server.url)
      const start = performance.now() + WARMUP_SECONDS * 1000
      const w0 = writerTotals(await fetch(`${server.url}/metrics`).then((r) => r.text()))
      const [load, cpu] = await cpuDuring(server.pid, () => underLoad(server.url, "/v1/hooks/bench"), pg?.postmaster)
      const loopP99 = loop.worst(start, performance.now())
      const peakRss = memoryOf(server.pid).peak
      const metrics = await fetch(`${server.url}/metrics`).then((r) => r.text())
      const accepted = metricValue(metrics, 'ankusa_ingest_requests_total{outcome="accepted"}')
      const w1 = writerTotals(metrics)
      const writer = { commits: w1.commits - w0.commits, requests: w1.requests - w0.requests, seconds: w1.seconds - w0.seconds }
      return { load, loopP99, peakRss, cpu, writer, ...(accepted === undefined ? {} : { accepted }) }
    } finally {
      await server.kill()
    }
  } finally {
    await sink.close()
    dir.remove()
  }
}

/**
 * The delay of the bare server's batched answers: from a batch's first request to its answers in
 * the server's round (the served default linger and a commit, the fsync included), in whole ms (a
 * Node timer's unit); the linger alone if the server's metrics counted no commit.
 */
const batchDelayOf = (a: ServerRun) => {
  const commitMs = a.writer === undefined || a.writer.commits === 0 ? 0 : (a.writer.seconds * 1000) / a.writer.commits
  return Math.max(1, Math.round(defaultConfig.writer.lingerMs + commitMs))
}

/**
 * The bare server, or with `answerAfterMs` answering in batches that many ms after each batch's
 * first request: the shape of an answer after a synced group commit, priced on node:http alone
 * (printed, not gated: what a server that acknowledges after its commit pays whatever its code).
 */
const bare = async (answerAfterMs?: number): Promise<ServerRun> => {
  const server = await startTarget(answerAfterMs === undefined ? { status: 202 } : { status: 202, answerAfterMs })
  try {
    log(`bare node:http${answerAfterMs === undefined ? "" : ` answering in batches after ${answerAfterMs} ms`} pid ${server.pid} at ${server.url}`)
    const [load, cpu] = await cpuDuring(server.pid, () => underLoad(server.url, "/v1/hooks/bench"))
    return { load, loopP99: NaN, peakRss: memoryOf(server.pid).peak, cpu }
  } finally {
    await server.close()
  }
}

if (onPostgres) {
  main("ingest-bench-postgres", () =>
    ingestOnPostgres({ ankusa, bare, hooksOf, perReq, shape: SHAPE, rounds: ROUNDS, load: { connections: CONNECTIONS, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS } })
  )
} else main("ingest-bench", async () => {
  console.log(`ingest-bench: ${machine()}${quick ? "; --quick" : ""}`)
  const stores: Array<StoreRun> = []
  for (const hooks of STORE_BATCH_SIZES) {
    for (const thread of ["main", "worker"] as const) stores.push(await Effect.runPromise(storeAlone(thread, hooks, STORE_ROUNDS)))
  }
  console.log(`\nThe store alone: synced batches of ingested hooks (${BODY_BYTES} B bodies, ${SINKS.length} sinks), p50 of ${STORE_ROUNDS}`)
  table(
    ["hooks/batch", "ops", "commit path", "commit µs/hook", "commit p50 / p99 ms", "build ops µs/hook", "encode µs/hook", "CPU µs/hook: this thread, others", "serial bound hooks/s"],
    stores.map((s) => [
      String(s.hooks),
      int(s.ops),
      s.thread + (s.thread === DEFAULT_COMMIT_THREAD ? " (default)" : ""),
      fmt(s.commit, 1),
      `${fmt(s.p50, 2)} / ${fmt(s.p99, 2)}`,
      fmt(s.build, 1),
      fmt(s.encode, 1),
      `${fmt(s.cpuMain, 1)}, ${fmt(s.cpuOthers, 1)}`,
      int(s.bound)
    ])
  )
  console.log(
    `Write path: the batch is encoded on the main thread into one buffer (rocksdb-wire.mjs); the "${DEFAULT_COMMIT_THREAD}" path ` +
      `transfers it to the commit worker, which builds the binding's chained WriteBatch (one _put/_del/_merge call per op) and writes it synced, ` +
      `so the event loop pays only build + encode.`
  )

  // ROUNDS alternating rounds (the server, the bare server, the floor's store alone); the rule is
  // taken on their pooled CPU, so one noisy measurement of either side weighs half.
  const rounds: Array<Round> = []
  for (let r = 0; r < ROUNDS; r++) {
    const a = await ankusa()
    const b = await bare()
    const dMs = batchDelayOf(a)
    const d = await bare(dMs)
    // The floor's store alone, written as many hooks as the server took (FLOOR_MIN_ROUNDS).
    const serverHooks = hooksOf(a)
    const floorRounds = Math.max(FLOOR_MIN_ROUNDS, Math.ceil(serverHooks / 64))
    log(`the floor's store alone: ${int(floorRounds)} synced 64-hook batches (${int(floorRounds * 64)} hooks; the server took ${int(serverHooks)})`)
    rounds.push({ a, b, d, dMs, w64: await Effect.runPromise(storeAlone(DEFAULT_COMMIT_THREAD, 64, floorRounds)), floorHooks: floorRounds * 64 })
  }
  console.log(`\nHTTP: ${CONNECTIONS} keep-alive connections, ${BODY_BYTES} B bodies, ${TENANTS} tenants, ${WARMUP_SECONDS} s warm-up + ${SECONDS} s measured, ${ROUNDS} rounds`)
  const row = (name: string, r: ServerRun) => [
    name,
    int(r.load.rate),
    fmt(r.load.p50Ms, 2),
    fmt(r.load.p99Ms, 2),
    fmt(r.load.maxMs, 1),
    Number.isNaN(r.loopP99) ? "-" : fmt(r.loopP99, 2),
    mib(r.peakRss),
    `${int(perReq(r, r.cpu.all))} µs`,
    `${int(perReq(r, r.cpu.main))} µs`,
    `${int(perReq(r, r.cpu.generator))} µs`,
    r.cpu.steal === undefined ? "-" : `${fmt(100 * r.cpu.steal, 1)}%`,
    Object.entries(r.load.statuses)
      .map(([s, n]) => `${s}:${int(n)}`)
      .join(" ") + (r.load.errors > 0 ? ` errors:${r.load.errors}` : "")
  ]
  table(
    ["server", "req/s", "p50 ms", "p99 ms", "max ms", "loop p99 ms", "peak RSS", "CPU/req: all", "main thread", "generator", "host steal", "answers"],
    rounds.flatMap((r, i) => [
      row(`ankusa serve (synced, 2 sinks) #${i + 1}`, r.a),
      row(`bare node:http 202 #${i + 1}`, r.b),
      row(`bare, answers after ${r.dMs} ms #${i + 1}`, r.d)
    ])
  )
  for (const [i, { a }] of rounds.entries()) {
    if (a.writer === undefined || a.writer.commits === 0) continue
    const w = a.writer
    console.log(
      `Writer over the whole load #${i + 1}: ${int(w.commits)} commits, ${fmt(w.requests / w.commits, 1)} requests a commit, ` +
        `${fmt((w.seconds * 1000) / w.commits, 2)} ms a commit (the fsync included), committing ${fmt((100 * w.seconds) / (SECONDS + WARMUP_SECONDS), 0)}% of the time.`
    )
  }
  const pick = (hooks: number, thread: string) => stores.find((s) => s.hooks === hooks && s.thread === thread)!
  const w256 = pick(256, "worker")
  const m256 = pick(256, "main")
  // The floor of any server that answers over node:http after a synced TEN-1 commit through this binding:
  // the bare server's CPU a request plus the store's own threads a hook (the commit worker: decoding, the
  // binding's batch calls and the synced write; RocksDB's threads), at 64-hook batches (the largest the
  // load gives; smaller ones cost more a hook); with the ops: plus this build's ops and their encoding.
  // Each pooled over the rounds: the CPU of all rounds over their hooks (requests).
  const pooled = (ms: (r: Round) => number, n: (r: Round) => number) =>
    (rounds.reduce((t, r) => t + ms(r), 0) * 1000) / Math.max(1, rounds.reduce((t, r) => t + n(r), 0))
  const serverBy = (ms: (c: Cpu) => number) => pooled((r) => ms(r.a.cpu), (r) => hooksOf(r.a))
  const storeBy = (us: (w: StoreRun) => number) => pooled((r) => (us(r.w64) * r.floorHooks) / 1000, (r) => r.floorHooks)
  const bareCpu = pooled((r) => r.b.cpu.all, (r) => hooksOf(r.b))
  const serverCpu = serverBy((c) => c.all)
  const storeCpu = storeBy((w) => w.cpuOthers)
  const floor = bareCpu + storeCpu
  const mean = (f: (r: Round) => number) => rounds.reduce((t, r) => t + f(r), 0) / rounds.length
  const worst = (f: (r: Round) => number) => Math.max(...rounds.map(f))
  const ops = mean((r) => r.w64.build + r.w64.encode)
  const floorOps = floor + ops
  const floorRatio = serverCpu / Math.max(1e-9, floorOps)
  const roundRatios = rounds.map((r) => perReq(r.a, r.a.cpu.all) / (perReq(r.b, r.b.cpu.all) + r.w64.cpuOthers + r.w64.build + r.w64.encode))
  const rate = mean((r) => r.a.load.rate)
  const bareRate = mean((r) => r.b.load.rate)
  const ratio = rate / bareRate
  const p99 = worst((r) => r.a.load.p99Ms)
  const p99Limit = (MAX_P99_OVER_BARE * bareCpu) / 1000
  console.log(
    `\nFloor: bare ${fmt(bareCpu, 1)} µs a request + the store's own threads ${fmt(storeCpu, 1)} µs a hook (${rounds.map((r) => int(r.floorHooks)).join(" and ")} hooks in synced 64-hook batches on a fresh store, commit worker; ` +
      `by thread: the commit worker ${fmt(storeBy((w) => w.cpuBy.worker), 1)}, RocksDB ${fmt(storeBy((w) => w.cpuBy.rocksdb), 1)}, V8's helpers and the rest ${fmt(storeBy((w) => w.cpuBy.other), 1)}) ` +
      `= ${fmt(floor, 1)} µs, ${fmt(floor / bareCpu, 2)} x bare; with this build's ops and encoding (${fmt(ops, 1)} µs) ${fmt(floorOps, 1)} µs, ${fmt(floorOps / bareCpu, 2)} x bare.`
  )
  console.log(
    `Rule (issue 29): the server's CPU a hook ${fmt(serverCpu, 1)} µs (main thread ${fmt(serverBy((c) => c.main), 1)}) = ${fmt(floorRatio, 2)} x the floor with the ops ` +
      `(at most ${MAX_FLOOR_RATIO} x: ${fmt(MAX_FLOOR_RATIO * floorOps, 1)} µs; by round ${roundRatios.map((x) => fmt(x, 2)).join(", ")}). Printed, not gated: hooks/s ${fmt(ratio, 2)} x the bare req/s.`
  )
  console.log(
    `The server's CPU a hook by thread: main ${fmt(serverBy((c) => c.main), 1)}, commit worker ${fmt(serverBy((c) => c.by.worker), 1)}, ` +
      `RocksDB ${fmt(serverBy((c) => c.by.rocksdb), 1)}, V8's helpers and the rest ${fmt(serverBy((c) => c.by.other), 1)} µs ` +
      `(${[...rounds[0]!.a.cpu.names].filter(([, ms]) => ms > 0).sort((x, y) => y[1] - x[1]).map(([n]) => `${n} ${fmt(serverBy((c) => c.names.get(n) ?? 0), 1)}`).join(", ")}).`
  )
  // In the kernel: what moves most with the host (a busy neighbour slows system calls and wake-ups more than user code).
  const bareBy = (ms: (c: Cpu) => number) => pooled((r) => ms(r.b.cpu), (r) => hooksOf(r.b))
  console.log(
    `The main thread's system time (in the kernel: socket reads and writes, epoll, waking another thread): the server ` +
      `${fmt(serverBy((c) => c.mainSystem), 1)} of its ${fmt(serverBy((c) => c.main), 1)} µs a hook, the bare server ${fmt(bareBy((c) => c.mainSystem), 1)} of its ${fmt(bareBy((c) => c.main), 1)} µs a request.`
  )
  const batchedCpu = pooled((r) => r.d.cpu.all, (r) => hooksOf(r.d))
  console.log(
    `Printed, not gated: the bare server answering in batches, each ${rounds.map((r) => r.dMs).join(" and ")} ms after its first request (the server's linger and commit in that round), ` +
      `${fmt(batchedCpu, 1)} µs a request (main thread ${fmt(pooled((r) => r.d.cpu.main, (r) => hooksOf(r.d)), 1)}): ${fmt(batchedCpu - bareCpu, 1)} µs over the bare server's, ` +
      `the cost of answering after a group commit that node:http pays whatever the server's own code; the floor with the ops and that: ${fmt(floorOps + batchedCpu - bareCpu, 1)} µs, the server ${fmt(serverCpu / Math.max(1e-9, floorOps + batchedCpu - bareCpu), 2)} x it.`
  )
  const all202 = rounds.every((r) => Object.keys(r.a.load.statuses).every((s) => s === "202") && r.a.load.errors === 0)
  const pass = floorRatio <= MAX_FLOOR_RATIO && p99 <= p99Limit && all202
  finish(
    "ingest-bench",
    pass,
    `CPU ${fmt(serverCpu, 1)} µs a hook, ${fmt(floorRatio, 2)} x the floor with the ops ${fmt(floorOps, 1)} µs (rule <= ${MAX_FLOOR_RATIO}; ` +
      `bare ${fmt(bareCpu, 1)} + the store's own threads ${fmt(storeCpu, 1)} + ops ${fmt(ops, 1)}); ` +
      `p50 ${fmt(worst((r) => r.a.load.p50Ms), 2)} ms, p99 ${fmt(p99, 2)} ms (the worst round's; rule <= ${int(MAX_P99_OVER_BARE)} x bare ${fmt(bareCpu, 1)} µs = ${fmt(p99Limit, 2)} ms)${all202 ? ", every answer 202" : "; NOT every answer was 202"}; ` +
      `${int(rate)} hooks/s (${fmt(ratio, 2)} x bare node:http ${int(bareRate)} req/s, the rounds' means, not gated), loop p99 ${fmt(worst((r) => r.a.loopP99), 2)} ms, peak RSS ${mib(worst((r) => r.a.peakRss))}; ` +
      `store alone (256-hook synced batch) ${fmt(w256.commit, 1)} µs/hook (worker), ${fmt(m256.commit, 1)} (main); ` +
      `a 64-hook synced batch bounds ${CONNECTIONS} connections at ${int(rounds[0]!.w64.bound)} hooks/s`
  )
})
