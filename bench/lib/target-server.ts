/**
 * A bare `node:http` server in its own process, for the benches: the limit of
 * one Node process answering HTTP on this machine (ingest-bench's baseline,
 * `--status 202`), a sink that answers at once (`--status 204`), or one that
 * holds every request without answering (`--hang`, to park a pipeline).
 * Every POST body is read to its end. `GET /_stats` answers
 * `{requests, maxConcurrent, connections, maxOpen}`: requests answered or
 * held; the most requests open at once (a request is open from its arrival
 * until its answer is written, which for an immediate answer is one turn of
 * the event loop: requests that arrive together count together); TCP
 * connections accepted; the most open at once (over keep-alive HTTP/1.1, the
 * concurrency the client used).
 *
 * `--hold` answers `--status` like a sink, except while holding (from the start, and after
 * `GET /_hold`): requests then wait unanswered until `GET /_release` answers them all and ends the
 * hold (bench/breaker-bench.ts queues a backlog so, then measures its drain).
 *
 * `--answer-after-ms N` (with `--status 202`) answers in batches: the first request a batch holds
 * arms one timer of N ms, and when it fires every request held since is answered, in arrival order:
 * the shape of an ingest answer that waits for a synced group commit (bench/ingest-bench.ts prints
 * what that shape alone costs node:http).
 *
 * It runs in its own process (bench/lib/server-process.ts): `startTarget` spawns it.
 */
import { createServer } from "node:http"
import { listenAndAnnounce, numberArg, servesHere, spawnServer } from "./server-process.js"

export interface TargetStats {
  readonly requests: number
  readonly maxConcurrent: number
  readonly connections: number
  readonly maxOpen: number
}

export interface Target {
  readonly url: string
  readonly pid: number
  readonly stats: () => Promise<TargetStats>
  readonly close: () => Promise<void>
  /** `hold` mode: answer every held request and stop holding; hold again. */
  readonly release: () => Promise<void>
  readonly hold: () => Promise<void>
}

export interface TargetOptions {
  /** Status of every POST answer (ignored with `hang`). */
  readonly status?: number
  readonly hang?: boolean
  /** Hold every answer until `release()`; `hold()` starts holding again. */
  readonly hold?: boolean
  /** With status 202: answer in batches, each N ms after its first request (see the header). */
  readonly answerAfterMs?: number
}

/** The answer a bare ingest gives: a small JSON body, as the gateway's 202 has. */
const BODY_202 = Buffer.from('{"id":"h_0000000000000000_0000000000000000","seq":1}')

const serve = (o: TargetOptions) => {
  let requests = 0
  let concurrent = 0
  let maxConcurrent = 0
  let connections = 0
  let open = 0
  let maxOpen = 0
  let holding = o.hold === true
  let held: Array<() => void> = []
  // `answerAfterMs`: the answers waiting for the batch's timer.
  let batch: Array<() => void> = []
  const flush = () => {
    const answers = batch
    batch = []
    for (const answer of answers) answer()
  }
  const server = createServer((req, res) => {
    if (req.method === "GET" && (req.url === "/_release" || req.url === "/_hold")) {
      holding = req.url === "/_hold"
      const answers = held
      held = []
      for (const answer of answers) answer()
      res.writeHead(204).end()
      return
    }
    if (req.method === "GET" && req.url === "/_stats") {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ requests, maxConcurrent, connections, maxOpen } satisfies TargetStats))
      return
    }
    requests++
    concurrent++
    maxConcurrent = Math.max(maxConcurrent, concurrent)
    req.on("data", () => {})
    req.on("end", () => {
      if (o.hang === true) return
      const status = o.status ?? 204
      if (status === 202) {
        // The bare ingest baseline: answer at once, as cheaply as Node can.
        const accept = () => {
          concurrent--
          res.writeHead(202, { "content-type": "application/json", "content-length": BODY_202.length }).end(BODY_202)
        }
        if ((o.answerAfterMs ?? 0) === 0) return accept()
        if (batch.push(accept) === 1) setTimeout(flush, o.answerAfterMs)
        return
      }
      const answer = () => {
        concurrent--
        res.writeHead(status, { "content-length": 0 }).end()
      }
      // A sink answers on the next turn, so requests that arrived in the same turn overlap (and count).
      if (holding) held.push(answer)
      else setImmediate(answer)
    })
    req.on("close", () => {
      if (o.hang === true) concurrent--
    })
  })
  server.on("connection", (socket) => {
    connections++
    maxOpen = Math.max(maxOpen, ++open)
    socket.on("close", () => open--)
  })
  listenAndAnnounce(server)
}

/** Spawn the server in its own process and wait until it listens. */
export const startTarget = async (o: TargetOptions): Promise<Target> => {
  const args =
    o.hang === true
      ? ["--hang"]
      : ["--status", String(o.status ?? 204), ...(o.hold === true ? ["--hold"] : []), ...(o.answerAfterMs === undefined ? [] : ["--answer-after-ms", String(o.answerAfterMs)])]
  const p = await spawnServer(import.meta.url, args, "target server")
  const get = (path: string) => fetch(`${p.url}${path}`).then((r) => void r.body?.cancel())
  return { ...p, stats: () => fetch(`${p.url}/_stats`).then((r) => r.json() as Promise<TargetStats>), release: () => get("/_release"), hold: () => get("/_hold") }
}

if (servesHere(import.meta.url)) {
  serve({ hang: process.argv.includes("--hang"), hold: process.argv.includes("--hold"), status: numberArg("--status", 204), answerAfterMs: numberArg("--answer-after-ms", 0) })
}
