/**
 * Issue 14 (TEN-3) `bench/noisy-neighbour`: does one tenant's flood stall
 * another tenant on the same source and sink?
 *
 * The real server (`bin/ankusa.js serve`, the compiled build: run
 * `npm run build` first; RocksDB in a fresh temp data dir, synced acks,
 * default pipeline settings) with one source shared by two tenants (tenant
 * from `x-tenant-id`) routed to one sink: a real HTTP server in its own
 * process on 127.0.0.1 (bench/lib/delay-sink.ts) answering 204 after 20 ms,
 * configured with concurrency 16, so it takes at most 16 / 20 ms = 800
 * deliveries/s. Three phases, each on a fresh server, data dir and sink:
 *
 * 1. quiet alone: QUIET (tenant "quiet") sends one 1 KiB hook every 100 ms
 *    for QUIET_SECONDS; each hook's delay runs from its 202 (as this process
 *    received it) to the sink's arrival of the delivery carrying its
 *    `webhook-id` (the id in the 202).
 * 2. flood alone: FLOOD (tenant "flood") queues FLOOD_HOOKS 1 KiB hooks over
 *    64 closed-loop connections; after SETTLE_MS its drain rate is the flood
 *    deliveries the sink received in the next QUIET_SECONDS. The run stops
 *    there: the whole backlog would take FLOOD_HOOKS / 800 s.
 * 3. together: FLOOD queues FLOOD_HOOKS as in 2; after SETTLE_MS QUIET runs
 *    as in 1; FLOOD's rate is measured over QUIET's window (the same offsets
 *    as in 2), QUIET's delays as in 1. The phase waits for every QUIET hook
 *    (bounded: 1.5 × the time the whole flood takes at its rate alone), not
 *    for the flood.
 * 4. slow sink (issue 24): FLOOD's hooks go to their own source, routed to a
 *    second sink that answers after SLOW_SINK_DELAY_MS (5 s; concurrency
 *    16, so it takes 3.2 deliveries/s); QUIET's go to theirs, routed to the
 *    healthy sink. FLOOD queues FLOOD_HOOKS, then QUIET runs as in 1.
 * 5. slow endpoints (issue 39): both tenants on one source routed to
 *    `tenant-endpoints`. FLOOD registers SLOW_ENDPOINTS endpoints of
 *    concurrency 64 (the most allowed) on a receiver answering 200 after
 *    SLOW_ENDPOINT_DELAY_MS (under the endpoints' 10 s timeout: every call
 *    succeeds, no breaker trips) and sends SLOW_ENDPOINT_RATE hooks a second;
 *    QUIET has one endpoint on the healthy sink. After SLOW_ENDPOINT_LEAD_MS
 *    (FLOOD's calls fill its endpoints) QUIET runs as in 1.
 *
 * PASS only if every QUIET hook was acknowledged and delivered in phases 1,
 * 3, 4 and 5, QUIET's p99 with the flood (3), beside the slow sink (4) and
 * beside the slow endpoints (5) <=
 * P99_FACTOR × its p99 alone + P99_TICKS × pipeline.tickMs (read back from
 * `GET /v1/config`), FLOOD's
 * rate with QUIET >= DRAIN_SHARE × its rate alone, and the flood's backlog
 * lasted through both windows (else its rate is not a drain rate).
 * Run: npm run build && npx tsx bench/noisy-neighbour.ts [--quick] [--flood N] [--quiet-seconds S]
 */
import { setTimeout as sleep } from "node:timers/promises"
import { epochMs, QUIET_MARK, startDelaySink, type DelaySink } from "./lib/delay-sink.js"
import { type Ack, pacedHooks, queueHooks } from "./lib/hook-senders.js"
import { rawPost } from "./lib/load.js"
import { tempDir } from "./lib/proc.js"
import { arg, finish, fmt, int, log, machine, main, percentile, quick, table } from "./lib/report.js"
import { type ServeChild, startServe } from "./lib/serve-child.js"

