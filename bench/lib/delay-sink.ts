/**
 * A sink in its own process that answers every POST after `delayMs` (a
 * receiver doing real work), for bench/noisy-neighbour.ts. It records, per
 * delivery, when its request arrived (the handler's start, `epochMs`) and,
 * for the hooks marked quiet (a body starting with QUIET_MARK), their
 * `webhook-id`: the bench pairs each with the time of its 202.
 *
 * - `GET /_stats`: `{requests, maxConcurrent, flood, quiet}` (a request is
 *   open from its arrival until its answer is written, the delay included,
 *   so `maxConcurrent` is the concurrency the gateway used on this sink).
 * - `GET /_quiet`: `[[id, at], ...]`, each quiet id's first arrival.
 * - `GET /_window?from=A&to=B`: `{flood}`, flood deliveries arrived in [A, B).
 *
 * It runs in its own process (bench/lib/server-process.ts): `startDelaySink` spawns it.
 */
import { createServer, type ServerResponse } from "node:http"
import { listenAndAnnounce, numberArg, servesHere, spawnServer } from "./server-process.js"

/**
 * Wall-clock milliseconds with sub-millisecond resolution. The bench and the sink each read it in
 * their own process; both derive from the system clock, so their difference is a delay.
 */
export const epochMs = (): number => performance.timeOrigin + performance.now()

/** A quiet hook's body starts with these bytes; every other body is the flood's. */
export const QUIET_MARK = '{"kind":"quiet"'

export interface DelaySinkStats {
  readonly requests: number
  readonly maxConcurrent: number
  readonly flood: number
  readonly quiet: number
}

export interface DelaySink {
  readonly url: string
  readonly stats: () => Promise<DelaySinkStats>
  /** Each quiet `webhook-id` seen, with its first arrival (`epochMs`). */
  readonly quiet: () => Promise<ReadonlyMap<string, number>>
  /** Flood deliveries that arrived in [from, to) (`epochMs`). */
  readonly floodIn: (from: number, to: number) => Promise<number>
  readonly close: () => Promise<void>
}

/** Index of the first element of the ascending `xs` that is >= x. */
const lowerBound = (xs: ReadonlyArray<number>, x: number): number => {
  let lo = 0
  let hi = xs.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (xs[mid]! < x) lo = mid + 1
    else hi = mid
  }
  return lo
}

const serve = (delayMs: number, status: number) => {
  const mark = Buffer.from(QUIET_MARK)
  let requests = 0
  let concurrent = 0
  let maxConcurrent = 0
  // Arrivals are pushed in arrival order, so the array is ascending.
  const floodAt: Array<number> = []
  const quiet = new Map<string, number>()
  const json = (res: ServerResponse, body: unknown) => {
    res.writeHead(200, { "content-type": "application/json" })
    res.end(JSON.stringify(body))
  }
  const server = createServer((req, res) => {
    const at = epochMs()
    if (req.method === "GET") {
      const u = new URL(req.url ?? "/", "http://sink")
      if (u.pathname === "/_stats") return json(res, { requests, maxConcurrent, flood: floodAt.length, quiet: quiet.size } satisfies DelaySinkStats)
      if (u.pathname === "/_quiet") return json(res, [...quiet])
      if (u.pathname === "/_window") {
        const from = Number(u.searchParams.get("from"))
        const to = Number(u.searchParams.get("to"))
        return json(res, { flood: lowerBound(floodAt, to) - lowerBound(floodAt, from) })
      }
      res.writeHead(404).end()
      return
    }
    requests++
    concurrent++
    maxConcurrent = Math.max(maxConcurrent, concurrent)
    let head: Buffer | undefined
    req.on("data", (d: Buffer) => {
      head ??= d
    })
    req.on("end", () => {
      const isQuiet = head !== undefined && head.length >= mark.length && head.subarray(0, mark.length).equals(mark)
      if (!isQuiet) floodAt.push(at)
      else {
        const id = String(req.headers["webhook-id"] ?? "")
        if (!quiet.has(id)) quiet.set(id, at)
      }
      setTimeout(() => {
        concurrent--
        res.writeHead(status, { "content-length": 0 }).end()
      }, delayMs)
    })
  })
  listenAndAnnounce(server)
}

/** Spawn the sink in its own process (so the bench's senders do not delay its answers) and wait until it listens. */
export const startDelaySink = async (o: { readonly delayMs: number; readonly status?: number }): Promise<DelaySink> => {
  const p = await spawnServer(import.meta.url, ["--delay", String(o.delayMs), "--status", String(o.status ?? 204)], "delay sink")
  const get = <A>(path: string) => fetch(`${p.url}${path}`).then((r) => r.json() as Promise<A>)
  return {
    url: p.url,
    stats: () => get<DelaySinkStats>("/_stats"),
    quiet: () => get<Array<[string, number]>>("/_quiet").then((xs) => new Map(xs)),
    floodIn: (from, to) => get<{ flood: number }>(`/_window?from=${from}&to=${to}`).then((r) => r.flood),
    close: p.close
  }
}

if (servesHere(import.meta.url)) serve(numberArg("--delay", 20), numberArg("--status", 204))
