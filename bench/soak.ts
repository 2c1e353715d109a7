/**
 * Soak (issue 7): steady ingest and delivery through the real layers — the
 * Writer, the pipeline with its node:http sink client, a local sink server, the
 * RocksDB store — with the archive on, the compactor, reclaim and the dedupe
 * sweep running on short intervals, for long enough to pass many
 * compactions and reclaim walks. Every hook carries an idempotency key, so
 * dedupe keys come and go too.
 *
 * Every SAMPLE_S seconds it prints hooks processed against the store's live
 * size: the bytes (key + value) of every live row in every column family,
 * read by a scan (what the gateway keeps), and the store directory's size on
 * disk (WAL and SST files, for information: it moves with memtable flushes
 * and compactions, not with live data). PASS needs: every acknowledged hook
 * delivered and archived, nothing dead, several compactions and reclaim
 * walks, and the live size bounded: after warm-up its growth per hook
 * processed (least squares on throughput and hooks processed, so a faster
 * phase is not read as growth) stays under SLOPE_LIMIT of the bytes one hook
 * costs while it lives, its peak stays under the bytes of MAX_BACKLOG hooks
 * plus LAG_S seconds of ingest, and after the drain it falls back near
 * empty. Ingest is held back while MAX_BACKLOG hooks wait for delivery, so
 * a slow machine measures the same thing at a lower rate.
 * Run: npx tsx bench/soak.ts [--seconds N] [--rate HOOKS_PER_S]
 */
import * as fs from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Layer, Metric, Stream } from "effect"
import * as K from "../src/domain/keys.js"
import { ColumnFamilies } from "../src/domain/ops.js"
import { defaultSchedule } from "../src/domain/retry-schedule.js"
import * as Archive from "../src/lifecycle/archive.js"
import { listFiles, readSegment } from "../src/lifecycle/archive-files.js"
import { checkLifecycle } from "../src/queue/format/check-lifecycle.js"
import * as DedupeSweep from "../src/lifecycle/dedupe-sweep.js"
import { archiveCompactions, reclaimHooks } from "../src/observability/lifecycle-metrics.js"
import * as Pipeline from "../src/delivery/pipeline.js"
import * as Queue from "../src/queue/queue.js"
import * as Reclaim from "../src/lifecycle/reclaim.js"
import { Store, type StoreShape } from "../src/store/store.js"
import { layerRocksDb } from "../src/store/rocksdb.js"
import * as Wake from "../src/queue/wake.js"
import * as Writer from "../src/queue/writer.js"
import { arg } from "./lib/report.js"


/** How long hooks are submitted (then the queue drains). */
const SECONDS = arg("seconds", 120)
const RATE = arg("rate", 200)
const TENANTS = 20
const BODY_BYTES = 512
const SAMPLE_S = 5
/** The lifecycle runs fast so that a soak of minutes sees many rounds of it. */
const COMPACT_MS = 1_000
const RECLAIM_MS = 1_000
const SWEEP_MS = 1_000
const DEDUPE_WINDOW_MS = 5_000
/** Samples before this fraction of the run are warm-up (the backlog and dedupe window fill). */
const WARMUP = 0.25
/** Live bytes may grow by at most this fraction of one hook's live cost per hook processed. */
const SLOPE_LIMIT = 0.05
/** Seconds of hooks the lifecycle may hold beyond the delivery backlog (compactor, reclaim, sampling; generous). */
const LAG_S = 5
/** Ingest pauses while more acknowledged hooks than this wait for delivery. */
const MAX_BACKLOG = 1_000
/** How long the drain may take before the run fails. */
const DRAIN_TIMEOUT_MS = 120_000

const dirSize = (p: string): number =>
  fs.readdirSync(p, { withFileTypes: true }).reduce((n, e) => {
    const q = path.join(p, e.name)
    return n + (e.isDirectory() ? dirSize(q) : fs.statSync(q).size)
  }, 0)

/** Bytes of every live row, by column family. */
const liveBytes = (store: StoreShape) =>
  Effect.gen(function* () {
    let total = 0
    const by: Record<string, number> = {}
    for (const cf of ColumnFamilies) {
      const n = yield* Stream.runFold(store.stream(cf, { lo: new Uint8Array(0), hi: K.CF_END }, { chunk: 5_000 }), () => 0, (acc, e) => acc + e.key.length + e.value.length)
      by[cf] = n
      total += n
    }
    return { total, by }
  })

