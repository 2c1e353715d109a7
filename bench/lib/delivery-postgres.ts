/**
 * `delivery-bench --store postgres` (issue 40): the defaults' drain (the same queued hooks, sink
 * and pipeline settings) on RocksDB and on PostgreSQL (a throwaway PostgreSQL 15 cluster on this
 * machine, fsync on, a fresh database a drain), each between two bare client loops. The floor,
 * in the same run: the bare loops' mean CPU a call around the PostgreSQL drain, plus the drain's
 * claim and settle batches written by a plain script (pg-delivery-floor.ts). CPU a delivery
 * counts this process and every PostgreSQL process. PASS: every row delivered, none dead, and
 * the CPU a delivery on PostgreSQL at most MAX_PG_FLOOR_RATIO x the floor's.
 */
import { Effect } from "effect"
import type { BareResult } from "./bare-client.js"
import type { StoreAloneShape } from "./delivery-floor.js"
import { benchCluster, PG_BOSS_REFERENCE } from "./pg-cpu.js"
import { pgTransitionsFloor } from "./pg-delivery-floor.js"
import { finish, fmt, int, log, machine, quick, table } from "./report.js"
import { startTarget, type Target } from "./target-server.js"
import type { run as runDrain, Settings } from "../delivery-bench.js"

export const MAX_PG_FLOOR_RATIO = 1.5
const NAME = "delivery-bench-postgres"

type Drain = Effect.Success<ReturnType<typeof runDrain>>
type Mean = { readonly rate: number; readonly cpuUsPerCall: number; readonly failed: number }

export interface DeliveryDeps {
  readonly run: typeof runDrain
  readonly bareRun: (s: Settings, sink: Target) => Promise<BareResult>
  readonly meanOf: (a: BareResult, b: BareResult) => Mean
  readonly defaults: Settings
  readonly shape: StoreAloneShape
}

/** A drain between two bare loops, on a fresh sink and bare sink. */
const between = async (d: DeliveryDeps, pg?: { readonly url: string; readonly postmaster: number }) => {
  const sink = await startTarget({ status: 204 })
  const bareSink = await startTarget({ status: 204 })
  try {
    const before = await d.bareRun(d.defaults, bareSink)
    const r = await Effect.runPromise(d.run(d.defaults, sink, pg))
    const after = await d.bareRun(d.defaults, bareSink)
    return { r, bare: d.meanOf(before, after), bares: [before, after] as const }
  } finally {
    await sink.close()
    await bareSink.close()
  }
}

