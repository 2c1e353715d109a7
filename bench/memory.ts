/**
 * Issue 6 `bench/memory`: the resident memory of a serving node holding
 * ROWS queued rows over TENANTS tenants. Target: VmRSS <= TARGET_MIB.
 *
 * The store is built offline (bench/lib/queued-store.ts: real transitions,
 * unsynced batches): every row due, each tenant's rows in distinct seconds of
 * the last SPREAD_MS, so the active index holds about one marker per row (the
 * worst case of TEN-1 §5's bound). Then `ankusa serve` starts on it in a child
 * process with dispatch parked (its sink never answers, `pipeline.maxInflight`
 * 1: one row claimed, nothing more) and the gauge tick every second (each
 * tick reads the first 10,000 active tenants' counters). Once the gauges show
 * the backlog, a few more ticks pass and REQUESTS hooks are ingested and
 * /metrics is read; then VmRSS and VmHWM come from /proc/<pid>/status.
 *
 * Then the logs a tenant can grow (issue 39), on a fresh node: FAILING_ENDPOINTS endpoints over
 * FAILING_TENANTS tenants at a receiver on 127.0.0.1 that answers 500 with a 4 KiB body, each sent
 * FAILING_HOOKS hooks, while one portal user creates an endpoint there, sends it a test event and
 * deletes it, CHURN times. The attempt log keeps the bodies; its bytes and the retry log's windows
 * are bounded. Same target for that node's VmRSS once the attempts are in.
 * Run: npx tsx bench/memory.ts [--quick]
 */
import { Effect } from "effect"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { EVENT_LOOP_WINDOW_MS } from "../src/observability/event-loop-metrics.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import { storeDirOf } from "../src/programs/store.js"
import { memoryOf, tempDir } from "./lib/proc.js"
import { builder, dueHooks } from "./lib/queued-store.js"
import { arg, finish, fmt, int, log, machine, main, mib, quick, table } from "./lib/report.js"
import { metricValue, startServe } from "./lib/serve-child.js"
import { startTarget } from "./lib/target-server.js"

const ROWS = arg("rows", quick ? 100_000 : 1_000_000)
const TENANTS = arg("tenants", quick ? 10_000 : 100_000)
const SPREAD_MS = 600_000
export const TARGET_MIB = 512
/** Gauge ticks (1 s apart) let pass after the first one that shows the backlog. */
const MORE_TICKS = 3
const REQUESTS = 200
/** How long the backlog may take to show in the gauges after boot. */
const GAUGES_TIMEOUT_MS = 120_000
const FAILING_TENANTS = 20
const FAILING_ENDPOINTS = quick ? 200 : 800
const FAILING_HOOKS = quick ? 5 : 10
const CHURN = quick ? 300 : 2_000
const FAILURE_BODY = "e".repeat(4 * 1024)
const TOKEN = "memory-bench-token-0001"

const build = (storeDir: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* makeRocksDbStore(storeDir)
      const b = yield* builder(store, { sinks: ["a"], bodyBytes: 256 })
      const ords = Array.from({ length: TENANTS }, (_, i) => i + 1)
      yield* b.add(dueHooks(ords, ROWS, Date.now() - 1_000, SPREAD_MS))
      return b.rows()
    })
  )