const FLOOD_HOOKS = arg("flood", quick ? 10_000 : 100_000)
const QUIET_SECONDS = arg("quiet-seconds", quick ? 5 : 20)
export const QUIET_PERIOD_MS = 100
const QUIET_HOOKS = Math.round((QUIET_SECONDS * 1000) / QUIET_PERIOD_MS)
export const SINK_DELAY_MS = 20
export const SINK_CONCURRENCY = 16
const FLOOD_CONNECTIONS = 64
const BODY_BYTES = 1_024
/** From the flood's last 202 to QUIET's first hook and to FLOOD's measured window: the ingest load's tail settles. */
const SETTLE_MS = 1_000
/** Pass rule (issue 14). */
export const P99_FACTOR = 2
export const P99_TICKS = 2
export const DRAIN_SHARE = 0.95
/** How long QUIET's last hook may take alone, after its 202. */
const QUIET_ALONE_WAIT_MS = 10_000
/** With the flood: this many times the whole flood's drain at its rate alone, plus QUIET_ALONE_WAIT_MS, at most MAX_WAIT_MS. */
const FLOOD_WAIT_FACTOR = 1.5
const MAX_WAIT_MS = 300_000
/** Flood deliveries still arriving this long after a window's end are not in it: read it only then. */
const WINDOW_MARGIN_MS = 200
const POLL_MS = 200
const TOKEN = "noisy-neighbour-bench-token"
const SOURCE = "shared"
const TICK_DEFAULT_MS = 100
/** Phase 4: FLOOD's sink answers after this long. */
export const SLOW_SINK_DELAY_MS = 5_000
const FLOOD_SOURCE = "flood-only"
const QUIET_SOURCE = "quiet-only"
/** Phase 5: FLOOD's endpoints, each of the most concurrency allowed, answering after this long; FLOOD's paced rate. */
const SLOW_ENDPOINTS = 4
const SLOW_ENDPOINT_CONCURRENCY = 64
export const SLOW_ENDPOINT_DELAY_MS = 9_500
const SLOW_ENDPOINT_RATE = 40
const SLOW_ENDPOINT_LEAD_MS = 3_000
const ENDPOINTS_SOURCE = "endpoints"

const configFor = (sinkUrl: string) => ({
  sources: [{ id: SOURCE, tenant: { header: "x-tenant-id" }, routes: ["sink"] }],
  sinks: [{ name: "sink", url: `${sinkUrl}/sink`, concurrency: SINK_CONCURRENCY }],
  adminTokens: [{ name: "bench", token: TOKEN, tenants: "*" }],
  http: { demoSink: false },
  log: { level: "info" }
})

/** A JSON body of exactly BODY_BYTES starting with `head` (the sink tells QUIET from FLOOD by it). */
const padded = (head: string): Buffer => {
  const open = `${head},"pad":"`
  return Buffer.from(`${open}${"a".repeat(BODY_BYTES - open.length - 2)}"}`)
}
const FLOOD_BODY = padded('{"kind":"flood"')
const quietBody = (i: number) => padded(`${QUIET_MARK},"i":${i}`)

/** Phase 4: each tenant its own source; FLOOD's routed to the slow sink, QUIET's to the healthy one. */
const slowConfigFor = (sinkUrl: string, slowUrl: string) => ({
  sources: [
    { id: FLOOD_SOURCE, tenant: { header: "x-tenant-id" }, routes: ["slow"] },
    { id: QUIET_SOURCE, tenant: { header: "x-tenant-id" }, routes: ["sink"] }
  ],
  sinks: [
    { name: "sink", url: `${sinkUrl}/sink`, concurrency: SINK_CONCURRENCY },
    { name: "slow", url: `${slowUrl}/slow`, concurrency: SINK_CONCURRENCY, timeoutMs: 4 * SLOW_SINK_DELAY_MS }
  ],
  adminTokens: [{ name: "bench", token: TOKEN, tenants: "*" }],
  http: { demoSink: false },
  log: { level: "info" }
})

/** Phase 5: one source routed to each tenant's own endpoints, loopback allowed. */
const endpointsConfig = () => ({
  sources: [{ id: ENDPOINTS_SOURCE, tenant: { header: "x-tenant-id" }, routes: ["tenant-endpoints"] }],
  sinks: [],
  endpoints: { allowNetworks: ["127.0.0.0/8"] },
  adminTokens: [{ name: "bench", token: TOKEN, tenants: "*" }],
  http: { demoSink: false },
  log: { level: "info" }
})

