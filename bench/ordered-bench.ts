/**
 * Issue 44 `bench/ordered-bench`: ordered delivery by key (docs/delivery.md "Ordered delivery")
 * against unordered delivery to the same sink, on the RocksDB store, by the real pipeline (shipped
 * defaults, sink concurrency 16) to a local sink in its own process answering 204
 * (bench/lib/target-server.ts).
 *
 * Each drain queues HOOKS hooks of TENANTS tenants over KEYS ordering keys (every hook has a key;
 * the keys' hooks interleaved as they would arrive), as the Writer does: its commit batches of
 * BATCH hooks, each followed by the lanes' promotion (src/queue/lanes.ts). The same hooks go to an
 * unordered sink (the baseline) and to an ordered one; the two alternate, unordered, ordered, PAIRS
 * (3) times, so that a shared machine's load falls on both, after one unmeasured full drain of
 * each; a rate is the mean of its PAIRS drains (from the first tick to the last
 * outcome committed).
 * PASS needs every row delivered, none dead, and ordered ≥ MIN_RATIO × unordered.
 *
 * Then one hot key: HOT hooks of one key to the ordered sink, alone. Its rate is one delivery a
 * round trip (call, outcome commit, the next handed off in that commit): it prints the ms a delivery
 * beside a bare sequential call's round trip to the same sink, and PASS needs its sink (a process
 * of its own) to have seen one call open at once, never two.
 * Run: npx tsx bench/ordered-bench.ts [--quick] [--hooks N] [--hot N] [--tenants N]
 */
import { Duration, Effect, Layer } from "effect"
import { Agent, request } from "node:http"
import * as Deliveries from "../src/domain/deliveries.js"
import { encodeEnvelope } from "../src/domain/envelope.js"
import type * as K from "../src/domain/keys.js"
import type { Op } from "../src/domain/ops.js"
import * as Ordering from "../src/domain/ordering.js"
import * as Tenants from "../src/domain/tenants.js"
import { defaultSchedule } from "../src/domain/retry-schedule.js"
import * as Pipeline from "../src/delivery/pipeline.js"
import { DEFAULT_SINK_CONCURRENCY } from "../src/delivery/sink-client.js"
import * as QueueLayer from "../src/queue/queue.js"
import { Queue, type QueueShape } from "../src/queue/queue.js"
import * as Wake from "../src/queue/wake.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import { Store, type StoreShape } from "../src/store/store.js"
import { tempDir } from "./lib/proc.js"
import { arg, finish, fmt, int, log, main, quick } from "./lib/report.js"
import { startTarget, type Target } from "./lib/target-server.js"

const HOOKS = arg("hooks", quick ? 5_000 : 20_000)
const HOT = arg("hot", quick ? 500 : 2_000)
/** `--unkeyed`: the unordered baseline's hooks carry no ordering key (they then skip the lanes' settle). */
const UNKEYED = process.argv.includes("--unkeyed")
/** Measured drains of each kind, alternating; one unmeasured full drain of each kind goes first. */
const PAIRS = 3
const KEYS = 1_000
const TENANTS = arg("tenants", 100)
const BATCH = 500
const BODY = Buffer.alloc(1_024, 0x61)
export const MIN_RATIO = 0.8
const DRAIN_TIMEOUT_MS = 3 * 60_000
const SPREAD_MS = 60_000
const POLL_MS = 10

interface Drain {
  readonly rate: number
  readonly delivered: number
  readonly dead: number
  readonly ms: number
}

/** Hooks `n` of key `k % keys`, as the Writer commits them: `?W` rows for the ordered sink, then the lanes' promotion. */
const queueHooks = (store: StoreShape, queue: QueueShape, count: number, keys: number, ordered: boolean) =>
  Effect.gen(function* () {
    const alloc: Array<Op> = []
    for (let t = 1; t <= TENANTS; t++) alloc.push(...Tenants.allocate(`tenant-${t}`, t))
    alloc.push(Tenants.nextOrdOp(TENANTS + 1))
    let seq = 1
    const sink = "s"
    for (let from = 0; from < count; from += BATCH) {
      const ts: Array<Deliveries.Transition> = []
      const lanes: Array<K.LaneRef> = []
      const now = Date.now()
      for (let i = from; i < Math.min(count, from + BATCH); i++) {
        const key = `order-${i % keys}`
        const ord = 1 + ((i % keys) % TENANTS)
        const envelope = encodeEnvelope({
          id: `h_${seq}`,
          tenantId: `tenant-${ord}`,
          sourceId: "bench",
          receivedAt: now,
          contentType: "application/json",
          headers: {},
          sinks: [sink],
          idempotencyKey: null,
          ...(ordered || !UNKEYED ? { orderingKey: key } : {}),
          body: BODY
        })
        const lane = ordered ? Ordering.laneOf(sink, key) : undefined
        if (lane !== undefined) lanes.push({ ord, lane })
        // Due over the last minute, as delivery-bench queues them (rows of one instant crowd one marker second).
        const at = now - SPREAD_MS + Math.floor((i * SPREAD_MS) / count)
        ts.push(Deliveries.ingest({ seq: seq++, ord, envelope, sinkCount: 1, at, lanes: [lane], archive: false }))
      }
      yield* store.write(Deliveries.batch(ts, from === 0 ? alloc : []), { sync: true })
      yield* queue.promote(lanes, now)
    }
  })

