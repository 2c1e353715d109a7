/**
 * The shared harness of bench/gauges-bench.ts and bench/dispatch-tick-bench.ts
 * (TEN-1 §12): one tick, measured on the RocksDB store along two axes,
 *
 * - rows: 10³, 10⁴, 10⁵, 10⁶ due rows over 8 active tenants;
 * - tenants: 10, 10³, 10⁵ tenants, 8 of them active (ACTIVE_ROWS due rows
 *   between them), every other one holding one row scheduled a day ahead or
 *   dead (its marker in the future, or none);
 *
 * with LOAD_RATE merging batches per second committed to the same store
 * during every measurement. A cell is the 10th percentile of TICKS ticks, the
 * lowest of ROUNDS rounds. Pass: the slowest cell is within 2× of the fastest
 * (counted as at least 1 ms) and under 50 ms, and the load kept its rate.
 *
 * Each axis is one store grown between cells (rows are added, never rebuilt).
 * Due times are spread over the SPREAD_MS before a fixed instant, so the
 * marker count (tenants × distinct seconds, ≤ 8 × 60) is the same in every
 * cell once the rows cover each second: a cell varies the rows or the
 * tenants, nothing else.
 */
import { Duration, Effect, Fiber, Layer } from "effect"
import * as Deliveries from "../../src/domain/deliveries.js"
import { Queue, type QueueShape } from "../../src/queue/queue.js"
import * as QueueLayer from "../../src/queue/queue.js"
import { makeRocksDbStore } from "../../src/store/rocksdb.js"
import { Store, type StoreError, type StoreShape } from "../../src/store/store.js"
import { tempDir } from "./proc.js"
import { builder, dueHooks, type DueRow, idleTenantHooks } from "./queued-store.js"
import { finish, fmt, int, log, machine, main, percentile, quick, table } from "./report.js"

/** Tenants with work due in every cell. */
export const ACTIVE_TENANTS = 8
/** Due rows spread over the active tenants on the tenants axis. */
export const ACTIVE_ROWS = 10_000
/** Due times lie in the SPREAD_MS before the axis' fixed instant (a backlog a minute old). */
export const SPREAD_MS = 60_000
export const ROW_CELLS = quick ? [1_000, 10_000, 100_000] : [1_000, 10_000, 100_000, 1_000_000]
export const TENANT_CELLS = quick ? [10, 1_000, 10_000] : [10, 1_000, 100_000]
export const TICKS = quick ? 300 : 1_000
export const ROUNDS = 3
/** Ticks run (and thrown away) before each cell's rounds. */
export const WARMUP_TICKS = 50
/** Merging batches committed per second during the measurement (TEN-1 §4, §12). */
export const LOAD_RATE = 3_000
/** The load loop wakes this often and commits what it owes. */
export const LOAD_SLOT_MS = 10
/** Due rows the load loop moves back and forth (claim, then recover): every batch is a real transition. */
export const LOAD_POOL = 64
/** Batches one wake of the load loop sends at most (it catches up over a few wakes after a stall). */
export const LOAD_MAX_PER_SLOT = 256
/** The load counts as kept when it reached this share of LOAD_RATE. */
export const LOAD_KEPT = 0.9
/** Pass rule (TEN-1 §12). */
export const MAX_RATIO = 2
export const MIN_FASTEST_MS = 1
export const MAX_CELL_MS = 50

export interface TickSpec {
  readonly name: string
  /** One line: what a tick is. */
  readonly what: string
  /** The tick, built once per store. */
  readonly make: (store: StoreShape, queue: QueueShape) => Effect.Effect<Effect.Effect<unknown, StoreError>, never, never>
}

interface Cell {
  readonly axis: string
  readonly size: string
  readonly rows: number
  readonly tenants: number
  readonly p10: number
  readonly rounds: ReadonlyArray<number>
  readonly p50: number
  readonly loadRate: number
  readonly buildSeconds: number
}