/** A local sink answering 204 and recording each delivery's `webhook-id`. */
const startSink = () =>
  new Promise<{ url: string; ids: Set<string>; requests: () => number; close: () => Promise<void> }>((resolve) => {
    const ids = new Set<string>()
    let requests = 0
    const server = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        requests++
        ids.add(String(req.headers["webhook-id"]))
        res.writeHead(204)
        res.end()
      })
    })
    server.keepAliveTimeout = 60_000
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({ url: `http://127.0.0.1:${port}/sink`, ids, requests: () => requests, close: () => new Promise((r) => server.close(() => r())) })
    })
  })

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(2)} MiB`

/**
 * Least squares of live bytes on throughput and hooks processed:
 * live ≈ c + a·(hooks/s) + b·processed. What lags behind delivery (the
 * compactor and reclaim intervals, the dedupe window) scales with the
 * throughput (a); what leaks scales with the hooks processed (b).
 */
const leakPerHook = (samples: ReadonlyArray<Sample>): number => {
  const rows: Array<[number, number, number, number]> = []
  for (let i = 1; i < samples.length; i++) {
    const dt = samples[i]!.t - samples[i - 1]!.t
    if (dt <= 0) continue
    rows.push([1, (samples[i]!.delivered - samples[i - 1]!.delivered) / dt, samples[i]!.delivered, samples[i]!.live])
  }
  // Normal equations (XᵀX) β = Xᵀy, solved by Gaussian elimination with partial pivoting.
  const m = [0, 1, 2].map((r) => [0, 1, 2].map((c) => rows.reduce((n, x) => n + x[r]! * x[c]!, 0)).concat(rows.reduce((n, x) => n + x[r]! * x[3], 0)))
  for (let col = 0; col < 3; col++) {
    let pivot = col
    for (let r = col + 1; r < 3; r++) if (Math.abs(m[r]![col]!) > Math.abs(m[pivot]![col]!)) pivot = r
    ;[m[col], m[pivot]] = [m[pivot]!, m[col]!]
    if (Math.abs(m[col]![col]!) < 1e-12) return 0 // degenerate (constant throughput and processed): no trend to fit
    for (let r = 0; r < 3; r++) {
      if (r === col) continue
      const f = m[r]![col]! / m[col]![col]!
      for (let c = col; c < 4; c++) m[r]![c]! -= f * m[col]![c]!
    }
  }
  return m[2]![3]! / m[2]![2]!
}

const run = (dataDir: string, sinkUrl: string, sink: { readonly ids: Set<string> }) =>
  Effect.scoped(
    Effect.gen(function* () {
      const storeDir = path.join(dataDir, "store")
      fs.mkdirSync(storeDir, { recursive: true })
      const archiveDir = Archive.archiveDir(dataDir)
      const services = Layer.mergeAll(
        Writer.layer({ dedupeWindowMs: DEDUPE_WINDOW_MS }),
        Archive.layer({ dir: archiveDir, enabled: true }),
        Reclaim.layer(),
        DedupeSweep.layer()
      ).pipe(Layer.provideMerge(Queue.layer), Layer.provideMerge(Layer.mergeAll(layerRocksDb(storeDir), Wake.layer)))
      const ctx = yield* Layer.build(services)
      const running = Layer.mergeAll(
        Pipeline.layer({
          sinks: [{ name: "sink", url: sinkUrl, timeoutMs: 10_000, headers: {}, concurrency: 16, retry: defaultSchedule }]
        }),
        Archive.layerCompactor({ compactInterval: COMPACT_MS }),
        Reclaim.layerSchedule({ interval: RECLAIM_MS }),
        DedupeSweep.layerSchedule({ interval: SWEEP_MS })
      )
      yield* Layer.build(running).pipe(Effect.provide(ctx))
      return yield* drive(sink).pipe(Effect.provide(ctx))
    })
  )

interface Sample {
  readonly t: number
  readonly acked: number
  readonly delivered: number
  readonly live: number
  readonly disk: number
  readonly by: Record<string, number>
}

const drive = (sink: { readonly ids: Set<string> }) =>
  Effect.gen(function* () {
    const store = yield* Store
    const writer = yield* Writer.Writer
    const queue = yield* Queue.Queue
    const archive = yield* Archive.Archive
    const reclaim = yield* Reclaim.Reclaim
    const sweep = yield* DedupeSweep.DedupeSweep
    const storeDir = path.dirname(archive.dir) + "/store"
    const compactionsBefore = (yield* Metric.value(archiveCompactions)).count
    const reclaimedBefore = (yield* Metric.value(reclaimHooks)).count
    const acked = new Set<string>()
    let duplicates = 0
    let refused = 0
    let held = 0
    let n = 0
    const started = Date.now()
    const samples: Array<Sample> = []
    const sample = Effect.gen(function* () {
      const live = yield* liveBytes(store)
      const s: Sample = { t: (Date.now() - started) / 1000, acked: acked.size, delivered: sink.ids.size, live: live.total, disk: dirSize(storeDir), by: live.by }
      samples.push(s)
      console.log(
        [`${s.t.toFixed(0).padStart(4)} s`, `acked ${String(s.acked).padStart(7)}`, `delivered ${String(s.delivered).padStart(7)}`, `live ${mib(s.live).padStart(11)}`, `disk ${mib(s.disk).padStart(11)}`, `hooks ${mib(s.by.hooks ?? 0)}`, `index ${mib(s.by.index ?? 0)}`].join("  ")
      )
    })

    const submitOne = (i: number) =>
      writer
        .submit({
          tenantId: `t${i % TENANTS}`,
          sourceId: "soak",
          sinks: ["sink"],
          body: Buffer.from(JSON.stringify({ n: i, pad: "x".repeat(BODY_BYTES) })),
          contentType: "application/json",
          headers: {},
          idempotencyKey: `k${i}`,
          archive: true
        })
        .pipe(
          Effect.tap((r) =>
            Effect.sync(() => {
              if (r.duplicate) duplicates++
              else acked.add(r.id)
            })
          ),
          // A refusal (the Writer's queue full) is not a loss: nothing was acknowledged. Counted.
          Effect.catch(() => Effect.sync(() => refused++))
        )

    // Steady ingest: RATE/20 hooks every 50 ms tick, awaited (so the effective rate is at most RATE and
    // lower when commits are slow); every 100th hook sent twice; held
    // back while more than MAX_BACKLOG acknowledged hooks wait for delivery: a soak measures what
    // the gateway keeps per hook processed, not how a backlog grows when ingest outruns the sinks.
    const tickMs = 50
    const perTick = Math.max(1, Math.round((RATE * tickMs) / 1000))
    let nextSample = SAMPLE_S
    while (Date.now() - started < SECONDS * 1000) {
      if (acked.size - sink.ids.size < MAX_BACKLOG) {
        const batch = Array.from({ length: perTick }, () => n++)
        yield* Effect.forEach(batch, (i) => (i % 100 === 0 ? Effect.andThen(submitOne(i), submitOne(i)) : submitOne(i)), { concurrency: "unbounded", discard: true })
      } else held++
      if ((Date.now() - started) / 1000 >= nextSample) {
        yield* sample
        nextSample += SAMPLE_S
      }
      yield* Effect.sleep(tickMs)
    }

    // Drain: every acknowledged hook delivered and archived, then one more reclaim walk and sweep.
    const drainStart = Date.now()
    for (;;) {
      const c = yield* queue.aggregate
      if (c.pending + c.scheduled + c.inflight === 0 && c.archive_pending === 0) break
      if (Date.now() - drainStart > DRAIN_TIMEOUT_MS) break
      yield* Effect.sleep(200)
    }
    yield* Effect.sleep(DEDUPE_WINDOW_MS)
    yield* reclaim.pass
    yield* sweep.sweep
    yield* sample
    const end = yield* queue.aggregate
    const lifecycle = yield* checkLifecycle(store)
    let archived = 0
    for (const f of yield* listFiles(archive.dir)) if (f.kind === "seg") archived += (yield* readSegment(f.path)).length
    return {
      samples,
      acked,
      duplicates,
      refused,
      held,
      seconds: (Date.now() - started) / 1000,
      end,
      lifecycle,
      archived,
      compactions: (yield* Metric.value(archiveCompactions)).count - compactionsBefore,
      reclaimed: (yield* Metric.value(reclaimHooks)).count - reclaimedBefore
    }
  })

const main = async () => {
  console.log(`soak: ${SECONDS} s at ${RATE} hooks/s, ${TENANTS} tenants, ${BODY_BYTES} B bodies, archive on; compactor ${COMPACT_MS} ms, reclaim ${RECLAIM_MS} ms, sweep ${SWEEP_MS} ms, dedupe window ${DEDUPE_WINDOW_MS} ms; ${os.cpus().length} cores, load ${os.loadavg()[0]!.toFixed(1)}`)
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-soak-"))
  const sink = await startSink()
  let failures: Array<string> = []
  let summary = ""
  try {
    const r = await Effect.runPromise(run(dataDir, sink.url, sink))
    const lost = [...r.acked].filter((id) => !sink.ids.has(id))
    if (lost.length > 0) failures.push(`${lost.length} acknowledged hooks never delivered`)
    if (r.end.dead > 0 || r.end.pending + r.end.scheduled + r.end.inflight > 0) failures.push(`queue not drained: ${JSON.stringify(r.end)}`)
    if (r.archived !== r.acked.size) failures.push(`archived ${r.archived} of ${r.acked.size} hooks`)
    if (r.duplicates === 0) failures.push("no duplicate was answered as one")
    if (r.compactions < 5) failures.push(`only ${r.compactions} compactions`)
    if (r.reclaimed < r.acked.size) failures.push(`reclaimed ${r.reclaimed} of ${r.acked.size} hooks`)
    if (!r.lifecycle.ok) failures.push(`lifecycle check: ${JSON.stringify(r.lifecycle.differences.slice(0, 5))}`)

    // Boundedness, on the samples taken while hooks flowed (the last sample is after the drain).
    const flowing = r.samples.slice(0, -1)
    const warm = flowing.filter((s) => s.t >= SECONDS * WARMUP)
    const third = Math.max(1, Math.floor(warm.length / 3))
    const mean = (xs: ReadonlyArray<Sample>) => xs.reduce((n, s) => n + s.live, 0) / xs.length
    // What one hook costs while it lives: its hook row, delivery row, due/inflight and archive keys, dedupe keys.
    const perHook = BODY_BYTES + 400
    const leak = leakPerHook(warm)
    const peak = Math.max(...warm.map((s) => s.live))
    const bound = perHook * (MAX_BACKLOG + RATE * LAG_S)
    const final = r.samples[r.samples.length - 1]!
    if (warm.length < 6) failures.push(`only ${warm.length} samples after warm-up: run longer`)
    else {
      if (leak > SLOPE_LIMIT * perHook) failures.push(`live size grows ${leak.toFixed(1)} B per hook processed (limit ${(SLOPE_LIMIT * perHook).toFixed(1)})`)
      if (peak > bound) failures.push(`live size peaked at ${mib(peak)}, above the bound ${mib(bound)}`)
    }
    // Drained, reclaimed and swept: what is left is sentinels, counters, tenants and the cursor.
    if (final.live > 0.01 * perHook * r.acked.size) failures.push(`after the drain ${mib(final.live)} still live`)
    summary =
      `${r.acked.size} hooks delivered and archived (${Math.round(r.acked.size / r.seconds)}/s effective; ${r.refused} refused, ingest held back ${r.held} of ${Math.round(r.seconds * 20)} ticks), ` +
      `${r.compactions} compactions, ${r.reclaimed} reclaimed; live size mean ${mib(mean(warm.slice(0, third)))} (first third) -> ${mib(mean(warm.slice(-third)))} (last third), ` +
      `peak ${mib(peak)} (bound ${mib(bound)}), ${leak.toFixed(2)} B per hook processed (limit ${(SLOPE_LIMIT * perHook).toFixed(1)}), ${mib(final.live)} after the drain`
  } catch (e) {
    failures = [String(e)]
  } finally {
    await sink.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
  if (failures.length === 0) {
    console.log(`PASS soak: ${summary}`)
    process.exit(0)
  }
  console.log(`FAIL soak: ${failures.join("; ")}${summary === "" ? "" : ` (${summary})`}`)
  process.exit(1)
}

void main()
