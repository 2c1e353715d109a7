/**
 * Issue 28 `bench/breaker-bench`: failing destinations do not slow the healthy ones.
 *
 * Two `ankusa serve` children (RocksDB, default pipeline and breaker settings), up at once, a
 * source routed to `tenant-endpoints`, one endpoint per tenant, created over the API:
 * - BASELINE: HEALTHY (900) tenants, each endpoint at a sink on 127.0.0.1 that answers 204.
 * - FAILING: the same HEALTHY tenants and endpoints, plus FAILING (100) tenants whose endpoints
 *   point at a closed loopback port (every connection refused): 1,000 destinations in all.
 * Each node has its own sink server (bench/lib/target-server.ts, `hold` mode). The two take
 * turns: PAIRS pairs, each a BASELINE and a FAILING run (the order flipped every pair). A run:
 * the sink holds its answers; HOOKS hooks for each of the node's tenants are queued (a closed
 * loop over CONNECTIONS keep-alive connections, round-robin over the tenants; the failing
 * tenants' hooks on FAILING too); then the sink answers everything held and from then on at once,
 * and the run measures the drain: the healthy endpoints' deliveries (the sink's requests) over
 * the seconds from the release until the last of them arrived. On FAILING the refused endpoints'
 * rows are called, fail, and their breakers open (breaker.minCalls 10 at 0.7) while the backlog
 * is queued; they stay parked behind the breakers, probing after breaker.openMs, during the drain.
 * Before the runs, HOOKS hooks for each refused tenant open every refused endpoint's breaker
 * (ankusa_breaker_trips_total reaches FAILING): the runs measure the failing state, not its onset.
 * Then each node drains one run unmeasured (its code compiled hot, its sink's connections open), so
 * neither node's first measured run carries its warm-up: runs measured cold moved a node's rate by
 * up to a third between its first and second run. Each run starts when both nodes are idle
 * (proc.ts untilIdle: together under IDLE_SHARE of a core over 500 ms), so one node's compaction after its run is
 * not charged to the other's drain.
 *
 * Pass: FAILING's healthy delivery rate >= MIN_RATE_RATIO x BASELINE's (each summed over its
 * runs), every ingest answer a 202, and every healthy hook delivered once (the sink's requests and
 * `ankusa_delivery_outcomes_total{outcome="delivered"}` both equal to the healthy hooks queued).
 * Run: npx tsx bench/breaker-bench.ts [--quick] [--hooks N] [--pairs N]
 */
import { createEndpoints, endpointsConfig } from "./lib/endpoint-node.js"
import { queueHooks } from "./lib/hook-senders.js"
import { rawPost } from "./lib/load.js"
import { closedPort, cpuOf, mainThreadCpuMs, tempDir, untilIdle } from "./lib/proc.js"
import { arg, finish, fmt, int, log, machine, main, quick, table } from "./lib/report.js"
import { metricValue, type ServeChild, startServe } from "./lib/serve-child.js"
import { startTarget, type Target } from "./lib/target-server.js"

export const MIN_RATE_RATIO = 0.9
const HEALTHY = 900
const FAILING = 100
const HOOKS = arg("hooks", quick ? 15 : 30)
const PAIRS = arg("pairs", quick ? 1 : 3)
const CONNECTIONS = 64
const BODY_BYTES = 256
/** A drain that has not delivered every healthy hook by then fails the run. */
const DRAIN_TIMEOUT_MS = 60_000
/** A queue phase longer than this may see held calls time out (ENDPOINT_TIMEOUT_MS, 10 s): said so in the output. */
const QUEUE_WARN_MS = 8_000
const TOKEN = "breaker-bench-token"
/** Both nodes together under this share of a core is idle (an idle node's ticks take about 3%). */
const IDLE_SHARE = 0.2

type Kind = "baseline" | "failing"

interface Node {
  readonly kind: Kind
  readonly server: ServeChild
  readonly sink: Target
  readonly tenants: ReadonlyArray<string>
}

const config = endpointsConfig(TOKEN)

const healthy = (i: number) => `healthy-${i + 1}`
const failing = (i: number) => `failing-${i + 1}`

const hookRequests = (origin: string, tenants: ReadonlyArray<string>) => {
  const host = new URL(origin).host
  const body = Buffer.alloc(BODY_BYTES, 0x7a)
  return tenants.map((t) => rawPost("/v1/hooks/bench", host, { "content-type": "application/json", "x-tenant": t }, body))
}

const outcome = async (server: ServeChild, kind: "delivered" | "retried") =>
  metricValue(await fetch(`${server.url}/metrics`).then((r) => r.text()), `ankusa_delivery_outcomes_total{sink="tenant-endpoints",outcome="${kind}"}`) ?? 0
const delivered = (server: ServeChild) => outcome(server, "delivered")

