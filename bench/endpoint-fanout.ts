/**
 * Issue 27 `bench/endpoint-fanout`: the ingest cost of tenant endpoints.
 *
 * Two `ankusa serve` children (RocksDB, synced acks, default writer settings), up at once, the
 * same source (tenant from `x-tenant`, event type from `x-event-type`) and the same load:
 * - ENDPOINTS: the source routes to `tenant-endpoints`; TENANTS tenants have two endpoints each,
 *   created over the API (`POST /v1/tenants/:tenant/endpoints`, SETUP_CONCURRENCY at a time),
 *   one filtered `invoice.*`, one `user.*` + `invoice.paid`; every hook is `invoice.paid`, so
 *   each fans out to both in the Writer.
 * - SINKS: the source routes to two shared sinks `a`, `b`; no endpoint.
 * Each node is first primed with one hook per tenant (the endpoints cache filled, every tenant
 * has its ordinal), then the two take turns: PAIRS pairs, each a ENDPOINTS run and a SINKS run
 * (the order flipped every pair), each run CONNECTIONS keep-alive connections in a closed loop
 * (bench/lib/load.ts), 1 KiB bodies round-robin over the tenants, WARMUP_SECONDS then SECONDS
 * measured. The figure: the server's CPU (every thread, /proc) over the measured seconds over
 * the hooks answered in them; per configuration, summed over its runs.
 *
 * Ingest alone: delivery is parked in both, as bench/ingest-bench.ts parks it. Every sink and
 * endpoint URL points at a server on 127.0.0.1 that never answers, with `pipeline.maxInflight` 1
 * and `pipeline.tickMs` 60 s: the pipeline holds one claimed row (its call times out after 10 s,
 * the sinks' `timeoutMs` set to the endpoints' ENDPOINT_TIMEOUT_MS, then it is retried) and
 * claims nothing more, so neither figure holds delivery work beyond the Writer's wake of the
 * tick, which both pay alike. The delivery rows each hook leaves (every tenant's pending +
 * scheduled + inflight + dead, read from `GET /v1/tenants/:tenant`, over the hooks accepted)
 * are checked: 2 in both.
 *
 * Pass: the endpoints' CPU a hook <= MAX_CPU_RATIO x the shared sinks', every answer a 202,
 * and both fan out to 2 rows a hook.
 * Run: npx tsx bench/endpoint-fanout.ts [--quick] [--seconds S] [--pairs N]
 */
import { queueHooks } from "./lib/hook-senders.js"
import { type LoadResult, rawPost, runLoad } from "./lib/load.js"
import { cpuOf, namedThreadsCpuMs, tempDir } from "./lib/proc.js"
import { arg, finish, fmt, int, log, machine, main, mib, quick, table } from "./lib/report.js"
import { metricValue, type ServeChild, startServe } from "./lib/serve-child.js"
import { startTarget } from "./lib/target-server.js"

export const MAX_CPU_RATIO = 1.2
const TENANTS = arg("tenants", quick ? 1_000 : 10_000)
const PAIRS = arg("pairs", quick ? 2 : 3)
const SECONDS = arg("seconds", quick ? 4 : 10)
const WARMUP_SECONDS = arg("warmup", 2)
const CONNECTIONS = 64
const BODY_BYTES = 1_024
/** Endpoint creates in flight at once during the setup. */
const SETUP_CONCURRENCY = 16
const EVENT_TYPE = "invoice.paid"
/** The two endpoints of every tenant: a prefix, and a prefix plus an exact type; both match EVENT_TYPE. */
const FILTERS: ReadonlyArray<ReadonlyArray<string>> = [["invoice.*"], ["user.*", "invoice.paid"]]
const SINKS = ["a", "b"]
/** The sinks' call timeout: the endpoints' (ENDPOINT_TIMEOUT_MS, src/delivery/destinations.ts), so both park alike. */
const PARKED_TIMEOUT_MS = 10_000
const TOKEN = "endpoint-fanout-bench-token"

type Kind = "endpoints" | "sinks"

const configOf = (kind: Kind, parkedUrl: string) => ({
  sources: [
    {
      id: "bench",
      tenant: { header: "x-tenant" },
      eventType: { header: "x-event-type" },
      routes: kind === "endpoints" ? ["tenant-endpoints"] : SINKS
    }
  ],
  sinks: kind === "endpoints" ? [] : SINKS.map((name) => ({ name, url: `${parkedUrl}/${name}`, timeoutMs: PARKED_TIMEOUT_MS, concurrency: 1 })),
  adminTokens: [{ name: "bench", token: TOKEN, tenants: "*" }],
  endpoints: { allowNetworks: ["127.0.0.0/8"] },
  pipeline: { maxInflight: 1, tickMs: 60_000 },
  http: { demoSink: false },
  log: { level: "info" }
})