/** Back to the event loop (timers and worker replies run), not just the microtask queue. */
const yieldToLoop = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/**
 * LOAD_RATE batches a second: each claims or recovers one pool row (a delete, a put,
 * a marker put, four counter merges: the tenant's and the aggregate's), alternately.
 */
const loadLoop = (store: StoreShape, pool: ReadonlyArray<DueRow>, counter: { batches: number }) =>
  Effect.gen(function* () {
    const claimed = new Array<boolean>(pool.length).fill(false)
    let next = 0
    const start = performance.now()
    for (;;) {
      const owed = Math.floor(((performance.now() - start) / 1000) * LOAD_RATE) - counter.batches
      const writes: Array<Effect.Effect<void, StoreError>> = []
      for (let i = 0; i < Math.min(owed, LOAD_MAX_PER_SLOT); i++) {
        const k = next++ % pool.length
        const r = pool[k]!
        const t = claimed[k]
          ? Deliveries.recover({ ord: r.ord, seq: r.seq, sink: r.sink }, r.size, r.at)
          : Deliveries.claim({ ord: r.ord, at: r.at, seq: r.seq, sink: r.sink }, { size: r.size, kind: 0 })
        claimed[k] = !claimed[k]
        writes.push(store.write(Deliveries.batch([t]), { sync: false }))
      }
      // Sent together; the committer keeps call order, so a row's claim lands before its recovery.
      yield* Effect.all(writes, { concurrency: "unbounded", discard: true })
      counter.batches += writes.length
      yield* Effect.sleep(Duration.millis(LOAD_SLOT_MS))
    }
  })

const measureCell = (tick: Effect.Effect<unknown, StoreError>, store: StoreShape, pool: ReadonlyArray<DueRow>) =>
  Effect.gen(function* () {
    for (let i = 0; i < WARMUP_TICKS; i++) {
      yield* tick
      yield* yieldToLoop
    }
    const counter = { batches: 0 }
    const started = performance.now()
    const load = yield* Effect.forkChild(loadLoop(store, pool, counter))
    const rounds: Array<number> = []
    const all: Array<number> = []
    for (let r = 0; r < ROUNDS; r++) {
      const times: Array<number> = []
      for (let i = 0; i < TICKS; i++) {
        const t0 = performance.now()
        yield* tick
        times.push(performance.now() - t0)
        yield* yieldToLoop
      }
      rounds.push(percentile(times, 10))
      all.push(...times)
    }
    yield* Fiber.interrupt(load)
    const seconds = (performance.now() - started) / 1000
    return { p10: Math.min(...rounds), rounds, p50: percentile(all, 50), loadRate: counter.batches / seconds }
  })

const withStore = <A>(f: (store: StoreShape, queue: QueueShape) => Effect.Effect<A, StoreError>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const dir = tempDir("tick-bench")
      yield* Effect.addFinalizer(() => Effect.sync(dir.remove))
      const store = yield* makeRocksDbStore(dir.path)
      const queue = yield* Effect.provide(Queue, QueueLayer.layer.pipe(Layer.provide(Layer.succeed(Store, store))))
      return yield* f(store, queue)
    })
  )

/** A store builder with the active tenants and the load loop's pool of due rows (half a spread ago). */
const seedActive = (store: StoreShape) =>
  Effect.gen(function* () {
    const b = yield* builder(store)
    const ords = Array.from({ length: ACTIVE_TENANTS }, (_, i) => i + 1)
    const at = Date.now()
    const pool: Array<DueRow> = []
    yield* b.add(dueHooks(ords, LOAD_POOL, at - SPREAD_MS / 2, 1), pool)
    return { b, ords, at, pool }
  })

const rowsAxis = (spec: TickSpec) =>
  withStore((store, queue) =>
    Effect.gen(function* () {
      const { b, ords, at, pool } = yield* seedActive(store)
      const tick = yield* spec.make(store, queue)
      const cells: Array<Cell> = []
      for (const size of ROW_CELLS) {
        const t0 = performance.now()
        yield* b.add(dueHooks(ords, size - b.rows(), at, SPREAD_MS))
        const buildSeconds = (performance.now() - t0) / 1000
        log(`${spec.name}: rows ${int(b.rows())} built in ${fmt(buildSeconds, 1)} s; measuring`)
        const m = yield* measureCell(tick, store, pool)
        cells.push({ axis: "rows", size: int(size), rows: b.rows(), tenants: ACTIVE_TENANTS, buildSeconds, ...m })
      }
      return cells
    })
  )