/** A fresh sink, data dir and server for one phase; all three gone afterwards. */
const withNode = async <A>(
  phase: string,
  f: (server: ServeChild, sink: DelaySink) => Promise<A>,
  config: (sinkUrl: string) => Record<string, unknown> = configFor
): Promise<A> => {
  const sink = await startDelaySink({ delayMs: SINK_DELAY_MS })
  const dir = tempDir(`noisy-${phase}`)
  try {
    const server = await startServe({ dataDir: dir.path, config: config(sink.url) })
    log(`${phase}: ankusa serve pid ${server.pid} at ${server.url}, sink ${sink.url}`)
    try {
      return await f(server, sink)
    } finally {
      await server.kill()
    }
  } finally {
    await sink.close()
    dir.remove()
  }
}

/** pipeline.tickMs as the server runs it (`GET /v1/config`), or undefined if unreadable. */
const tickOf = async (server: ServeChild): Promise<number | undefined> => {
  try {
    const r = await fetch(`${server.url}/v1/config`, { headers: { authorization: `Bearer ${TOKEN}` } })
    const c = (await r.json()) as { pipeline?: { tickMs?: unknown } }
    return typeof c.pipeline?.tickMs === "number" ? c.pipeline.tickMs : undefined
  } catch {
    return undefined
  }
}

const sendQuiet = (server: ServeChild, source = SOURCE) =>
  pacedHooks({
    url: `${server.url}/v1/hooks/${source}`,
    count: QUIET_HOOKS,
    periodMs: QUIET_PERIOD_MS,
    headers: { "content-type": "application/json", "x-tenant-id": "quiet" },
    body: quietBody
  })

/** Poll the sink until every acknowledged QUIET hook arrived, or `deadline` (epochMs). */
const awaitQuiet = async (sink: DelaySink, acks: ReadonlyArray<Ack>, deadline: number) => {
  const ids = acks.flatMap((a) => (a.id === undefined ? [] : [a.id]))
  for (;;) {
    const seen = await sink.quiet()
    if (ids.every((id) => seen.has(id)) || epochMs() > deadline) return seen
    await sleep(POLL_MS)
  }
}

interface QuietFigures {
  readonly sent: number
  readonly acked: number
  readonly delivered: number
  readonly waitedS: number
  readonly p50: number
  readonly p99: number
  readonly max: number
}

const quietFigures = (acks: ReadonlyArray<Ack>, seen: ReadonlyMap<string, number>, waitedS: number): QuietFigures => {
  const delays = acks.flatMap((a) => (a.id !== undefined && seen.has(a.id) ? [seen.get(a.id)! - a.ackAt] : []))
  return {
    sent: acks.length,
    acked: acks.filter((a) => a.id !== undefined).length,
    delivered: delays.length,
    waitedS,
    p50: percentile(delays, 50),
    p99: percentile(delays, 99),
    max: delays.length === 0 ? NaN : Math.max(...delays)
  }
}

/** QUIET's hooks, then the wait for their deliveries (at most `waitMs` after the last 202). */
const runQuiet = async (server: ServeChild, sink: DelaySink, waitMs: number, source = SOURCE) => {
  const acks = await sendQuiet(server, source)
  const lastAck = Math.max(...acks.map((a) => a.ackAt))
  const seen = await awaitQuiet(sink, acks, lastAck + waitMs)
  return quietFigures(acks, seen, waitMs / 1000)
}

interface FloodFigures {
  readonly queued: number
  readonly refused: string
  readonly queueSeconds: number
  readonly backlogStart: number
  readonly backlogEnd: number
  readonly rate: number
}