const tenant = (i: number) => `tenant-${i + 1}`

const hookRequests = (origin: string) => {
  const host = new URL(origin).host
  const body = Buffer.alloc(BODY_BYTES, 0x7a)
  return Array.from({ length: TENANTS }, (_, i) =>
    rawPost("/v1/hooks/bench", host, { "content-type": "application/json", "x-tenant": tenant(i), "x-event-type": EVENT_TYPE }, body)
  )
}

/** Two endpoints for every tenant, SETUP_CONCURRENCY creates at a time; seconds taken. */
const createEndpoints = async (server: ServeChild, parkedUrl: string): Promise<number> => {
  const started = performance.now()
  let next = 0
  const worker = async () => {
    for (;;) {
      const n = next++
      if (n >= TENANTS * FILTERS.length) return
      const t = tenant(Math.floor(n / FILTERS.length))
      const r = await fetch(`${server.url}/v1/tenants/${t}/endpoints`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ url: `${parkedUrl}/${t}/${n % FILTERS.length}`, eventTypes: FILTERS[n % FILTERS.length] })
      })
      const text = await r.text()
      if (r.status !== 201) throw new Error(`endpoint create for ${t}: ${r.status} ${text}`)
    }
  }
  await Promise.all(Array.from({ length: SETUP_CONCURRENCY }, worker))
  return (performance.now() - started) / 1000
}

const metrics = (server: ServeChild) => fetch(`${server.url}/metrics`).then((r) => r.text())

const writerTotals = (text: string) => ({
  commits: metricValue(text, "ankusa_writer_batch_requests_count") ?? 0,
  requests: metricValue(text, "ankusa_writer_batch_requests_sum") ?? 0
})

/** The server's threads by what they are (/proc comm): the event loop, the commit worker, RocksDB's flushes and compactions, the rest (V8's helpers, libuv). */
type Split = Record<"main" | "worker" | "rocksdb" | "other", number>

const splitOf = (pid: number): Split => {
  const out: Split = { main: 0, worker: 0, rocksdb: 0, other: 0 }
  for (const [tid, t] of namedThreadsCpuMs(pid)) {
    out[tid === String(pid) ? "main" : t.name === "WorkerThread" ? "worker" : t.name.startsWith("rocksdb") ? "rocksdb" : "other"] += t.ms
  }
  return out
}

interface Run {
  readonly kind: Kind
  readonly pair: number
  readonly load: LoadResult
  /** The server's CPU ms over the measured seconds: every thread, the main thread. */
  readonly cpu: { readonly all: number; readonly main: number }
  /** The same by thread (threads that ended during the run are missing from it). */
  readonly threads: Split
  readonly hooksPerCommit: number
  /** The V8 heap in use at the run's end (`ankusa_process_heap_bytes{kind="used"}`, read every 5 s). */
  readonly heapUsed: number
}

/** One measured run: the load, and the server's CPU over its measured seconds alone. */
const measure = async (kind: Kind, pair: number, server: ServeChild): Promise<Run> => {
  const w0 = writerTotals(await metrics(server))
  const loading = runLoad({
    origin: server.url,
    connections: CONNECTIONS,
    seconds: SECONDS,
    warmupSeconds: WARMUP_SECONDS,
    requests: hookRequests(server.url)
  })
  // Set after runLoad's own warm-up timer, with the same delay: it fires just after the measuring starts.
  let before: { readonly all: number; readonly main: number } | undefined
  let threadsBefore: Split | undefined
  const timer = setTimeout(() => {
    before = cpuOf(server.pid)
    threadsBefore = splitOf(server.pid)
  }, WARMUP_SECONDS * 1000)
  const load = await loading
  const after = cpuOf(server.pid)
  const threadsAfter = splitOf(server.pid)
  clearTimeout(timer)
  if (before === undefined || threadsBefore === undefined) throw new Error("the measured seconds began before the CPU was read")
  const t0 = threadsBefore
  const m1 = await metrics(server)
  const w1 = writerTotals(m1)
  return {
    kind,
    pair,
    load,
    cpu: { all: after.all - before.all, main: after.main - before.main },
    threads: {
      main: threadsAfter.main - t0.main,
      worker: threadsAfter.worker - t0.worker,
      rocksdb: threadsAfter.rocksdb - t0.rocksdb,
      other: threadsAfter.other - t0.other
    },
    hooksPerCommit: (w1.requests - w0.requests) / Math.max(1, w1.commits - w0.commits),
    heapUsed: metricValue(m1, 'ankusa_process_heap_bytes{kind="used"}') ?? NaN
  }
}

