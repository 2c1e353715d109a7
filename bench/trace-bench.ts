/**
 * Issue 43 `bench/trace-bench`: what tracing costs a hook, ingest through delivery. Three
 * `ankusa serve` children run side by side on fresh stores, the same configuration but
 * `telemetry`: off, `samplingRatio` 0.01 and 1.0, the last two exporting to an OTLP/HTTP
 * receiver in this process on 127.0.0.1 (it reads each request and answers 200). Each round
 * sends HOOKS hooks to each node in turn (the order rotates round by round), CONNECTIONS at a
 * time over keep-alive connections, 1 KiB bodies with no `traceparent` (so each new trace is
 * sampled at the ratio), to one sink in this process answering 204; a node's round ends when
 * its sink has every delivery and SETTLE_MS more have passed (past the default export interval:
 * the spans are sent inside the window). The exporter runs with its default batch settings. The CPU of a node (all threads, /proc) over its rounds, a hook,
 * is the figure; a warm-up round is not counted. Rounds are long (HOOKS 20,000, about 7 s a node):
 * a round of 3,000 moved by up to ±30 % with where V8's major collections and RocksDB's flushes
 * fell (its helper threads took 70 to 490 ms of a 1.3 s round), more than the 2 % the 0.01 rule
 * reads; over 20,000 the rounds of one node agree to within about 3 %.
 * PASS (issue 43): CPU a hook at 1.0 <= MAX_FULL_RATIO x off, at 0.01 <= MAX_LOW_RATIO x off,
 * every answer 202 and every hook delivered. Tracing off against the build before it is the
 * ingest and delivery benches' rules, unchanged.
 * `--aa`: the three nodes all with tracing off (an A/A run): the spread of the method itself.
 * Run: npx tsx bench/trace-bench.ts [--quick] [--hooks N] [--rounds N] [--aa]
 */
import { Agent, createServer, request } from "node:http"
import type { AddressInfo } from "node:net"
import { cpuOf, tempDir } from "./lib/proc.js"
import { arg, finish, fmt, int, log, machine, main, quick, table } from "./lib/report.js"
import { type ServeChild, startServe } from "./lib/serve-child.js"

const HOOKS = arg("hooks", quick ? 2_000 : 20_000)
const ROUNDS = arg("rounds", quick ? 2 : 3)
const CONNECTIONS = 32
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

/** HOOKS posts, CONNECTIONS at a time; the statuses that were not 202. */
const sendHooks = (origin: string, agent: Agent): Promise<number> =>
  new Promise((resolve) => {
    let sent = 0
    let done = 0
    let bad = 0
    const next = () => {
      if (sent === HOOKS) return
      sent++
      const req = request(`${origin}/v1/hooks/shop`, { method: "POST", agent, headers: { "content-type": "application/json", "content-length": BODY.length } }, (res) => {
        if (res.statusCode !== 202) bad++
        res.resume()
        res.once("end", () => (++done === HOOKS ? resolve(bad) : next()))
      })
      req.once("error", () => (bad++, ++done === HOOKS ? resolve(bad) : next()))
      req.end(BODY)
    }
    for (let i = 0; i < CONNECTIONS; i++) next()
  })

const until = async (ok: () => boolean, ms: number) => {
  const end = Date.now() + ms
  while (!ok()) {
    if (Date.now() > end) throw new Error("timed out waiting for the deliveries")
    await new Promise((r) => setTimeout(r, 10))
  }
}

main("trace-bench", async () => {
  log(`trace-bench: ${HOOKS} hooks a round, ${ROUNDS} rounds (+1 warm-up), ${CONNECTIONS} connections (${machine()})`)
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
  const nodes: Array<{ readonly mode: (typeof MODES)[number]; readonly serve: ServeChild; readonly dir: ReturnType<typeof tempDir>; cpu: number; bad: number }> = []
  // The verdict is printed once the nodes are stopped (`finish` exits the process).
  let verdict: readonly [boolean, string] = [false, "no verdict"]
  try {
    for (const mode of MODES) {
      const dir = tempDir(`trace-bench-${mode.name}`)
      const serve = await startServe({
        dataDir: dir.path,
        config: {
          sources: [{ id: "shop", tenant: "bench", routes: ["s"] }],
          sinks: [{ name: "s", url: `${sink.url}/${mode.name}`, concurrency: 16 }],
          http: { demoSink: false },
          log: { level: "warning" },
          ...(mode.ratio === undefined ? {} : { telemetry: { otlp: { endpoint: `${collector.url}/v1/traces`, samplingRatio: mode.ratio } } })
        }
      })
      nodes.push({ mode, serve, dir, cpu: 0, bad: 0 })
    }
    const agents = nodes.map(() => new Agent({ keepAlive: true, maxSockets: CONNECTIONS }))
    const perRound: Array<Array<number>> = []
    for (let round = 0; round <= ROUNDS; round++) {
      const cpus: Array<number> = []
      for (let k = 0; k < nodes.length; k++) {
        const i = (k + round) % nodes.length
        const n = nodes[i]!
        const path = `/${n.mode.name}`
        const want = (delivered.get(path) ?? 0) + HOOKS
        const before = cpuOf(n.serve.pid).all
        const bad = await sendHooks(n.serve.url, agents[i]!)
        await until(() => (delivered.get(path) ?? 0) >= want, 120_000)
        await new Promise((r) => setTimeout(r, SETTLE_MS))
        const ms = cpuOf(n.serve.pid).all - before
        cpus[i] = ms
        if (round > 0) (n.cpu += ms), (n.bad += bad)
      }
      if (round > 0) perRound.push(cpus)
      log(`round ${round === 0 ? "warm-up" : round}: ${nodes.map((n, i) => `${n.mode.name} ${fmt(cpus[i]! / HOOKS, 3)} ms`).join(", ")} CPU a hook`)
    }
    for (const a of agents) a.destroy()
    const off = nodes[0]!.cpu
    const ratio = (i: number) => nodes[i]!.cpu / off
    table(
      ["tracing", "CPU a hook (ms, all threads)", "× off", "per-round × off (min–max)"],
      nodes.map((n, i) => {
        const rs = perRound.map((r) => r[i]! / r[0]!)
        return [n.mode.name, fmt(n.cpu / (ROUNDS * HOOKS), 3), fmt(ratio(i), 3), `${fmt(Math.min(...rs), 3)}–${fmt(Math.max(...rs), 3)}`]
      })
    )
    log(`the collector took ${int(exported)} export requests`)
    const bad = nodes.reduce((s, n) => s + n.bad, 0)
    const pass = ratio(2) <= MAX_FULL_RATIO && ratio(1) <= MAX_LOW_RATIO && bad === 0 && exported > 0
    verdict = [
      pass,
      `CPU a hook × off: 1.0 ${fmt(ratio(2), 3)} (max ${MAX_FULL_RATIO}), 0.01 ${fmt(ratio(1), 3)} (max ${MAX_LOW_RATIO}); off ${fmt(off / (ROUNDS * HOOKS), 3)} ms a hook; ${bad} answers not 202`
    ]
  } finally {
    for (const n of nodes) {
      await n.serve.stop().catch(() => undefined)
      n.dir.remove()
    }
    sink.close()
    collector.close()
  }
  finish("trace-bench", ...verdict)
})