const queueFlood = async (phase: string, server: ServeChild, source = SOURCE) => {
  log(`${phase}: FLOOD queues ${int(FLOOD_HOOKS)} hooks over ${FLOOD_CONNECTIONS} connections`)
  const request = rawPost(`/v1/hooks/${source}`, new URL(server.url).host, { "content-type": "application/json", "x-tenant-id": "flood" }, FLOOD_BODY)
  const r = await queueHooks({ origin: server.url, connections: FLOOD_CONNECTIONS, count: FLOOD_HOOKS, request })
  const queued = r.statuses["202"] ?? 0
  const refused = Object.entries(r.statuses)
    .filter(([s]) => s !== "202")
    .map(([s, n]) => `${s}:${n}`)
    .concat(r.errors > 0 ? [`errors:${r.errors}`] : [])
    .join(" ")
  log(`${phase}: ${int(queued)} queued in ${fmt(r.seconds, 1)} s (${int(queued / r.seconds)} hooks/s)${refused === "" ? "" : `; not 202: ${refused}`}`)
  return { queued, refused, seconds: r.seconds, at: epochMs() }
}

/** The server's event-loop delay p99 (ms, over its last 5 s window) from /metrics, read every 5 s until `to`: printed, not gated. */
const loopDelays = async (phase: string, server: ServeChild, to: number) => {
  const out: Array<number> = []
  while (epochMs() + 5_000 <= to) {
    await sleep(5_000)
    try {
      const text = await (await fetch(`${server.url}/metrics`)).text()
      const m = /^ankusa_event_loop_delay_seconds\{quantile="0\.99"\} (\S+)$/m.exec(text)
      if (m !== null) out.push(Number(m[1]) * 1000)
    } catch {
      // unreadable: the sample is left out
    }
  }
  log(`${phase}: event-loop delay p99 by 5 s window ${out.map((x) => fmt(x, 1)).join(", ")} ms`)
}

/** FLOOD's deliveries at the sink in [from, to), read once they are all in. */
const floodWindow = async (sink: DelaySink, flood: { queued: number; refused: string; seconds: number }, from: number, to: number): Promise<FloodFigures> => {
  await sleep(Math.max(0, to + WINDOW_MARGIN_MS - epochMs()))
  const [before, inside] = await Promise.all([sink.floodIn(0, from), sink.floodIn(from, to)])
  return {
    queued: flood.queued,
    refused: flood.refused,
    queueSeconds: flood.seconds,
    backlogStart: flood.queued - before,
    backlogEnd: flood.queued - before - inside,
    rate: inside / ((to - from) / 1000)
  }
}

interface Phase {
  readonly name: string
  readonly quiet?: QuietFigures
  readonly flood?: FloodFigures
  readonly sinkMax: number
  readonly load: string
  /** Phase 4: the slow sink's requests and most calls at once. */
  readonly slow?: { readonly requests: number; readonly maxConcurrent: number }
}

const quietAlone = () =>
  withNode("quiet-alone", async (server, sink) => {
    const tickMs = await tickOf(server)
    log(`quiet-alone: QUIET sends ${QUIET_HOOKS} hooks, one every ${QUIET_PERIOD_MS} ms`)
    const quiet = await runQuiet(server, sink, QUIET_ALONE_WAIT_MS)
    const phase: Phase = { name: "QUIET alone", quiet, sinkMax: (await sink.stats()).maxConcurrent, load: machine() }
    return { phase, tickMs }
  })

const floodAlone = () =>
  withNode("flood-alone", async (server, sink) => {
    const f = await queueFlood("flood-alone", server)
    const from = f.at + SETTLE_MS
    log(`flood-alone: measuring FLOOD's drain over ${QUIET_SECONDS} s after ${SETTLE_MS} ms`)
    const [flood] = await Promise.all([floodWindow(sink, f, from, from + QUIET_SECONDS * 1000), loopDelays("flood-alone", server, from + QUIET_SECONDS * 1000)])
    return { name: "FLOOD alone", flood, sinkMax: (await sink.stats()).maxConcurrent, load: machine() } satisfies Phase
  })

