/**
 * Issue 6 `bench/delivery-bench`: HOOKS queued hooks (one sink each, 1 KiB
 * bodies, 100 tenants, all due) drained by the real pipeline
 * (src/layers/pipeline.ts on the RocksDB store, undici client) to a local
 * sink in its own process answering 204 (bench/lib/target-server.ts).
 * Prints deliveries/s (first tick to the last outcome committed), the sink's
 * observed maximum concurrency, the TCP connections the sink accepted (a
 * client that reuses its keep-alive connections opens about as many as its
 * concurrency), and the pipeline settings of each run.
 *
 * Two runs on fresh stores: the shipped defaults (`pipeline.*` defaults, sink
 * concurrency 16), which decide PASS (>= TARGET_RATE deliveries/s, every row
 * delivered, none dead), and a tuned run (shorter tick, more inflight, more
 * sink concurrency) printed for comparison: the gap between the two is what
 * the defaults cost.
 * Run: npx tsx bench/delivery-bench.ts [--quick] [--hooks N] [--trace]
 */
import { NodeHttpClient } from "@effect/platform-node"
import { Duration, Effect, Layer } from "effect"
import { defaultSchedule } from "../src/domain/retry-schedule.js"
import * as Pipeline from "../src/layers/pipeline.js"
import { Queue } from "../src/layers/queue.js"
import * as QueueLayer from "../src/layers/queue.js"
import { DEFAULT_SINK_CONCURRENCY } from "../src/layers/sink-client.js"
import { makeRocksDbStore } from "../src/layers/store-rocksdb.js"
import { Store } from "../src/layers/store.js"
import { memoryOf, tempDir } from "./lib/proc.js"
import { builder, dueHooks } from "./lib/queued-store.js"
import { arg, finish, fmt, int, log, machine, main, mib, quick, table } from "./lib/report.js"
import { startTarget, type Target } from "./lib/target-server.js"

const HOOKS = arg("hooks", quick ? 10_000 : 50_000)
/** `--trace`: log the aggregate counters and RSS every second of a drain. */
const TRACE = process.argv.includes("--trace")
const TENANTS = 100
const BODY_BYTES = 1_024
export const TARGET_RATE = 20_000
/** A run that has not drained after this long stops there: its rate is what it delivered so far. */
const DRAIN_TIMEOUT_MS = 2 * 60_000
/** How often the aggregate counters are read to see the drain's end. */
const POLL_MS = 20

interface Settings {
  readonly name: string
  readonly tickMs: number
  readonly maxInflight: number
  readonly concurrency: number
}

const RUNS: ReadonlyArray<Settings> = [
  { name: "defaults", tickMs: Pipeline.Defaults.tickMs, maxInflight: Pipeline.Defaults.maxInflight, concurrency: DEFAULT_SINK_CONCURRENCY },
  { name: "tuned", tickMs: 10, maxInflight: 1_024, concurrency: 128 }
]

const run = (s: Settings, sink: Target) =>
  Effect.scoped(
    Effect.gen(function* () {
      const dir = tempDir("delivery")
      yield* Effect.addFinalizer(() => Effect.sync(dir.remove))
      const store = yield* makeRocksDbStore(dir.path)
      const b = yield* builder(store, { sinks: ["sink"], bodyBytes: BODY_BYTES })
      const ords = Array.from({ length: TENANTS }, (_, i) => i + 1)
      yield* b.add(dueHooks(ords, HOOKS, Date.now() - 1_000, 60_000))
      const before = yield* Effect.promise(() => sink.stats())
      const base = Layer.succeed(Store, store)
      const queueLayer = QueueLayer.layer.pipe(Layer.provide(base))
      const queue = yield* Effect.provide(Queue, queueLayer)
      log(`delivery-bench ${s.name}: ${int(HOOKS)} hooks queued; draining`)
      const started = performance.now()
      const drained = yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Layer.build(
            Pipeline.layer({
              tickMs: s.tickMs,
              maxInflight: s.maxInflight,
              sinks: [{ name: "sink", url: `${sink.url}/sink`, timeoutMs: 10_000, headers: {}, concurrency: s.concurrency, retry: defaultSchedule }]
            }).pipe(Layer.provide(Layer.mergeAll(base, Layer.succeed(Queue, queue), NodeHttpClient.layerUndici)))
          )
          let lastLog = performance.now()
          for (;;) {
            const c = yield* queue.aggregate
            if (TRACE && performance.now() - lastLog > 1000) {
              lastLog = performance.now()
              log(`${JSON.stringify(c)} rss ${mib(process.memoryUsage.rss())}`)
            }
            if (c.pending + c.scheduled + c.inflight === 0) return { ok: true, counters: c }
            if (performance.now() - started > DRAIN_TIMEOUT_MS) return { ok: false, counters: c }
            yield* Effect.sleep(Duration.millis(POLL_MS))
          }
        })
      )
      const seconds = (performance.now() - started) / 1000
      const after = yield* Effect.promise(() => sink.stats())
      const left = drained.counters.pending + drained.counters.scheduled + drained.counters.inflight
      return {
        settings: s,
        seconds,
        rate: (HOOKS - left - drained.counters.dead) / seconds,
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

main("delivery-bench", async () => {
  console.log(`delivery-bench: ${int(HOOKS)} hooks, 1 sink each, ${BODY_BYTES} B bodies, ${TENANTS} tenants; ${machine()}${quick ? "; --quick" : ""}`)
  const results = []
  for (const s of RUNS) {
    // A fresh sink per run, so its max concurrency is this run's.
    const sink = await startTarget({ status: 204 })
    try {
      results.push(await Effect.runPromise(run(s, sink)))
    } finally {
      await sink.close()
    }
  }
  table(
    ["run", "tickMs", "maxInflight", "sink concurrency", "deliveries/s", "seconds", "sink requests", "sink max concurrent", "sink connections (max open)", "dead", "left"],
    results.map((r) => [
      r.settings.name,
      int(r.settings.tickMs),
      int(r.settings.maxInflight),
      int(r.settings.concurrency),
      int(r.rate),
      fmt(r.seconds, 1),
      int(r.sinkRequests),
      int(r.sinkMaxConcurrent),
      `${int(r.sinkConnections)} (${int(r.sinkMaxOpen)})`,
      int(r.dead),
      int(r.left)
    ])
  )
  console.log(`bench process peak RSS ${mib(memoryOf("self").peak)}`)
  const d = results[0]!
  const t = results[1]!
  const clean = d.drained && d.dead === 0 && d.left === 0
  finish(
    "delivery-bench",
    clean && d.rate >= TARGET_RATE,
    `${int(d.rate)} deliveries/s with the defaults (target ${int(TARGET_RATE)}), sink max concurrency ${d.sinkMaxConcurrent}; ` +
      `tuned (tickMs ${t.settings.tickMs}, maxInflight ${t.settings.maxInflight}, concurrency ${t.settings.concurrency}) ${int(t.rate)}/s, ` +
      `sink max concurrency ${t.sinkMaxConcurrent}${clean ? "" : `; NOT drained cleanly (dead ${d.dead}, left ${d.left})`}`
  )
})
