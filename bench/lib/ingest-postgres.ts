/**
 * `ingest-bench --store postgres` (issue 40): ingest-bench's load against `ankusa serve` on
 * PostgreSQL (a throwaway PostgreSQL 15 cluster on this machine, fsync on, a fresh database a
 * round), beside the same load against `ankusa serve` on RocksDB and the bare node:http server.
 * The floor, measured in the same run: the bare server's CPU a request plus a plain script
 * (pg-floor.ts) writing as many hooks as the server took, the same ops (Deliveries.ingest) in
 * synced 64-hook batches, one multi-row statement each, to a fresh database. CPU a hook counts
 * the node's process and every PostgreSQL process. PASS: Ankusa on PostgreSQL's CPU a hook,
 * pooled over the rounds, at most MAX_PG_FLOOR_RATIO x the floor's, and every answer 202.
 */
import { Effect } from "effect"
import type { Cpu, ServerRun } from "../ingest-bench.js"
import { type IngestShape, ingestBatches } from "./ingest-batches.js"
import { benchCluster, PG_BOSS_REFERENCE } from "./pg-cpu.js"
import { type FloorCost, measureWithPg, plainWriter } from "./pg-floor.js"
import { finish, fmt, int, log, machine, quick, table } from "./report.js"

export const MAX_PG_FLOOR_RATIO = 1.5
const NAME = "ingest-bench-postgres"
/** The Writer's batches under 64 closed-loop connections hold at most 64 hooks. */
const FLOOR_BATCH = 64
const FLOOR_WARMUP_BATCHES = 20

export interface IngestDeps {
  readonly ankusa: (pg?: { readonly url: string; readonly postmaster: number }) => Promise<ServerRun>
  readonly bare: () => Promise<ServerRun>
  readonly hooksOf: (r: ServerRun) => number
  readonly perReq: (r: ServerRun, ms: number) => number
  readonly shape: IngestShape
  readonly rounds: number
  readonly load: { readonly connections: number; readonly seconds: number; readonly warmupSeconds: number }
}

interface Round {
  readonly rocks: ServerRun
  readonly pg: ServerRun
  readonly bare: ServerRun
  readonly floor: FloorCost & { readonly hooks: number; readonly buildUs: number }
}

/** `batches` synced 64-hook batches written by the plain script to a fresh database, after a warm-up. */
const pgFloor = (url: string, postmaster: number, shape: IngestShape, batches: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      const w = yield* plainWriter(url, "on")
      const build = ingestBatches(shape, FLOOR_BATCH)
      for (let i = 0; i < FLOOR_WARMUP_BATCHES; i++) yield* w.write(build())
      yield* w.exec("CHECKPOINT")
      let building = 0
      const hooks = batches * FLOOR_BATCH
      const cost = yield* Effect.promise(() =>
        measureWithPg(postmaster, hooks, () =>
          Effect.runPromise(
            Effect.gen(function* () {
              for (let i = 0; i < batches; i++) {
                const t0 = performance.now()
                const batch = build()
                building += performance.now() - t0
                yield* w.write(batch)
              }
            })
          )
        )
      )
      return { ...cost, hooks, buildUs: (building * 1000) / hooks }
    })
  )

export const ingestOnPostgres = async (d: IngestDeps): Promise<void> => {
  const cluster = await benchCluster(NAME)
  const postmaster = cluster.pid()
  const rounds: Array<Round> = []
  try {
    console.log(`${NAME}: ${machine()}${quick ? "; --quick" : ""}; PostgreSQL 15 on 127.0.0.1:${cluster.port} (fsync on), postmaster pid ${postmaster}`)
    for (let r = 0; r < d.rounds; r++) {
      const rocks = await d.ankusa()
      const url = await cluster.createDatabase()
      // Each window starts with the WAL of the one before written out.
      cluster.psql("postgres", "CHECKPOINT")
      const pg = await d.ankusa({ url, postmaster })
      const bare = await d.bare()
      // As many hooks as the server took, warm-up included.
      const batches = Math.ceil(d.hooksOf(pg) / FLOOR_BATCH)
      log(`the floor: a plain script writes ${int(batches * FLOOR_BATCH)} hooks in synced ${FLOOR_BATCH}-hook batches (the server took ${int(d.hooksOf(pg))})`)
      const floorUrl = await cluster.createDatabase()
      cluster.psql("postgres", "CHECKPOINT")
      const floor = await Effect.runPromise(pgFloor(floorUrl, postmaster, d.shape, batches))
      rounds.push({ rocks, pg, bare, floor })
    }
  } finally {
    await cluster.stop()
  }
  report(d, rounds)
}