const together = (waitMs: number) =>
  withNode("together", async (server, sink) => {
    const f = await queueFlood("together", server)
    await sleep(Math.max(0, f.at + SETTLE_MS - epochMs()))
    const from = epochMs()
    log(`together: QUIET sends ${QUIET_HOOKS} hooks, one every ${QUIET_PERIOD_MS} ms; then waits up to ${fmt(waitMs / 1000, 0)} s for them`)
    const quietRun = runQuiet(server, sink, waitMs)
    const [flood] = await Promise.all([floodWindow(sink, f, from, from + QUIET_SECONDS * 1000), loopDelays("together", server, from + QUIET_SECONDS * 1000)])
    const quiet = await quietRun
    return { name: "together", quiet, flood, sinkMax: (await sink.stats()).maxConcurrent, load: machine() } satisfies Phase
  })

/** Phase 4: FLOOD's backlog waits for the slow sink while QUIET's hooks go to the healthy one. */
const slowSink = async (waitMs: number): Promise<Phase> => {
  const slow = await startDelaySink({ delayMs: SLOW_SINK_DELAY_MS })
  try {
    return await withNode(
      "slow-sink",
      async (server, sink) => {
        const f = await queueFlood("slow-sink", server, FLOOD_SOURCE)
        await sleep(Math.max(0, f.at + SETTLE_MS - epochMs()))
        log(`slow-sink: QUIET sends ${QUIET_HOOKS} hooks, one every ${QUIET_PERIOD_MS} ms, to a healthy sink while FLOOD's wait for one answering in ${SLOW_SINK_DELAY_MS} ms`)
        const quiet = await runQuiet(server, sink, waitMs, QUIET_SOURCE)
        const s = await slow.stats()
        // FLOOD's rate here: its deliveries (calls answered) at the slow sink since its last 202.
        const answered = Math.max(0, s.requests - s.maxConcurrent)
        const flood: FloodFigures = {
          queued: f.queued,
          refused: f.refused,
          queueSeconds: f.seconds,
          backlogStart: f.queued,
          backlogEnd: f.queued - answered,
          rate: answered / ((epochMs() - f.at) / 1000)
        }
        return { name: "slow sink", quiet, flood, sinkMax: (await sink.stats()).maxConcurrent, load: machine(), slow: { requests: s.requests, maxConcurrent: s.maxConcurrent } }
      },
      (sinkUrl) => slowConfigFor(sinkUrl, slow.url)
    )
  } finally {
    await slow.close()
  }
}

