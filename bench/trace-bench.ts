/**
 * Issue 43 `bench/trace-bench`: what tracing costs a hook, ingest through delivery. Three
 * `ankusa serve` children on fresh stores, the same configuration but `telemetry`: off,
 * `samplingRatio` 0.01 and 1.0, the last two exporting to an OTLP/HTTP receiver in this process
 * on 127.0.0.1 (it reads each request and answers 200). The three run at once: each round starts
 * three new processes, sends each WARMUP hooks (not counted), then HOOKS hooks to all three at
 * the same time, RATE a second to each (CONNECTIONS at most in flight) over keep-alive
 * connections, 1 KiB bodies with no
 * `traceparent` (so each new trace is sampled at the ratio), to one sink in this process
 * answering 204; the window ends when the sink has every delivery and SETTLE_MS more have passed
 * (past the default export interval: the spans are sent inside it). The CPU of each node (all
 * threads, /proc) over the window, a hook, summed over the rounds, is the figure.
 * Why at once and fresh: measured one after the other in long-lived processes, three nodes of
 * one configuration (`--aa`) differed by up to 6 % over three rounds of 20,000 hooks, as the
 * host's speed drifts between windows and each process keeps its own heap and code; at once,
 * every node sees the same host, and new processes each round spread what one process keeps.
 * Why an offered rate: in a closed loop a node that answers sooner gets smaller Writer batches and
 * so more store work a hook, which the ratio then charged to tracing (the 0.01 node level with 1.0).
 * PASS (issue 43): CPU a hook at 1.0 <= MAX_FULL_RATIO x off, at 0.01 <= MAX_LOW_RATIO x off,
 * every answer 202 and every hook delivered. Tracing off against the build before it is the
 * ingest and delivery benches' rules, unchanged.
 * `--aa`: the three nodes all with tracing off (an A/A run): the spread of the method itself.
 * Run: npx tsx bench/trace-bench.ts [--quick] [--hooks N] [--warmup N] [--rounds N] [--rate R] [--aa]
 */
import { Agent, createServer, request } from "node:http"
import type { AddressInfo } from "node:net"
import { cpuOf, tempDir } from "./lib/proc.js"
import { arg, finish, fmt, int, log, machine, main, quick, table } from "./lib/report.js"
import { type ServeChild, startServe } from "./lib/serve-child.js"

const HOOKS = arg("hooks", quick ? 2_000 : 10_000)
const WARMUP = arg("warmup", quick ? 1_000 : 3_000)
const ROUNDS = arg("rounds", quick ? 2 : 5)
const CONNECTIONS = 32
/** Hooks a second offered to each node (`--rate`): below what one node takes on a third of 2 cores. */
const RATE = arg("rate", 600)
const BODY = Buffer.alloc(1_024, "x")
/** Past the default `telemetry.otlp.batchIntervalMs` (1 s), so a round's spans are exported inside it. */
const SETTLE_MS = 1_300
const MAX_FULL_RATIO = 1.15
const MAX_LOW_RATIO = 1.02

/** `--aa`: three nodes with tracing off, the same otherwise: how far apart the method puts equals. */
const AA = process.argv.includes("--aa")
const MODES: ReadonlyArray<{ readonly name: string; readonly ratio: number | undefined }> = AA
  ? [
    { name: "off", ratio: undefined },
    { name: "off-b", ratio: undefined },
    { name: "off-c", ratio: undefined }
  ]
  : [
    { name: "off", ratio: undefined },
    { name: "0.01", ratio: 0.01 },
    { name: "1.0", ratio: 1 }
  ]

const listen = (handler: Parameters<typeof createServer>[1]): Promise<{ readonly url: string; readonly close: () => void }> =>
  new Promise((resolve) => {
    const server = createServer(handler)
    server.keepAliveTimeout = 60_000
    server.listen(0, "127.0.0.1", () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() }))
  })

/**
 * `hooks` posts at RATE a second (an open loop: the same offered rate whatever the node's speed),
 * CONNECTIONS at most in flight; the statuses that were not 202.
 */
const sendHooks = (origin: string, agent: Agent, hooks: number): Promise<number> =>
  new Promise((resolve) => {
    const start = performance.now()
    let sent = 0
    let open = 0
    let done = 0
    let bad = 0
    const settle = () => {
      open--
      if (++done === hooks) return resolve(bad)
      pump()
    }
    const fire = () => {
      sent++
      open++
      const req = request(`${origin}/v1/hooks/shop`, { method: "POST", agent, headers: { "content-type": "application/json", "content-length": BODY.length } }, (res) => {
        if (res.statusCode !== 202) bad++
        res.resume()
        res.once("end", settle)
      })
      req.once("error", () => (bad++, settle()))
      req.end(BODY)
    }
    const pump = () => {
      const due = Math.min(hooks, Math.floor(((performance.now() - start) * RATE) / 1000) + 1)
      while (sent < due && open < CONNECTIONS) fire()
      if (sent === hooks) clearInterval(timer)
    }
    const timer = setInterval(pump, 5)
    pump()
  })

