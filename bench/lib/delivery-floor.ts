/**
 * The parts of a delivery measured alone (bench/delivery-bench.ts prints them beside the drain;
 * docs/testing.md "delivery-bench"): the sinks' own HTTP/1.1 client in a loop (src/delivery/http1.ts,
 * what a drain's calls cost without the pipeline around them), and TEN-1's transitions of a
 * delivery without any call (the due rows read, the claim written, the hooks read and decoded, the
 * outcome written: `Queue.claim`, `Queue.envelopes`, `Queue.settle` on a fresh RocksDB store of
 * the drain's shape). Their sum is what a delivery costs before the pipeline's own work: the
 * tick's planning and marker cleanup, the sinks' places, fairness and breakers, the outcome
 * committer, metrics.
 */
import { Effect, Layer } from "effect"
import * as Http1 from "../../src/delivery/http1.js"
import type { Outcome, QueueShape } from "../../src/queue/queue.js"
import { Queue } from "../../src/queue/queue.js"
import * as QueueLayer from "../../src/queue/queue.js"
import { makeRocksDbStore } from "../../src/store/rocksdb.js"
import { Store } from "../../src/store/store.js"
import { mainThreadCpuUs } from "./bare-client.js"
import { tempDir } from "./proc.js"
import { builder, dueHooks } from "./queued-store.js"

export interface PartCost {
  /** CPU of this process (all threads) a call or a delivery, µs. */
  readonly cpuUs: number
  /** The main thread's alone, µs (undefined without /proc). */
  readonly mainUs: number | undefined
  /** Calls or deliveries a second. */
  readonly rate: number
}

/** CPU and wall time of `work`, which does `n` calls or deliveries. */
export const measure = async (n: number, work: () => Promise<void>): Promise<PartCost> => {
  const cpu0 = process.cpuUsage()
  const main0 = mainThreadCpuUs()
  const t0 = performance.now()
  await work()
  const seconds = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  const main1 = mainThreadCpuUs()
  return { cpuUs: (cpu.user + cpu.system) / n, mainUs: main0 === undefined || main1 === undefined ? undefined : (main1 - main0) / n, rate: n / seconds }
}

/** A closed loop of `concurrency` POSTs of `body` to `url` through `pool`; each answer must be a 2xx. Returns the loop of `calls` calls. */
export const clientLoop = (pool: Http1.Pool, url: URL, body: Uint8Array, concurrency: number) => {
  const head =
    `POST ${url.pathname} HTTP/1.1\r\nhost: ${url.host}\r\nuser-agent: ankusa\r\nwebhook-id: msg_1\r\nwebhook-timestamp: 1\r\n` +
    `content-type: application/json\r\ncontent-length: ${body.byteLength}\r\n\r\n`
  return (calls: number) =>
    new Promise<void>((done, fail) => {
      let started = 0
      let ended = 0
      const one = () => {
        started++
        pool.send(head, body, (e) => {
          if (e._tag !== "Answer" || e.status < 200 || e.status >= 300) return fail(new Error(`client loop: ${JSON.stringify(e)}`))
          ended++
          if (started < calls) one()
          else if (ended === calls) done()
        })
      }
      for (let i = 0; i < Math.min(concurrency, calls); i++) one()
    })
}

/** The sinks' client alone: `calls` POSTs at `concurrency`, after `warmup` of them. */
export const ownClientLoop = async (url: string, body: Uint8Array, calls: number, warmup: number, concurrency: number): Promise<PartCost> => {
  const u = new URL(url)
  const pool = Http1.pool({ secure: false, hostname: u.hostname, port: Number(u.port), maxSockets: concurrency, idleMs: 4_000 })
  try {
    const loop = clientLoop(pool, u, body, concurrency)
    await loop(warmup)
    return await measure(calls, () => loop(calls))
  } finally {
    pool.close()
  }
}