/** Delivery rows that exist (every tenant's pending + scheduled + inflight + dead, `GET /v1/tenants/:tenant`, exact) and hooks accepted. */
const rowsPerHook = async (server: ServeChild): Promise<{ readonly rows: number; readonly accepted: number }> => {
  let rows = 0
  let next = 0
  const worker = async () => {
    for (let i = next++; i < TENANTS; i = next++) {
      const r = await fetch(`${server.url}/v1/tenants/${tenant(i)}`, { headers: { authorization: `Bearer ${TOKEN}` } })
      const t = (await r.json()) as { pending: number; scheduled: number; inflight: number; dead: number }
      if (r.status !== 200) throw new Error(`GET /v1/tenants/${tenant(i)}: ${r.status} ${JSON.stringify(t)}`)
      rows += t.pending + t.scheduled + t.inflight + t.dead
    }
  }
  await Promise.all(Array.from({ length: SETUP_CONCURRENCY }, worker))
  return { rows, accepted: metricValue(await metrics(server), 'ankusa_ingest_requests_total{outcome="accepted"}') ?? 0 }
}

main("endpoint-fanout", async () => {
  console.log(`endpoint-fanout: ${machine()}${quick ? "; --quick" : ""}`)
  const parked = await startTarget({ hang: true })
  const dirs = { endpoints: tempDir("fanout-endpoints"), sinks: tempDir("fanout-sinks") }
  const servers: Partial<Record<Kind, ServeChild>> = {}
  // finish() exits the process: the servers are stopped first.
  let result: { readonly pass: boolean; readonly detail: string }
  try {
    for (const kind of ["endpoints", "sinks"] as const) {
      servers[kind] = await startServe({ dataDir: dirs[kind].path, config: configOf(kind, parked.url) })
      log(`${kind}: ankusa serve pid ${servers[kind].pid} at ${servers[kind].url}`)
    }
    const nodes = servers as Record<Kind, ServeChild>
    const setupSeconds = await createEndpoints(nodes.endpoints, parked.url)
    log(`${int(TENANTS * FILTERS.length)} endpoints for ${int(TENANTS)} tenants created in ${fmt(setupSeconds, 1)} s (${SETUP_CONCURRENCY} at a time)`)
    for (const kind of ["endpoints", "sinks"] as const) {
      const primed = await queueHooks({ origin: nodes[kind].url, connections: CONNECTIONS, count: TENANTS, request: hookRequests(nodes[kind].url) })
      if (primed.statuses["202"] !== TENANTS) throw new Error(`priming ${kind}: ${JSON.stringify(primed.statuses)}, ${primed.errors} errors`)
      log(`${kind}: primed with one hook for each of ${int(TENANTS)} tenants in ${fmt(primed.seconds, 1)} s`)
    }

    const runs: Array<Run> = []
    for (let pair = 1; pair <= PAIRS; pair++) {
      const order: ReadonlyArray<Kind> = pair % 2 === 1 ? ["endpoints", "sinks"] : ["sinks", "endpoints"]
      for (const kind of order) {
        const r = await measure(kind, pair, nodes[kind])
        log(`pair ${pair} ${kind}: ${int(r.load.rate)} hooks/s, ${int((r.cpu.all * 1000) / Math.max(1, r.load.answered))} µs CPU a hook`)
        runs.push(r)
      }
    }
    const [rowsOfEndpoints, rowsOfSinks] = await Promise.all([rowsPerHook(nodes.endpoints), rowsPerHook(nodes.sinks)])
    const fanout = { endpoints: rowsOfEndpoints, sinks: rowsOfSinks }
    const parkedCalls = (await parked.stats()).requests

    const perHook = (ms: number, hooks: number) => (ms * 1000) / Math.max(1, hooks)
    console.log(
      `\n${int(TENANTS)} tenants, ${CONNECTIONS} keep-alive connections, ${BODY_BYTES} B bodies, event type ${EVENT_TYPE}; ` +
        `${PAIRS} pairs of ${WARMUP_SECONDS} s warm-up + ${SECONDS} s measured; CPU over the measured seconds`
    )
    table(
      ["pair", "route", "hooks/s", "p50 ms", "p99 ms", "hooks/commit", "CPU/hook: all", "main thread", "commit worker, rocksdb, other", "heap used", "answers"],
      runs.map((r) => [
        String(r.pair),
        r.kind === "endpoints" ? "tenant-endpoints (2 endpoints)" : "sinks a, b",
        int(r.load.rate),
        fmt(r.load.p50Ms, 2),
        fmt(r.load.p99Ms, 2),
        fmt(r.hooksPerCommit, 1),
        `${int(perHook(r.cpu.all, r.load.answered))} µs`,
        `${int(perHook(r.cpu.main, r.load.answered))} µs`,
        [r.threads.worker, r.threads.rocksdb, r.threads.other].map((ms) => fmt(perHook(ms, r.load.answered), 1)).join(", ") + " µs",
        mib(r.heapUsed),
        Object.entries(r.load.statuses)
          .map(([s, n]) => `${s}:${int(n)}`)
          .join(" ") + (r.load.errors > 0 ? ` errors:${r.load.errors}` : "")
      ])
    )
    const total = (kind: Kind) => {
      const of = runs.filter((r) => r.kind === kind)
      const hooks = of.reduce((n, r) => n + r.load.answered, 0)
      return {
        hooks,
        all: perHook(of.reduce((n, r) => n + r.cpu.all, 0), hooks),
        main: perHook(of.reduce((n, r) => n + r.cpu.main, 0), hooks),
        others: (["worker", "rocksdb", "other"] as const).map((k) => fmt(perHook(of.reduce((n, r) => n + r.threads[k], 0), hooks), 1)).join(", "),
        rate: hooks / of.reduce((n, r) => n + r.load.seconds, 0)
      }
    }
    const e = total("endpoints")
    const s = total("sinks")
    const ratio = e.all / s.all
    const pairRatios = Array.from({ length: PAIRS }, (_, i) => {
      const [re, rs] = (["endpoints", "sinks"] as const).map((k) => runs.find((r) => r.pair === i + 1 && r.kind === k)!)
      return perHook(re!.cpu.all, re!.load.answered) / perHook(rs!.cpu.all, rs!.load.answered)
    })
    const rowsE = fanout.endpoints.rows / Math.max(1, fanout.endpoints.accepted)
    const rowsS = fanout.sinks.rows / Math.max(1, fanout.sinks.accepted)
    console.log(
      `\nRule inputs: endpoints ${fmt(e.all, 1)} µs CPU a hook (main thread ${fmt(e.main, 1)}; commit worker, rocksdb, other ${e.others}) over ${int(e.hooks)} hooks, ` +
        `shared sinks ${fmt(s.all, 1)} µs (main thread ${fmt(s.main, 1)}; ${s.others}) over ${int(s.hooks)} hooks: ratio ${fmt(ratio, 3)} (rule <= ${MAX_CPU_RATIO}); ` +
        `pair by pair ${pairRatios.map((x) => fmt(x, 3)).join(", ")}. ` +
        `Delivery rows a hook: endpoints ${fmt(rowsE, 3)} (${int(fanout.endpoints.rows)} rows, ${int(fanout.endpoints.accepted)} hooks), ` +
        `sinks ${fmt(rowsS, 3)} (${int(fanout.sinks.rows)}, ${int(fanout.sinks.accepted)}). ` +
        `Calls the parked server got from both nodes: ${int(parkedCalls)}.`
    )
    const all202 = runs.every((r) => r.load.errors === 0 && Object.keys(r.load.statuses).every((k) => k === "202"))
    const fansOut = Math.abs(rowsE - 2) < 0.01 && Math.abs(rowsS - 2) < 0.01
    result = {
      pass: ratio <= MAX_CPU_RATIO && all202 && fansOut,
      detail: `endpoints ${fmt(e.all, 1)} µs CPU a hook (${int(e.rate)} hooks/s), shared sinks ${fmt(s.all, 1)} µs (${int(s.rate)} hooks/s): ` +
        `ratio ${fmt(ratio, 3)} (rule <= ${MAX_CPU_RATIO}; pairs ${pairRatios.map((x) => fmt(x, 2)).join(", ")}); ` +
        `${int(TENANTS)} tenants, ${int(TENANTS * FILTERS.length)} endpoints set up in ${fmt(setupSeconds, 1)} s; ` +
        `rows a hook ${fmt(rowsE, 2)} / ${fmt(rowsS, 2)}${all202 ? "" : "; NOT every answer was 202"}${fansOut ? "" : "; NOT 2 rows a hook in both"}`
    }
  } finally {
    for (const s of Object.values(servers)) await s.kill()
    await parked.close()
    dirs.endpoints.remove()
    dirs.sinks.remove()
  }
  finish("endpoint-fanout", result.pass, result.detail)
})