export const deliveryOnPostgres = async (d: DeliveryDeps): Promise<void> => {
  const cluster = await benchCluster(NAME)
  const postmaster = cluster.pid()
  console.log(
    `${NAME}: ${int(d.shape.rows)} hooks (${int(d.shape.warmup)} to warm up), 1 sink each, ${d.shape.bodyBytes} B bodies, ${d.shape.tenants} tenants; ` +
      `${machine()}${quick ? "; --quick" : ""}; PostgreSQL 15 on 127.0.0.1:${cluster.port} (fsync on), postmaster pid ${postmaster}`
  )
  let rocks, pg, floor
  try {
    rocks = await between(d)
    cluster.psql("postgres", "CHECKPOINT")
    pg = await between(d, { url: await cluster.createDatabase(), postmaster })
    log(`${NAME}: the floor: the drain's claim and settle batches written by a plain script`)
    const url = await cluster.createDatabase()
    cluster.psql("postgres", "CHECKPOINT")
    floor = await Effect.runPromise(pgTransitionsFloor(url, postmaster, d.shape))
  } finally {
    await cluster.stop()
  }
  const total = (x: Drain) => x.cpuUsPerDelivery + x.pgCpuUsPerDelivery
  table(
    ["drain (defaults)", "deliveries/s", "bare calls/s (before, after)", "CPU µs a delivery: all", "node", "of it main thread", "postgres", "bare µs a call (before, after)", "seconds", "dead", "left"],
    [
      ["RocksDB", rocks, false] as const,
      ["PostgreSQL", pg, true] as const
    ].map(([name, x, onPg]) => [
      name,
      int(x.r.rate),
      `${int(x.bares[0].rate)}, ${int(x.bares[1].rate)}${x.bare.failed > 0 ? ` (${int(x.bare.failed)} failed)` : ""}`,
      fmt(total(x.r), 1),
      fmt(x.r.cpuUsPerDelivery, 1),
      x.r.mainCpuUsPerDelivery === undefined ? "-" : fmt(x.r.mainCpuUsPerDelivery, 1),
      onPg ? fmt(x.r.pgCpuUsPerDelivery, 1) : "-",
      `${fmt(x.bares[0].cpuUsPerCall, 1)}, ${fmt(x.bares[1].cpuUsPerCall, 1)}`,
      fmt(x.r.seconds, 1),
      int(x.r.dead),
      int(x.r.left)
    ])
  )
  const writer = floor.nodeUs + floor.pgUs
  const floorUs = pg.bare.cpuUsPerCall + writer
  const ratio = total(pg.r) / Math.max(1e-9, floorUs)
  console.log(
    `Floor: the bare call ${fmt(pg.bare.cpuUsPerCall, 1)} µs (the mean of the loops around the PostgreSQL drain) + the plain writer's claim and settle batches ` +
      `${fmt(writer, 1)} µs a delivery (this process ${fmt(floor.nodeUs, 1)}, postgres ${fmt(floor.pgUs, 1)}; ${int(floor.batches)} statements, ${int(d.shape.rows / floor.seconds)} deliveries/s) = ${fmt(floorUs, 1)} µs.`
  )
  console.log(
    `Rule (issue 40): the drain on PostgreSQL ${fmt(total(pg.r), 1)} µs a delivery (node ${fmt(pg.r.cpuUsPerDelivery, 1)}, postgres ${fmt(pg.r.pgCpuUsPerDelivery, 1)}) = ` +
      `${fmt(ratio, 2)} x the floor (at most ${MAX_PG_FLOOR_RATIO} x: ${fmt(MAX_PG_FLOOR_RATIO * floorUs, 1)} µs). Printed, not gated: deliveries/s ${fmt(pg.r.rate / pg.bare.rate, 2)} x the bare calls/s.`
  )
  console.log(
    `RocksDB against PostgreSQL on the same drain: ${fmt(total(rocks.r), 1)} against ${fmt(total(pg.r), 1)} µs a delivery, ${int(rocks.r.rate)} against ${int(pg.r.rate)} deliveries/s.`
  )
  console.log(PG_BOSS_REFERENCE)
  const clean = pg.r.drained && pg.r.dead === 0 && pg.r.left === 0 && pg.bare.failed === 0
  finish(
    NAME,
    clean && ratio <= MAX_PG_FLOOR_RATIO,
    `CPU ${fmt(total(pg.r), 1)} µs a delivery on PostgreSQL (node ${fmt(pg.r.cpuUsPerDelivery, 1)}, postgres ${fmt(pg.r.pgCpuUsPerDelivery, 1)}), ` +
      `${fmt(ratio, 2)} x the floor ${fmt(floorUs, 1)} µs (rule <= ${MAX_PG_FLOOR_RATIO}; bare call ${fmt(pg.bare.cpuUsPerCall, 1)} + plain claim/settle writer ${fmt(writer, 1)}: node ${fmt(floor.nodeUs, 1)}, postgres ${fmt(floor.pgUs, 1)}); ` +
      `${int(pg.r.rate)} deliveries/s (${fmt(pg.r.rate / pg.bare.rate, 2)} x bare ${int(pg.bare.rate)} calls/s, not gated); ` +
      `RocksDB on the same drain ${fmt(total(rocks.r), 1)} µs a delivery, ${int(rocks.r.rate)}/s; pg-boss 12 (quoted reference) about 2,200 requests/s at about 700 µs` +
      (clean ? "" : `; NOT drained cleanly (dead ${pg.r.dead}, left ${pg.r.left}, bare failures ${pg.bare.failed})`)
  )
}