const tenantsAxis = (spec: TickSpec) =>
  withStore((store, queue) =>
    Effect.gen(function* () {
      const { b, ords, at, pool } = yield* seedActive(store)
      yield* b.add(dueHooks(ords, ACTIVE_ROWS - LOAD_POOL, at, SPREAD_MS))
      const tick = yield* spec.make(store, queue)
      const cells: Array<Cell> = []
      for (const tenants of TENANT_CELLS) {
        const t0 = performance.now()
        yield* b.add(idleTenantHooks(b.nextOrd(), tenants, at))
        const buildSeconds = (performance.now() - t0) / 1000
        log(`${spec.name}: tenants ${int(b.nextOrd() - 1)} (rows ${int(b.rows())}) built in ${fmt(buildSeconds, 1)} s; measuring`)
        const m = yield* measureCell(tick, store, pool)
        cells.push({ axis: "tenants", size: int(tenants), rows: b.rows(), tenants: b.nextOrd() - 1, buildSeconds, ...m })
      }
      return cells
    })
  )

const summary = (pass: boolean, detail: string) => ({ pass, detail })

/** The bench as a script: both axes, the table, the summary line, the exit code. */
export const runScript = (spec: TickSpec): void =>
  main(spec.name, async () => {
    const r = await Effect.runPromise(run(spec))
    finish(spec.name, r.pass, r.detail)
  })

const run = (spec: TickSpec) =>
  Effect.gen(function* () {
    console.log(`${spec.name}: ${spec.what}`)
    console.log(
      `cell = p10 of ${TICKS} ticks, lowest of ${ROUNDS} rounds; ${int(LOAD_RATE)} merging batches/s committed meanwhile; ` +
        `${ACTIVE_TENANTS} active tenants; ${quick ? "--quick sizes; " : ""}${machine()}`
    )
    const cells = [...(yield* rowsAxis(spec)), ...(yield* tenantsAxis(spec))]
    table(
      ["axis", "cell", "rows", "tenants", "p10 ms", "rounds (p10 ms)", "p50 ms", "load batches/s", "build s"],
      cells.map((c) => [
        c.axis,
        c.size,
        int(c.rows),
        int(c.tenants),
        fmt(c.p10, 3),
        c.rounds.map((x) => fmt(x, 3)).join(" "),
        fmt(c.p50, 3),
        int(c.loadRate),
        fmt(c.buildSeconds, 1)
      ])
    )
    const fastest = Math.min(...cells.map((c) => c.p10))
    const slowest = Math.max(...cells.map((c) => c.p10))
    const floor = Math.max(fastest, MIN_FASTEST_MS)
    const loadMin = Math.min(...cells.map((c) => c.loadRate))
    const shape = slowest <= MAX_RATIO * floor && slowest < MAX_CELL_MS
    const loadKept = loadMin >= LOAD_KEPT * LOAD_RATE
    const why = [
      shape ? "" : `slowest ${fmt(slowest, 3)} ms exceeds ${MAX_RATIO}x max(fastest, ${MIN_FASTEST_MS} ms) or ${MAX_CELL_MS} ms`,
      loadKept ? "" : `load reached only ${int(loadMin)} of ${int(LOAD_RATE)} batches/s`
    ].filter((s) => s !== "")
    return summary(
      shape && loadKept,
      `cells p10 ${fmt(fastest, 3)}..${fmt(slowest, 3)} ms (slowest/max(fastest,1ms) = ${fmt(slowest / floor, 2)}), ` +
        `load >= ${int(loadMin)} batches/s${why.length > 0 ? `; ${why.join("; ")}` : ""}`
    )
  })
