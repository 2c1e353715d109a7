/**
 * `bench/idle-after-drain`: a node whose backlog has drained costs what an idle node costs.
 *
 * One `ankusa serve` child (RocksDB, default settings), a source routed to `tenant-endpoints`, one
 * endpoint a tenant (TENANTS of them, created over the API) at a sink on 127.0.0.1 that answers 204.
 * FRESH: the node's CPU (all threads, /proc) over WINDOW_S seconds before any hook. Then ROUNDS
 * rounds: HOOKS hooks for each tenant (64 keep-alive connections, round-robin over the tenants),
 * until the sink has them all; after the last, the node is left alone SETTLE_S seconds (its stale
 * markers cleaned, docs/delivery.md "The discovery floor"), and AFTER is its CPU over the next
 * WINDOW_S seconds. Nothing is sent to the node during either window.
 *
 * Each drain deletes every row and marker it had, and RocksDB keeps their tombstones until
 * compaction: a scan that steps over them on every tick costs an idle node tens of milliseconds a
 * tick (100 to 160 ms of CPU a second before the discovery floor).
 *
 * Pass: AFTER <= MAX_RATIO x FRESH + SLACK_MS_PER_S (the slack: a few ms a second of timers and
 * gauges move either figure by more than their ratio says), and every hook delivered.
 * Run: npx tsx bench/idle-after-drain.ts [--quick] [--tenants N] [--hooks N]
 */
import { setTimeout as sleep } from "node:timers/promises"
import { createEndpoints, endpointsConfig } from "./lib/endpoint-node.js"
import { queueHooks } from "./lib/hook-senders.js"
import { rawPost } from "./lib/load.js"
import { cpuOf, tempDir } from "./lib/proc.js"
import { arg, finish, fmt, int, log, machine, main, quick } from "./lib/report.js"
import { startServe } from "./lib/serve-child.js"
import { startTarget } from "./lib/target-server.js"

export const MAX_RATIO = 2
export const SLACK_MS_PER_S = 10
const TENANTS = arg("tenants", quick ? 300 : 900)
const HOOKS = arg("hooks", 30)
const ROUNDS = arg("rounds", quick ? 1 : 2)
const WINDOW_S = 10
const SETTLE_S = 10
const CONNECTIONS = 64
const BODY_BYTES = 256
const DRAIN_TIMEOUT_MS = 120_000
const TOKEN = "idle-after-drain-bench-token"

const config = endpointsConfig(TOKEN)

/** CPU ms a second of `pid` (all threads) over `seconds`, nothing else asked of it meanwhile. */
const cpuRate = async (pid: number, seconds: number): Promise<number> => {
  const before = cpuOf(pid).all
  await sleep(seconds * 1000)
  return (cpuOf(pid).all - before) / seconds
}

main("idle-after-drain", async () => {
  console.log(`idle-after-drain: ${machine()}${quick ? "; --quick" : ""}`)
  const dir = tempDir("idle-after-drain")
  const sink = await startTarget({ status: 204 })
  const server = await startServe({ dataDir: dir.path, config })
  let result: { readonly pass: boolean; readonly detail: string }
  try {
    const tenants = Array.from({ length: TENANTS }, (_, i) => `tenant-${i + 1}`)
    await createEndpoints(server, TOKEN, tenants.map((t) => [t, `${sink.url}/${t}`] as const))
    await sleep(SETTLE_S * 1000)
    const fresh = await cpuRate(server.pid, WINDOW_S)
    log(`fresh: ${fmt(fresh, 1)} ms of CPU a second over ${WINDOW_S} s, ${int(TENANTS)} endpoints, no hook yet`)
    const host = new URL(server.url).host
    const body = Buffer.alloc(BODY_BYTES, 0x7a)
    const requests = tenants.map((t) => rawPost("/v1/hooks/bench", host, { "content-type": "application/json", "x-tenant": t }, body))
    const before = (await sink.stats()).requests
    for (let round = 1; round <= ROUNDS; round++) {
      const queued = await queueHooks({ origin: server.url, connections: CONNECTIONS, count: HOOKS * TENANTS, request: requests })
      if (queued.statuses["202"] !== HOOKS * TENANTS) throw new Error(`round ${round}: ${JSON.stringify(queued.statuses)}`)
      const started = performance.now()
      while ((await sink.stats()).requests - before < round * HOOKS * TENANTS) {
        if (performance.now() - started > DRAIN_TIMEOUT_MS) throw new Error(`round ${round}: not drained after ${DRAIN_TIMEOUT_MS} ms`)
        await sleep(50)
      }
      log(`round ${round}: ${int(HOOKS * TENANTS)} hooks queued in ${fmt(queued.seconds, 1)} s, drained ${fmt((performance.now() - started) / 1000, 1)} s later`)
    }
    await sleep(SETTLE_S * 1000)
    const after = await cpuRate(server.pid, WINDOW_S)
    const delivered = (await sink.stats()).requests - before
    const limit = MAX_RATIO * fresh + SLACK_MS_PER_S
    console.log(
      `\nRule inputs: ${fmt(after, 1)} ms of CPU a second idle after ${ROUNDS} drain(s) of ${int(HOOKS * TENANTS)} hooks for ${int(TENANTS)} tenants ` +
        `(${SETTLE_S} s after the last), ${fmt(fresh, 1)} before any (rule: after <= ${MAX_RATIO} x before + ${SLACK_MS_PER_S} = ${fmt(limit, 1)}); ${int(delivered)} delivered`
    )
    const all = delivered === ROUNDS * HOOKS * TENANTS
    result = {
      pass: after <= limit && all,
      detail: `idle CPU after the drains ${fmt(after, 1)} ms/s, before any ${fmt(fresh, 1)} ms/s (rule <= ${fmt(limit, 1)})${all ? "" : `; ${int(delivered)} of ${int(ROUNDS * HOOKS * TENANTS)} delivered`}`
    }
  } finally {
    await server.kill()
    await sink.close()
    dir.remove()
  }
  finish("idle-after-drain", result.pass, result.detail)
})