interface Run {
  readonly kind: Kind
  readonly pair: number
  readonly queued: number
  readonly queueSeconds: number
  readonly answers: Readonly<Record<string, number>>
  readonly healthyHooks: number
  readonly seconds: number
  readonly rate: number
  /** The node's CPU (all threads, its main thread) and the bench's main thread (the sink), µs a healthy delivery over the drain. */
  readonly cpu: { readonly all: number; readonly main: number; readonly sink: number }
  /** The node's breaker trips and refused calls (retried outcomes) when the run ended. */
  readonly trips: number
  readonly refused: number
}

/** Queue HOOKS hooks a tenant while the sink holds its answers, release, and time the healthy drain. */
const measure = async (node: Node, pair: number, deliveredSoFar: number, quiet: ReadonlyArray<number>): Promise<Run> => {
  // Neither node's compaction of the run before lands in this one.
  const idle = await untilIdle(quiet, { share: IDLE_SHARE })
  if (!idle.idle) log(`warning: the nodes were still busy after ${fmt(idle.waitedMs / 1000, 1)} s; measuring anyway`)
  else log(`both nodes idle after ${fmt(idle.waitedMs / 1000, 1)} s`)
  await node.sink.hold()
  const before = (await node.sink.stats()).requests
  const count = HOOKS * node.tenants.length
  const queued = await queueHooks({ origin: node.server.url, connections: CONNECTIONS, count, request: hookRequests(node.server.url, node.tenants) })
  if (queued.seconds * 1000 > QUEUE_WARN_MS) log(`warning: queueing took ${fmt(queued.seconds, 1)} s: held calls may have timed out`)
  const healthyHooks = HOOKS * HEALTHY
  const released = performance.now()
  const cpu0 = cpuOf(node.server.pid)
  const self0 = mainThreadCpuMs()
  await node.sink.release()
  let last = released
  for (;;) {
    const requests = (await node.sink.stats()).requests - before
    const now = performance.now()
    if (requests >= healthyHooks) {
      last = now
      break
    }
    if (now - released > DRAIN_TIMEOUT_MS) throw new Error(`${node.kind} pair ${pair}: ${requests} of ${healthyHooks} healthy deliveries after ${DRAIN_TIMEOUT_MS} ms`)
    await new Promise((r) => setTimeout(r, 20))
  }
  const seconds = (last - released) / 1000
  const cpu1 = cpuOf(node.server.pid)
  const selfMs = mainThreadCpuMs() - self0
  // The outcomes are counted as their batch commits, a moment after the sink answered.
  let got = 0
  for (let waited = 0; waited < 5_000; waited += 50) {
    got = (await delivered(node.server)) - deliveredSoFar
    if (got >= healthyHooks) break
    await new Promise((r) => setTimeout(r, 50))
  }
  if (got !== healthyHooks) throw new Error(`${node.kind} pair ${pair}: ${got} deliveries counted, ${healthyHooks} healthy hooks queued`)
  const trips = metricValue(await fetch(`${node.server.url}/metrics`).then((r) => r.text()), "ankusa_breaker_trips_total") ?? 0
  const refused = await outcome(node.server, "retried")
  return { kind: node.kind, pair, queued: count, queueSeconds: queued.seconds, answers: queued.statuses, healthyHooks, seconds, rate: healthyHooks / seconds,
    cpu: { all: ((cpu1.all - cpu0.all) * 1000) / healthyHooks, main: ((cpu1.main - cpu0.main) * 1000) / healthyHooks, sink: (selfMs * 1000) / healthyHooks },
    trips, refused }
}