const report = (d: IngestDeps, rounds: ReadonlyArray<Round>): void => {
  const pooled = (ms: (r: Round) => number, n: (r: Round) => number) =>
    (rounds.reduce((t, r) => t + ms(r), 0) * 1000) / Math.max(1, rounds.reduce((t, r) => t + n(r), 0))
  const server = (run: (r: Round) => ServerRun, ms: (c: Cpu) => number) => pooled((r) => ms(run(r).cpu), (r) => d.hooksOf(run(r)))
  const floorBy = (us: (f: Round["floor"]) => number) => pooled((r) => (us(r.floor) * r.floor.hooks) / 1000, (r) => r.floor.hooks)
  const pgNode = server((r) => r.pg, (c) => c.all)
  const pgPg = server((r) => r.pg, (c) => c.pg ?? 0)
  const pgAll = pgNode + pgPg
  const rocksAll = server((r) => r.rocks, (c) => c.all)
  const bareCpu = server((r) => r.bare, (c) => c.all)
  const writer = floorBy((f) => f.nodeUs + f.pgUs)
  const floor = bareCpu + writer
  const ratio = pgAll / Math.max(1e-9, floor)
  const mean = (f: (r: Round) => number) => rounds.reduce((t, r) => t + f(r), 0) / rounds.length
  const worst = (f: (r: Round) => number) => Math.max(...rounds.map(f))
  const answers = (r: ServerRun) =>
    Object.entries(r.load.statuses).map(([s, n]) => `${s}:${int(n)}`).join(" ") + (r.load.errors > 0 ? ` errors:${r.load.errors}` : "")
  console.log(
    `\nHTTP: ${d.load.connections} keep-alive connections, ${d.shape.bodyBytes} B bodies, ${d.shape.tenants} tenants, ${d.load.warmupSeconds} s warm-up + ${d.load.seconds} s measured, ${rounds.length} rounds; CPU over the whole load a hook`
  )
  table(
    ["run", "hooks/s", "p50 ms", "p99 ms", "CPU µs a hook: all", "node", "postgres", "host steal", "answers"],
    rounds.flatMap((r, i) => {
      const row = (name: string, run: ServerRun, pg: boolean) => [
        `${name} #${i + 1}`,
        int(run.load.rate),
        fmt(run.load.p50Ms, 2),
        fmt(run.load.p99Ms, 2),
        fmt(d.perReq(run, run.cpu.all + (run.cpu.pg ?? 0)), 1),
        fmt(d.perReq(run, run.cpu.all), 1),
        pg ? fmt(d.perReq(run, run.cpu.pg ?? 0), 1) : "-",
        run.cpu.steal === undefined ? "-" : `${fmt(100 * run.cpu.steal, 1)}%`,
        answers(run)
      ]
      const f = r.floor
      return [
        row("ankusa serve, RocksDB", r.rocks, false),
        row("ankusa serve, PostgreSQL", r.pg, true),
        row("bare node:http 202", r.bare, false),
        [`plain writer, synced ${FLOOR_BATCH}-hook batches #${i + 1}`, int(f.hooks / f.seconds), "-", "-", fmt(f.nodeUs + f.pgUs, 1), fmt(f.nodeUs, 1), fmt(f.pgUs, 1), "-", `${int(f.hooks)} hooks`]
      ]
    })
  )
  for (const [i, { pg }] of rounds.entries()) {
    if (pg.writer === undefined || pg.writer.commits === 0) continue
    const w = pg.writer
    console.log(`Writer on PostgreSQL #${i + 1}: ${int(w.commits)} commits, ${fmt(w.requests / w.commits, 1)} requests a commit, ${fmt((w.seconds * 1000) / w.commits, 2)} ms a commit.`)
  }
  console.log(
    `Floor: bare ${fmt(bareCpu, 1)} µs a request + the plain writer ${fmt(writer, 1)} µs a hook (this process ${fmt(floorBy((f) => f.nodeUs), 1)}, of it building the ops ${fmt(floorBy((f) => f.buildUs), 1)}; ` +
      `postgres ${fmt(floorBy((f) => f.pgUs), 1)}) = ${fmt(floor, 1)} µs.`
  )
  console.log(
    `Rule (issue 40): Ankusa on PostgreSQL ${fmt(pgAll, 1)} µs a hook (node ${fmt(pgNode, 1)}: main thread ${fmt(server((r) => r.pg, (c) => c.main), 1)}; postgres ${fmt(pgPg, 1)}) = ` +
      `${fmt(ratio, 2)} x the floor (at most ${MAX_PG_FLOOR_RATIO} x: ${fmt(MAX_PG_FLOOR_RATIO * floor, 1)} µs).`
  )
  const pgRate = mean((r) => r.pg.load.rate)
  const rocksRate = mean((r) => r.rocks.load.rate)
  console.log(
    `RocksDB against PostgreSQL on the same load: ${fmt(rocksAll, 1)} against ${fmt(pgAll, 1)} µs a hook (${fmt(pgAll / rocksAll, 2)} x), ${int(rocksRate)} against ${int(pgRate)} hooks/s; bare node:http ${int(mean((r) => r.bare.load.rate))} req/s.`
  )
  console.log(PG_BOSS_REFERENCE)
  const all202 = rounds.every((r) => Object.keys(r.pg.load.statuses).every((s) => s === "202") && r.pg.load.errors === 0)
  finish(
    NAME,
    ratio <= MAX_PG_FLOOR_RATIO && all202,
    `CPU ${fmt(pgAll, 1)} µs a hook on PostgreSQL (node ${fmt(pgNode, 1)}, postgres ${fmt(pgPg, 1)}), ${fmt(ratio, 2)} x the floor ${fmt(floor, 1)} µs ` +
      `(rule <= ${MAX_PG_FLOOR_RATIO}; bare ${fmt(bareCpu, 1)} + plain writer ${fmt(writer, 1)}: node ${fmt(floorBy((f) => f.nodeUs), 1)}, postgres ${fmt(floorBy((f) => f.pgUs), 1)})` +
      `${all202 ? ", every answer 202" : "; NOT every answer was 202"}; ${int(pgRate)} hooks/s, p99 ${fmt(worst((r) => r.pg.load.p99Ms), 2)} ms (not gated); ` +
      `RocksDB on the same load ${fmt(rocksAll, 1)} µs a hook, ${int(rocksRate)} hooks/s; pg-boss 12 (quoted reference) about 2,200 requests/s at about 700 µs`
  )
}