const LOOP_P99 = 'ankusa_event_loop_delay_seconds{quantile="0.99"}'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const run = async (): Promise<{ readonly ok: boolean; readonly detail: string }> => {
  console.log(`memory: ${int(ROWS)} due rows over ${int(TENANTS)} tenants; ${machine()}${quick ? "; --quick" : ""}`)
  const dir = tempDir("memory")
  const sink = await startTarget({ hang: true })
  try {
    const t0 = performance.now()
    const rows = await Effect.runPromise(build(storeDirOf(dir.path)))
    log(`store built offline: ${int(rows)} rows in ${fmt((performance.now() - t0) / 1000, 1)} s; starting serve`)
    const bootStart = performance.now()
    const server = await startServe({
      dataDir: dir.path,
      config: {
        sources: [{ id: "mem", tenant: { header: "x-tenant" }, routes: ["a"] }],
        sinks: [{ name: "a", url: `${sink.url}/a`, timeoutMs: 300_000, concurrency: 1 }],
        pipeline: { maxInflight: 1, tickMs: 60_000 },
        gauges: { intervalMs: 1_000 },
        http: { demoSink: false },
        log: { level: "info" }
      }
    })
    try {
      const bootSeconds = (performance.now() - bootStart) / 1000
      const afterBoot = memoryOf(server.pid)
      // The gauges have ticked once the aggregate shows the backlog.
      const until = performance.now() + GAUGES_TIMEOUT_MS
      let queued = 0
      while (performance.now() < until) {
        const text = await fetch(`${server.url}/metrics`).then((r) => r.text())
        queued = (metricValue(text, "ankusa_queue_pending") ?? 0) + (metricValue(text, "ankusa_queue_inflight") ?? 0)
        if (queued >= rows) break
        await sleep(250)
      }
      await sleep(MORE_TICKS * 1_000)
      let accepted = 0
      for (let i = 0; i < REQUESTS; i++) {
        const r = await fetch(`${server.url}/v1/hooks/mem`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-tenant": `tenant-${1 + ((i * 7919) % TENANTS)}` },
          body: JSON.stringify({ i })
        })
        await r.text()
        if (r.status === 202) accepted++
      }
      // The event-loop gauges appear once their first window ends (EVENT_LOOP_WINDOW_MS after boot).
      let metrics = ""
      const loopBy = performance.now() + 2 * EVENT_LOOP_WINDOW_MS
      do {
        metrics = await fetch(`${server.url}/metrics`).then((r) => r.text())
        if (metricValue(metrics, LOOP_P99) !== undefined) break
        await sleep(250)
      } while (performance.now() < loopBy)
      const serving = memoryOf(server.pid)
      table(
        ["when", "VmRSS", "VmHWM (peak)"],
        [
          [`after boot (${fmt(bootSeconds, 1)} s)`, mib(afterBoot.rss), mib(afterBoot.peak)],
          [`serving: gauges ticked, ${accepted}/${REQUESTS} hooks accepted, /metrics read`, mib(serving.rss), mib(serving.peak)]
        ]
      )
      console.log(
        `gauges: pending ${int(metricValue(metrics, "ankusa_queue_pending") ?? NaN)}, tenants ${int(metricValue(metrics, "ankusa_tenants") ?? NaN)}, ` +
          `event-loop delay p99 ${fmt((metricValue(metrics, LOOP_P99) ?? NaN) * 1000, 2)} ms`
      )
      const shown = queued >= rows
      const ok = serving.rss <= TARGET_MIB * 1024 * 1024 && shown && accepted === REQUESTS
      return {
        ok,
        detail: `VmRSS ${mib(serving.rss)} serving ${int(rows)} queued rows over ${int(TENANTS)} tenants (target <= ${TARGET_MIB} MiB), peak ${mib(serving.peak)}` +
          (shown ? "" : `; the gauges never showed the backlog (${int(queued)})`) +
          (accepted === REQUESTS ? "" : `; only ${accepted}/${REQUESTS} hooks accepted`)
      }
    } finally {
      await server.kill()
    }
  } finally {
    await sink.close()
    dir.remove()
  }
}

/** A receiver on 127.0.0.1 answering every call 500 with FAILURE_BODY, and how many it answered. */
const failingReceiver = () =>
  new Promise<{ readonly url: string; readonly calls: () => number; readonly close: () => Promise<void> }>((resolve) => {
    let calls = 0
    const server = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        calls++
        res.writeHead(500, { "content-type": "text/plain" }).end(FAILURE_BODY)
      })
    })
    server.listen(0, "127.0.0.1", () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        calls: () => calls,
        close: () => new Promise<void>((done) => (server.closeAllConnections(), server.close(() => done())))
      })
    )
  })