main("breaker-bench", async () => {
  console.log(`breaker-bench: ${machine()}${quick ? "; --quick" : ""}`)
  const dirs = { baseline: tempDir("breaker-baseline"), failing: tempDir("breaker-failing") }
  const refused = `http://127.0.0.1:${await closedPort()}`
  const nodes: Array<Node> = []
  const sinks: Array<Target> = []
  let result: { readonly pass: boolean; readonly detail: string }
  try {
    for (const kind of ["baseline", "failing"] as const) {
      const sink = await startTarget({ status: 204, hold: true })
      sinks.push(sink)
      const server = await startServe({ dataDir: dirs[kind].path, config })
      const ok = Array.from({ length: HEALTHY }, (_, i) => healthy(i))
      const bad = kind === "failing" ? Array.from({ length: FAILING }, (_, i) => failing(i)) : []
      await createEndpoints(server, TOKEN, [...ok.map((t) => [t, `${sink.url}/${t}`] as const), ...bad.map((t) => [t, `${refused}/${t}`] as const)])
      // Healthy and refused tenants interleaved, as their hooks arrive.
      const tenants = [...ok]
      bad.forEach((t, i) => tenants.splice(i * 10 + 9, 0, t))
      nodes.push({ kind, server, sink, tenants })
      log(`${kind}: ankusa serve pid ${server.pid}, ${int(ok.length)} healthy endpoints${bad.length > 0 ? ` and ${int(bad.length)} refusing connections` : ""}`)
    }
    // The failing state, not its onset: the refused endpoints' breakers open before the runs.
    const failingNode = nodes.find((n) => n.kind === "failing")!
    const refusedTenants = failingNode.tenants.filter((t) => t.startsWith("failing-"))
    const warm = await queueHooks({ origin: failingNode.server.url, connections: CONNECTIONS, count: HOOKS * FAILING, request: hookRequests(failingNode.server.url, refusedTenants) })
    if (warm.statuses["202"] !== HOOKS * FAILING) throw new Error(`warm-up: ${JSON.stringify(warm.statuses)}`)
    const tripsOf = async () => metricValue(await fetch(`${failingNode.server.url}/metrics`).then((r) => r.text()), "ankusa_breaker_trips_total") ?? 0
    const warmed = performance.now()
    while ((await tripsOf()) < FAILING) {
      if (performance.now() - warmed > DRAIN_TIMEOUT_MS) throw new Error(`warm-up: ${await tripsOf()} of ${FAILING} breakers open`)
      await new Promise((r) => setTimeout(r, 50))
    }
    log(`failing: every refused endpoint's breaker open after ${fmt((performance.now() - warmed) / 1000, 1)} s (${int(HOOKS * FAILING)} hooks for them)`)
    const runs: Array<Run> = []
    const pids = nodes.map((n) => n.server.pid)
    const deliveredSoFar = new Map<Kind, number>([["baseline", 0], ["failing", 0]])
    for (const node of nodes) {
      const r = await measure(node, 0, 0, pids)
      deliveredSoFar.set(node.kind, r.healthyHooks)
      log(`warm-up ${node.kind} (not measured): ${int(r.healthyHooks)} healthy deliveries in ${fmt(r.seconds, 2)} s, ${int(r.rate)}/s`)
    }
    for (let pair = 1; pair <= PAIRS; pair++) {
      const order = pair % 2 === 1 ? nodes : [...nodes].reverse()
      for (const node of order) {
        const r = await measure(node, pair, deliveredSoFar.get(node.kind)!, pids)
        deliveredSoFar.set(node.kind, deliveredSoFar.get(node.kind)! + r.healthyHooks)
        log(`pair ${pair} ${node.kind}: ${int(r.queued)} hooks queued in ${fmt(r.queueSeconds, 1)} s; ${int(r.healthyHooks)} healthy deliveries in ${fmt(r.seconds, 2)} s, ${int(r.rate)}/s`)
        runs.push(r)
      }
    }
    const metrics = await fetch(`${failingNode.server.url}/metrics`).then((r) => r.text())
    const trips = metricValue(metrics, "ankusa_breaker_trips_total") ?? 0
    const retried = metricValue(metrics, 'ankusa_delivery_outcomes_total{sink="tenant-endpoints",outcome="retried"}') ?? 0

    console.log(`\n${int(HEALTHY)} healthy endpoints in both, ${int(FAILING)} refusing connections on FAILING; ${HOOKS} hooks a tenant a run, ${BODY_BYTES} B bodies; ${PAIRS} pairs`)
    table(
      ["pair", "node", "hooks queued", "queue s", "healthy deliveries", "drain s", "deliveries/s", "node CPU µs (main)", "sink µs", "trips, refused calls so far", "answers"],
      runs.map((r) => [
        String(r.pair),
        r.kind,
        int(r.queued),
        fmt(r.queueSeconds, 1),
        int(r.healthyHooks),
        fmt(r.seconds, 2),
        int(r.rate),
        `${fmt(r.cpu.all, 0)} (${fmt(r.cpu.main, 0)})`,
        fmt(r.cpu.sink, 0),
        `${int(r.trips)}, ${int(r.refused)}`,
        Object.entries(r.answers).map(([s, n]) => `${s}:${int(n)}`).join(" ")
      ])
    )
    const total = (kind: Kind) => {
      const of = runs.filter((r) => r.kind === kind)
      return of.reduce((n, r) => n + r.healthyHooks, 0) / of.reduce((n, r) => n + r.seconds, 0)
    }
    const base = total("baseline")
    const fail = total("failing")
    const ratio = fail / base
    const all202 = runs.every((r) => Object.keys(r.answers).every((k) => k === "202"))
    console.log(
      `\nRule inputs: healthy deliveries/s with ${FAILING} refusing destinations ${int(fail)}, with none ${int(base)}: ratio ${fmt(ratio, 3)} (rule >= ${MIN_RATE_RATIO}). ` +
        `FAILING's breaker trips ${int(trips)}, failed calls retried ${int(retried)} (without the breaker, every refused row would be called on its schedule).`
    )
    result = {
      pass: ratio >= MIN_RATE_RATIO && all202,
      detail:
        `healthy delivery rate with ${FAILING} of ${HEALTHY + FAILING} destinations refusing ${int(fail)}/s, with none ${int(base)}/s: ratio ${fmt(ratio, 3)} (rule >= ${MIN_RATE_RATIO}); ` +
        `breaker trips ${int(trips)}, refused calls ${int(retried)}${all202 ? "" : "; NOT every answer was 202"}`
    }
  } finally {
    for (const n of nodes) await n.server.kill()
    for (const s of sinks) await s.close()
    dirs.baseline.remove()
    dirs.failing.remove()
  }
  finish("breaker-bench", result.pass, result.detail)
})