export interface StoreAloneShape {
  readonly tenants: number
  readonly bodyBytes: number
  /** Rows claimed and settled first, not measured (as the drain's warm-up). */
  readonly warmup: number
  readonly rows: number
  /** Tenants a claim visits and rows it takes from each (the defaults' drain: about 4 of about 50). */
  readonly visits: number
  readonly perVisit: number
  /** Outcomes a settle commits (the defaults' drain: about 90 a commit). */
  readonly settleBatch: number
}

/**
 * TEN-1's transitions of a drain without calls, on `queue`: claims of `visits × perVisit` rows
 * (each tenant from where its last claim ended), each claim's hooks read and decoded, outcomes
 * settled as delivered `settleBatch` at a time. `drain(n)` handles at least `n` rows and returns how many.
 */
export const transitionsLoop = (queue: QueueShape, shape: StoreAloneShape, ords: ReadonlyArray<number>) => {
  const floors = new Map<number, number>()
  let turn = 0
  const pending: Array<Outcome> = []
  return (n: number) =>
    Effect.gen(function* () {
      let done = 0
      while (done < n) {
        const requests = Array.from({ length: shape.visits }, () => {
          const ord = ords[turn++ % ords.length]!
          return { ord, floorAt: floors.get(ord) ?? 0, limit: shape.perVisit }
        })
        const visits = yield* queue.claim(Date.now(), requests, shape.visits * shape.perVisit, Number.MAX_SAFE_INTEGER)
        const rows = visits.flatMap((v) => v.rows)
        for (const v of visits) if (v.rows.length > 0) floors.set(v.ord, v.rows[v.rows.length - 1]!.ref.at)
        if (rows.length === 0 && visits.every((v) => v.drained)) return yield* Effect.die(new Error(`store alone: drained after ${done} of ${n} rows`))
        const envs = yield* queue.envelopes([...new Set(rows.map((r) => r.ref.seq))])
        for (const r of rows) {
          if (envs.get(r.ref.seq) === undefined) return yield* Effect.die(new Error(`store alone: hook ${r.ref.seq} not read`))
          pending.push({ _tag: "Delivered", ref: { ord: r.ref.ord, seq: r.ref.seq, sink: r.ref.sink }, size: r.value.size })
        }
        while (pending.length >= shape.settleBatch) yield* queue.settle(pending.splice(0, shape.settleBatch))
        done += rows.length
      }
      if (pending.length > 0) yield* queue.settle(pending.splice(0))
      return done
    })
}

/**
 * TEN-1's transitions of `rows` deliveries without a call: claims of `visits × perVisit` rows
 * (each tenant from where its last claim ended), each claim's hooks read and decoded, the
 * outcomes settled as delivered `settleBatch` at a time, on a fresh store of `warmup + rows`
 * due rows. CPU a delivery over the rows after the warm-up.
 */
export const storeAlone = (shape: StoreAloneShape): Effect.Effect<PartCost, unknown> =>
  Effect.scoped(
    Effect.gen(function* () {
      const dir = tempDir("delivery-floor")
      yield* Effect.addFinalizer(() => Effect.sync(dir.remove))
      const store = yield* makeRocksDbStore(dir.path)
      const b = yield* builder(store, { sinks: ["sink"], bodyBytes: shape.bodyBytes })
      const ords = Array.from({ length: shape.tenants }, (_, i) => i + 1)
      yield* b.add(dueHooks(ords, shape.warmup + shape.rows, Date.now() - 1_000, 60_000))
      const queue = yield* Effect.provide(Queue, QueueLayer.layer.pipe(Layer.provide(Layer.succeed(Store, store))))
      const drain = transitionsLoop(queue, shape, ords)
      yield* drain(shape.warmup)
      let measured = 0
      const cost = yield* Effect.promise(() =>
        measure(shape.rows, async () => {
          measured = await Effect.runPromise(drain(shape.rows))
        })
      )
      const k = shape.rows / measured
      return { cpuUs: cost.cpuUs * k, mainUs: cost.mainUs === undefined ? undefined : cost.mainUs * k, rate: cost.rate / k }
    })
  )