const admin = (url: string, method: string, path: string, body?: unknown) =>
  fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  }).then(async (r) => ({ status: r.status, body: (await r.json().catch(() => ({}))) as { id?: string } }))

/** Phase 2: failing endpoints' bodies in the attempt log, and a create, test, delete loop. */
const logsPhase = async (): Promise<{ readonly ok: boolean; readonly detail: string }> => {
  const dir = tempDir("memory-logs")
  const receiver = await failingReceiver()
  try {
    const server = await startServe({
      dataDir: dir.path,
      config: {
        sources: [{ id: "mem", tenant: { header: "x-tenant" }, routes: ["tenant-endpoints"] }],
        sinks: [],
        adminTokens: [{ name: "bench", token: TOKEN, tenants: "*" }],
        endpoints: { allowNetworks: ["127.0.0.0/8"] },
        pipeline: { tickMs: 20 },
        http: { demoSink: false },
        log: { level: "warning" }
      }
    })
    try {
      const t0 = performance.now()
      let created = 0
      for (let i = 0; i < FAILING_ENDPOINTS; i++) {
        const r = await admin(server.url, "POST", `/v1/tenants/tenant-${i % FAILING_TENANTS}/endpoints`, { url: `${receiver.url}/e${i}` })
        if (r.status === 201) created++
      }
      let accepted = 0
      for (let i = 0; i < FAILING_HOOKS * FAILING_TENANTS; i++) {
        const r = await fetch(`${server.url}/v1/hooks/mem`, { method: "POST", headers: { "content-type": "application/json", "x-tenant": `tenant-${i % FAILING_TENANTS}` }, body: JSON.stringify({ i }) })
        await r.text()
        if (r.status === 202) accepted++
      }
      let churned = 0
      for (let i = 0; i < CHURN; i++) {
        const c = await admin(server.url, "POST", "/v1/tenants/portal-user/endpoints", { url: `${receiver.url}/churn${i}` })
        if (c.status !== 201 || c.body.id === undefined) continue
        await admin(server.url, "POST", `/v1/tenants/portal-user/endpoints/${c.body.id}/test`)
        if ((await admin(server.url, "DELETE", `/v1/tenants/portal-user/endpoints/${c.body.id}`)).status === 200) churned++
      }
      // The first attempts of every endpoint's rows are in (each hook fans out to its tenant's endpoints).
      const wanted = (FAILING_ENDPOINTS / FAILING_TENANTS) * accepted
      const until = performance.now() + 60_000
      while (receiver.calls() < wanted && performance.now() < until) await sleep(250)
      await sleep(2_000)
      const m = memoryOf(server.pid)
      log(
        `logs: ${created} failing endpoints, ${accepted} hooks, ${churned} endpoints created, tested and deleted, ${int(receiver.calls())} failed calls ` +
          `answered with ${FAILURE_BODY.length} B bodies in ${fmt((performance.now() - t0) / 1000, 1)} s`
      )
      const ok = m.rss <= TARGET_MIB * 1024 * 1024 && created === FAILING_ENDPOINTS && accepted === FAILING_HOOKS * FAILING_TENANTS && churned === CHURN && receiver.calls() >= wanted
      return {
        ok,
        detail: `failing endpoints' logs: VmRSS ${mib(m.rss)}, peak ${mib(m.peak)} after ${int(receiver.calls())} failed calls with 4 KiB bodies and ${churned}/${CHURN} endpoints churned` +
          (receiver.calls() >= wanted ? "" : `; only ${receiver.calls()} of ${wanted} calls`)
      }
    } finally {
      await server.kill()
    }
  } finally {
    await receiver.close()
    dir.remove()
  }
}

// The verdict is printed after the servers, the sinks and the stores are gone (finish exits the process).
main("memory", async () => {
  const r = await run()
  const logs = await logsPhase()
  finish("memory", r.ok && logs.ok, `${r.detail}; ${logs.detail}`)
})