const createEndpoint = async (server: ServeChild, tenant: string, body: object) => {
  const r = await fetch(`${server.url}/v1/tenants/${tenant}/endpoints`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  if (r.status !== 201) throw new Error(`endpoint of ${tenant} not created: ${r.status} ${await r.text()}`)
}

/** Phase 5: FLOOD's slow endpoints take every call they allow while QUIET's endpoint is healthy. */
const slowEndpoints = async (waitMs: number): Promise<Phase> => {
  const slow = await startDelaySink({ delayMs: SLOW_ENDPOINT_DELAY_MS, status: 200 })
  try {
    return await withNode(
      "slow-endpoints",
      async (server, sink) => {
        for (let i = 0; i < SLOW_ENDPOINTS; i++) await createEndpoint(server, "flood", { url: `${slow.url}/slow${i}`, concurrency: SLOW_ENDPOINT_CONCURRENCY })
        await createEndpoint(server, "quiet", { url: `${sink.url}/sink` })
        log(
          `slow-endpoints: FLOOD sends ${SLOW_ENDPOINT_RATE} hooks/s to ${SLOW_ENDPOINTS} endpoints of concurrency ${SLOW_ENDPOINT_CONCURRENCY} answering in ${SLOW_ENDPOINT_DELAY_MS} ms; ` +
            `QUIET starts ${SLOW_ENDPOINT_LEAD_MS} ms later with one healthy endpoint`
        )
        const floodAcks = pacedHooks({
          url: `${server.url}/v1/hooks/${ENDPOINTS_SOURCE}`,
          count: Math.round(((QUIET_SECONDS * 1000 + SLOW_ENDPOINT_LEAD_MS) * SLOW_ENDPOINT_RATE) / 1000),
          periodMs: 1000 / SLOW_ENDPOINT_RATE,
          headers: { "content-type": "application/json", "x-tenant-id": "flood" },
          body: () => FLOOD_BODY
        })
        await sleep(SLOW_ENDPOINT_LEAD_MS)
        const quiet = await runQuiet(server, sink, waitMs, ENDPOINTS_SOURCE)
        const acks = await floodAcks
        const s = await slow.stats()
        const refused = acks.filter((a) => a.id === undefined).length
        if (refused > 0) log(`slow-endpoints: ${refused} of FLOOD's ${acks.length} hooks not answered 202`)
        return { name: "slow endpoints", quiet, sinkMax: (await sink.stats()).maxConcurrent, load: machine(), slow: { requests: s.requests, maxConcurrent: s.maxConcurrent } }
      },
      endpointsConfig
    )
  } finally {
    await slow.close()
  }
}

const ms = (x: number | undefined) => (x === undefined ? "-" : fmt(x, 1))

main("noisy-neighbour", async () => {
  console.log(
    `noisy-neighbour: source "${SOURCE}" shared by tenants "flood" and "quiet" (x-tenant-id), one sink answering 204 after ${SINK_DELAY_MS} ms, ` +
      `concurrency ${SINK_CONCURRENCY} (at most ${int((SINK_CONCURRENCY * 1000) / SINK_DELAY_MS)} deliveries/s); FLOOD ${int(FLOOD_HOOKS)} hooks of ${BODY_BYTES} B ` +
      `over ${FLOOD_CONNECTIONS} connections; QUIET 1 hook every ${QUIET_PERIOD_MS} ms for ${QUIET_SECONDS} s; ${machine()}${quick ? "; --quick" : ""}`
  )
  const a = await quietAlone()
  const b = await floodAlone()
  const rateAlone = b.flood.rate
  const waitMs = Math.min(MAX_WAIT_MS, QUIET_ALONE_WAIT_MS + (rateAlone > 0 ? (FLOOD_WAIT_FACTOR * FLOOD_HOOKS * 1000) / rateAlone : MAX_WAIT_MS))
  const c = await together(waitMs)
  const d = await slowSink(QUIET_ALONE_WAIT_MS)
  const e = await slowEndpoints(QUIET_ALONE_WAIT_MS)
  const phases: ReadonlyArray<Phase> = [a.phase, b, c, d, e]
  table(
    [
      "phase",
      "QUIET delivered/sent",
      "QUIET p50 ms",
      "p99 ms",
      "max ms",
      "FLOOD queued (s)",
      "FLOOD backlog window start→end",
      "FLOOD deliveries/s",
      "sink max concurrent",
      "slow sink requests (max concurrent)",
      "machine"
    ],
    phases.map((p) => [
      p.name,
      p.quiet === undefined ? "-" : `${p.quiet.delivered}/${p.quiet.sent}`,
      ms(p.quiet?.p50),
      ms(p.quiet?.p99),
      ms(p.quiet?.max),
      p.flood === undefined ? "-" : `${int(p.flood.queued)} (${fmt(p.flood.queueSeconds, 1)})${p.flood.refused === "" ? "" : ` not 202: ${p.flood.refused}`}`,
      p.flood === undefined ? "-" : `${int(p.flood.backlogStart)}→${int(p.flood.backlogEnd)}`,
      p.flood === undefined ? "-" : int(p.flood.rate),
      String(p.sinkMax),
      p.slow === undefined ? "-" : `${int(p.slow.requests)} (${p.slow.maxConcurrent})`,
      p.load
    ])
  )
  const tickMs = a.tickMs ?? TICK_DEFAULT_MS
  const qa = a.phase.quiet!
  const qc = c.quiet
  const qd = d.quiet!
  const qe = e.quiet!
  const limit = P99_FACTOR * qa.p99 + P99_TICKS * tickMs
  const share = c.flood.rate / rateAlone
  console.log(
    `QUIET's delay: from each 202 (received here) to the sink's arrival of the delivery with its webhook-id. ` +
      `FLOOD's rate: its deliveries at the sink in the ${QUIET_SECONDS} s from ${SETTLE_MS} ms after its last 202 (in "together", QUIET's sending window); ` +
      `the flood phases do not wait for the rest of the backlog (${int(FLOOD_HOOKS)} rows at ~${int(rateAlone)}/s would take ${fmt(FLOOD_HOOKS / rateAlone, 0)} s). ` +
      `pipeline.tickMs ${tickMs}${a.tickMs === undefined ? " (GET /v1/config unreadable: the default assumed)" : " (GET /v1/config)"}.`
  )
  const reasons: Array<string> = []
  for (const [name, q] of [["alone", qa], ["with the flood", qc], ["beside the slow sink", qd], ["beside the slow endpoints", qe]] as const) {
    if (q.acked < q.sent) reasons.push(`${q.sent - q.acked} of ${q.sent} QUIET hooks ${name} not answered 202`)
    if (q.delivered < q.acked) reasons.push(`${q.acked - q.delivered} of ${q.acked} QUIET hooks ${name} not delivered within ${fmt(q.waitedS, 0)} s of the last 202`)
  }
  for (const p of [b, c]) if (p.flood.backlogEnd <= 0) reasons.push(`FLOOD's backlog ran out inside the ${p.name} window (raise --flood)`)
  const delayOk = qc.p99 <= limit
  const drainOk = share >= DRAIN_SHARE
  if (!delayOk) reasons.push(`QUIET p99 ${ms(qc.p99)} ms with the flood > ${P99_FACTOR}×${ms(qa.p99)} + ${P99_TICKS}×${tickMs} = ${ms(limit)} ms`)
  if (!(qd.p99 <= limit)) reasons.push(`QUIET p99 ${ms(qd.p99)} ms beside the slow sink > ${P99_FACTOR}×${ms(qa.p99)} + ${P99_TICKS}×${tickMs} = ${ms(limit)} ms`)
  if (!(qe.p99 <= limit)) reasons.push(`QUIET p99 ${ms(qe.p99)} ms beside the slow endpoints > ${P99_FACTOR}×${ms(qa.p99)} + ${P99_TICKS}×${tickMs} = ${ms(limit)} ms`)
  if (!drainOk) reasons.push(`FLOOD ${int(c.flood.rate)}/s with QUIET < ${DRAIN_SHARE * 100}% of ${int(rateAlone)}/s alone`)
  finish(
    "noisy-neighbour",
    reasons.length === 0,
    `QUIET p50/p99/max ${ms(qc.p50)}/${ms(qc.p99)}/${ms(qc.max)} ms with the flood (${qc.delivered}/${qc.sent} delivered), ` +
      `${ms(qd.p50)}/${ms(qd.p99)}/${ms(qd.max)} ms beside the slow sink (${qd.delivered}/${qd.sent}; FLOOD's sink answering in ${SLOW_SINK_DELAY_MS} ms, ${d.slow?.maxConcurrent ?? 0} calls at once), ` +
      `${ms(qe.p50)}/${ms(qe.p99)}/${ms(qe.max)} ms beside the slow endpoints (${qe.delivered}/${qe.sent}; FLOOD's ${SLOW_ENDPOINTS} endpoints answering in ${SLOW_ENDPOINT_DELAY_MS} ms, ${e.slow?.maxConcurrent ?? 0} calls at once), ` +
      `${ms(qa.p50)}/${ms(qa.p99)}/${ms(qa.max)} ms alone (${qa.delivered}/${qa.sent}); p99 limit ${ms(limit)} ms (${P99_FACTOR}× alone + ${P99_TICKS} ticks of ${tickMs} ms); ` +
      `FLOOD ${int(c.flood.rate)}/s with QUIET, ${int(rateAlone)}/s alone (${fmt(share * 100, 1)}%, limit ${DRAIN_SHARE * 100}%); ` +
      `FLOOD backlog when QUIET started ${int(c.flood.backlogStart)}; sink max concurrency ${b.sinkMax} alone, ${c.sinkMax} together (configured ${SINK_CONCURRENCY}); ` +
      `${int(FLOOD_HOOKS)} flood hooks, ${QUIET_SECONDS} s of QUIET${reasons.length === 0 ? "" : `; ${reasons.join("; ")}`}`
  )
})
