/**
 * The sinks' HTTP/1.1 client alone (src/delivery/http1.ts): CPU of this
 * process a call and calls/s, for `--calls N` calls (40,000) at concurrency 16
 * with 1 KiB bodies against a sink in its own process answering 204
 * (bench/lib/target-server.ts), after 5,000 calls of warm-up, `--rounds N`
 * times (3). `--tree DIR` loads the client from another checkout (a paired run
 * against an older build). Not part of the gate: docs/testing.md quotes it.
 * Run: npx tsx bench/http1-loop.ts [--calls N] [--rounds N] [--tree DIR]
 */
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"
import type * as Http1Module from "../src/delivery/http1.js"
import { arg, fmt, int, machine } from "./lib/report.js"
import { startTarget } from "./lib/target-server.js"

const CALLS = arg("calls", 40_000)
const ROUNDS = arg("rounds", 3)
const CONCURRENCY = 16
const treeAt = process.argv.indexOf("--tree")
const tree = treeAt < 0 ? resolve(import.meta.dirname, "..") : resolve(process.argv[treeAt + 1]!)
const Http1 = (await import(pathToFileURL(`${tree}/src/delivery/http1.ts`).href)) as typeof Http1Module

const target = await startTarget({ status: 204 })
const u = new URL(target.url)
const pool = Http1.pool({ secure: false, hostname: u.hostname, port: Number(u.port), maxSockets: CONCURRENCY, idleMs: 4_000 })
const body = Buffer.alloc(1_024, 97)
const head = `POST ${u.pathname} HTTP/1.1\r\nhost: ${u.host}\r\nuser-agent: ankusa/0.1\r\nwebhook-id: msg_1\r\nwebhook-timestamp: 1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`

const run = (calls: number) =>
  new Promise<void>((done, fail) => {
    let started = 0
    let ended = 0
    const one = () => {
      started++
      pool.send(head, body, (e) => {
        if (e._tag !== "Answer" || e.status !== 204) return fail(new Error(JSON.stringify(e)))
        ended++
        if (started < calls) one()
        else if (ended === calls) done()
      })
    }
    for (let i = 0; i < CONCURRENCY; i++) one()
  })

console.log(`http1-loop: ${tree}, ${int(CALLS)} calls a round at concurrency ${CONCURRENCY}; ${machine()}`)
await run(5_000)
for (let r = 1; r <= ROUNDS; r++) {
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await run(CALLS)
  const cpu = process.cpuUsage(cpu0)
  const ms = performance.now() - t0
  console.log(`round ${r}: ${fmt((cpu.user + cpu.system) / CALLS)} µs CPU a call, ${int((CALLS / ms) * 1000)} calls/s`)
}
pool.close()
await target.close()