/** One drain on a fresh store: every row queued first, then the pipeline from its first tick to the last outcome. */
const drain = (target: Target, count: number, keys: number, ordered: boolean) =>
  Effect.scoped(
    Effect.gen(function* () {
      const dir = tempDir("ordered")
      yield* Effect.addFinalizer(() => Effect.sync(dir.remove))
      const store = yield* makeRocksDbStore(dir.path)
      const base = Layer.succeed(Store, store)
      const queue = yield* Effect.provide(Queue, QueueLayer.layer.pipe(Layer.provide(base)))
      yield* queueHooks(store, queue, count, keys, ordered)
      const sink = { url: `${target.url}/sink`, timeoutMs: 10_000, headers: {}, concurrency: DEFAULT_SINK_CONCURRENCY, retry: defaultSchedule }
      const started = performance.now()
      const counters = yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Layer.build(
            // One sink, ordered or not: a second, idle one would count its places in the pipeline's wake threshold.
            Pipeline.layer({ sinks: [{ ...sink, name: "s", ...(ordered ? { ordered: { onDead: "skip" as const } } : {}) }] }).pipe(Layer.provide(Layer.mergeAll(base, Layer.succeed(Queue, queue), Wake.layer)))
          )
          for (;;) {
            const c = yield* queue.aggregate
            if (c.pending + c.scheduled + c.inflight + c.waiting === 0 || performance.now() - started > DRAIN_TIMEOUT_MS) return c
            yield* Effect.sleep(Duration.millis(POLL_MS))
          }
        })
      )
      const ms = performance.now() - started
      const delivered = count - counters.pending - counters.scheduled - counters.inflight - counters.waiting - counters.dead
      return { rate: (delivered / ms) * 1000, delivered, dead: counters.dead, ms } satisfies Drain
    })
  )

/** Sequential bare calls to the sink (keep-alive): one round trip, as the hot key's floor. */
const bareRoundTripMs = (target: Target, calls: number) =>
  Effect.promise(async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const url = new URL(`${target.url}/sink`)
    const call = () =>
      new Promise<void>((resolve, reject) => {
        const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
          res.resume()
          res.on("end", () => resolve())
        })
        req.on("error", reject)
        req.end(BODY)
      })
    for (let i = 0; i < 100; i++) await call()
    const t0 = performance.now()
    for (let i = 0; i < calls; i++) await call()
    agent.destroy()
    return (performance.now() - t0) / calls
  })

/** The runs, in a scope that closes both sinks' processes before the summary line exits. */
const measure = Effect.scoped(
  Effect.gen(function* () {
    const target = yield* Effect.acquireRelease(Effect.promise(() => startTarget({ status: 204 })), (t) => Effect.promise(() => t.close()))
    log(`ordered-bench: ${int(HOOKS)} hooks over ${int(KEYS)} keys of ${TENANTS} tenants, 1 KiB bodies, pipeline defaults, sink concurrency ${DEFAULT_SINK_CONCURRENCY}`)
    // One unmeasured drain of each kind first: the pipeline's code compiled, the sink's connections warm.
    // A full drain of each: shorter ones left the first measured unordered drain slower than the rest.
    for (const ordered of [false, true]) yield* drain(target, HOOKS, KEYS, ordered)
    const runs: Array<{ readonly ordered: boolean; readonly d: Drain }> = []
    for (const ordered of Array.from({ length: 2 * PAIRS }, (_, i) => i % 2 === 1)) {
      const d = yield* drain(target, HOOKS, KEYS, ordered)
      log(`  ${ordered ? "ordered  " : "unordered"}: ${int(d.rate)} deliveries/s (${int(d.delivered)} in ${int(d.ms)} ms, ${d.dead} dead)`)
      runs.push({ ordered, d })
    }
    const mean = (ordered: boolean) => runs.filter((r) => r.ordered === ordered).reduce((n, r) => n + r.d.rate, 0) / PAIRS
    // The hot key's own sink process: the most calls it saw open at once is the hot key's.
    const hotTarget = yield* Effect.acquireRelease(Effect.promise(() => startTarget({ status: 204 })), (t) => Effect.promise(() => t.close()))
    const hot = yield* drain(hotTarget, HOT, 1, true)
    const hotOpen = (yield* Effect.promise(() => hotTarget.stats())).maxConcurrent
    const rtt = yield* bareRoundTripMs(target, 500)
    const hotMs = hot.ms / Math.max(1, hot.delivered)
    log(`  hot key: ${int(hot.rate)} deliveries/s, ${fmt(hotMs)} ms a delivery (one round trip: call, outcome commit with the next handed off); a bare sequential call ${fmt(rtt)} ms; at most ${hotOpen} call open at once`)
    return {
      unordered: mean(false),
      ordered: mean(true),
      complete: runs.every((r) => r.d.delivered === HOOKS && r.d.dead === 0) && hot.delivered === HOT,
      hot,
      hotMs,
      hotOpen,
      rtt
    }
  })
)

main("ordered-bench", async () => {
  const r = await Effect.runPromise(measure)
  const ratio = r.ordered / r.unordered
  finish(
    "ordered-bench",
    r.complete && ratio >= MIN_RATIO && r.hotOpen === 1,
    `ordered over ${KEYS} keys ${int(r.ordered)}/s = ${fmt(ratio)} × unordered ${int(r.unordered)}/s (need ≥ ${MIN_RATIO}); ` +
      `hot key ${int(r.hot.rate)}/s, ${fmt(r.hotMs)} ms a delivery vs a bare call ${fmt(r.rtt)} ms, ${r.hotOpen} call open at once (need 1)` +
      (r.complete ? "" : "; not every row delivered")
  )
})
