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
import { clientLoop, measure } from "./lib/delivery-floor.js"
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
const loop = clientLoop(pool, u, Buffer.alloc(1_024, 97), CONCURRENCY)

console.log(`http1-loop: ${tree}, ${int(CALLS)} calls a round at concurrency ${CONCURRENCY}; ${machine()}`)
await loop(5_000)
for (let r = 1; r <= ROUNDS; r++) {
  const c = await measure(CALLS, () => loop(CALLS))
  console.log(`round ${r}: ${fmt(c.cpuUs)} µs CPU a call, ${int(c.rate)} calls/s`)
}
pool.close()
await target.close()