const until = async (ok: () => boolean, ms: number) => {
  const end = Date.now() + ms
  while (!ok()) {
    if (Date.now() > end) throw new Error("timed out waiting for the deliveries")
    await new Promise((r) => setTimeout(r, 10))
  }
}

main("trace-bench", async () => {
  log(`trace-bench: ${ROUNDS} rounds of ${HOOKS} hooks to each of ${MODES.length} nodes at once (after ${WARMUP} to warm up), ${CONNECTIONS} connections each (${machine()})`)
  const delivered = new Map<string, number>()
  const sink = await listen((req, res) => {
    req.resume()
    req.once("end", () => {
      delivered.set(req.url!, (delivered.get(req.url!) ?? 0) + 1)
      res.writeHead(204).end()
    })
  })
  let exported = 0
  const collector = await listen((req, res) => {
    req.resume()
    req.once("end", () => ((exported++), res.writeHead(200, { "content-type": "application/json" }).end("{}")))
  })
  type Node = { readonly path: string; readonly serve: ServeChild; readonly dir: ReturnType<typeof tempDir>; readonly agent: Agent }
  const cpu = MODES.map(() => 0)
  const perRound: Array<Array<number>> = []
  let bad = 0
  let live: Array<Node> = []
  const stopAll = async () => {
    for (const n of live) {
      n.agent.destroy()
      await n.serve.stop().catch(() => undefined)
      n.dir.remove()
    }
    live = []
  }
  /** `hooks` to every node at once; each node's CPU ms over the window, and the answers not 202. */
  const load = async (hooks: number): Promise<{ readonly ms: ReadonlyArray<number>; readonly bad: number }> => {
    const want = live.map((n) => (delivered.get(n.path) ?? 0) + hooks)
    const before = live.map((n) => cpuOf(n.serve.pid).all)
    const bads = await Promise.all(live.map((n) => sendHooks(n.serve.url, n.agent, hooks)))
    await until(() => live.every((n, i) => (delivered.get(n.path) ?? 0) >= want[i]!), 180_000)
    await new Promise((r) => setTimeout(r, SETTLE_MS))
    return { ms: live.map((n, i) => cpuOf(n.serve.pid).all - before[i]!), bad: bads.reduce((a, b) => a + b, 0) }
  }
  // The verdict is printed once the nodes are stopped (`finish` exits the process).
  let verdict: readonly [boolean, string] = [false, "no verdict"]
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const mode of MODES) {
        const dir = tempDir(`trace-bench-${mode.name}`)
        const path = `/${mode.name}/${round}`
        const serve = await startServe({
          dataDir: dir.path,
          config: {
            sources: [{ id: "shop", tenant: "bench", routes: ["s"] }],
            sinks: [{ name: "s", url: `${sink.url}${path}`, concurrency: 16 }],
            http: { demoSink: false },
            log: { level: "warning" },
            ...(mode.ratio === undefined ? {} : { telemetry: { otlp: { endpoint: `${collector.url}/v1/traces`, samplingRatio: mode.ratio } } })
          }
        })
        live.push({ path, serve, dir, agent: new Agent({ keepAlive: true, maxSockets: CONNECTIONS }) })
      }
      await load(WARMUP)
      const r = await load(HOOKS)
      bad += r.bad
      r.ms.forEach((ms, i) => (cpu[i]! += ms))
      perRound.push([...r.ms])
      log(`round ${round}: ${MODES.map((m, i) => `${m.name} ${fmt(r.ms[i]! / HOOKS, 3)} ms`).join(", ")} CPU a hook`)
      await stopAll()
    }
    const off = cpu[0]!
    const ratio = (i: number) => cpu[i]! / off
    table(
      ["tracing", "CPU a hook (ms, all threads)", "× off", "per-round × off (min–max)"],
      MODES.map((m, i) => {
        const rs = perRound.map((r) => r[i]! / r[0]!)
        return [m.name, fmt(cpu[i]! / (ROUNDS * HOOKS), 3), fmt(ratio(i), 3), `${fmt(Math.min(...rs), 3)}–${fmt(Math.max(...rs), 3)}`]
      })
    )
    log(`the collector took ${int(exported)} export requests`)
    const pass = ratio(2) <= MAX_FULL_RATIO && ratio(1) <= MAX_LOW_RATIO && bad === 0 && (AA || exported > 0)
    verdict = [
      pass,
      `CPU a hook × off: ${MODES[2]!.name} ${fmt(ratio(2), 3)} (max ${MAX_FULL_RATIO}), ${MODES[1]!.name} ${fmt(ratio(1), 3)} (max ${MAX_LOW_RATIO}); off ${fmt(off / (ROUNDS * HOOKS), 3)} ms a hook; ${bad} answers not 202`
    ]
  } finally {
    await stopAll()
    sink.close()
    collector.close()
  }
  finish("trace-bench", ...verdict)
})
