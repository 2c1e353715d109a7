/**
 * Two ways to send hooks to an ingest endpoint, for bench/noisy-neighbour.ts and
 * bench/endpoint-fanout.ts:
 *
 * - `queueHooks`: exactly `count` requests (one, or several in turn), closed loop over raw keep-alive
 *   sockets (bench/lib/load.ts's model, but counted rather than timed): a
 *   backlog queued as fast as the server acknowledges it.
 * - `pacedHooks`: an open loop, one request every `periodMs` whatever the
 *   answers (a light tenant's steady trickle), each 202's time (`epochMs`)
 *   and hook id kept.
 */
import { Agent, request } from "node:http"
import { connect, type Socket } from "node:net"
import { epochMs } from "./delay-sink.js"
import { onAnswers } from "./load.js"

export interface QueueResult {
  readonly seconds: number
  readonly statuses: Readonly<Record<string, number>>
  /** Requests lost to a socket error or close before their answer (not resent: the server may have taken them). */
  readonly errors: number
}

export const queueHooks = (o: {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string
  readonly connections: number
  readonly count: number
  /** One raw request (bench/lib/load.ts `rawPost`) sent `count` times, or several sent in turn. */
  readonly request: Buffer | ReadonlyArray<Buffer>
}): Promise<QueueResult> =>
  new Promise((resolve) => {
    const url = new URL(o.origin)
    const statuses: Record<string, number> = {}
    const started = performance.now()
    let sent = 0
    let ended = 0
    let errors = 0
    let finished = false
    const sockets = new Set<Socket>()
    const end = () => {
      if (finished || ended < o.count) return
      finished = true
      for (const s of sockets) s.destroy()
      resolve({ seconds: (performance.now() - started) / 1000, statuses, errors })
    }
    const connection = () => {
      if (sent >= o.count) return
      const socket = connect(Number(url.port), url.hostname)
      sockets.add(socket)
      socket.setNoDelay(true)
      let waiting = false
      const send = () => {
        if (sent >= o.count) return socket.end()
        const r = Buffer.isBuffer(o.request) ? o.request : o.request[sent % o.request.length]!
        sent++
        waiting = true
        socket.write(r)
      }
      socket.on("connect", send)
      onAnswers(socket, (status) => {
        statuses[status] = (statuses[status] ?? 0) + 1
        waiting = false
        ended++
        end()
        send()
      })
      socket.on("error", () => {})
      socket.on("close", () => {
        sockets.delete(socket)
        if (finished) return
        if (waiting) {
          errors++
          ended++
          end()
        }
        // The server closed a keep-alive connection (or it failed): go on with another.
        connection()
      })
    }
    for (let i = 0; i < Math.min(o.connections, o.count); i++) connection()
  })

export interface Ack {
  readonly i: number
  /** `epochMs` when the request was sent, and when its answer's head arrived. */
  readonly sentAt: number
  readonly ackAt: number
  readonly status: number
  /** The hook id of a 202 (`{"id", "seq"}`), else undefined. */
  readonly id: string | undefined
}

/** `count` POSTs to `url`, the i-th sent at start + i × periodMs (not waiting for earlier answers). */
export const pacedHooks = (o: {
  readonly url: string
  readonly count: number
  readonly periodMs: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: (i: number) => Buffer
}): Promise<ReadonlyArray<Ack>> =>
  new Promise((resolve) => {
    const u = new URL(o.url)
    const agent = new Agent({ keepAlive: true, maxSockets: 8 })
    const acks: Array<Ack> = []
    const t0 = performance.now()
    const done = () => {
      if (acks.length < o.count) return
      agent.destroy()
      resolve(acks.sort((a, b) => a.i - b.i))
    }
    const one = (i: number) => {
      const body = o.body(i)
      const sentAt = epochMs()
      // Each request is recorded once, whichever of its answer's end or an error comes first.
      let recorded = false
      const record = (a: Ack) => {
        if (recorded) return
        recorded = true
        acks.push(a)
        done()
      }
      const fail = () => record({ i, sentAt, ackAt: epochMs(), status: 0, id: undefined })
      const req = request(
        {
          agent,
          method: "POST",
          hostname: u.hostname,
          port: u.port,
          path: u.pathname,
          headers: { ...o.headers, "content-length": String(body.length) }
        },
        (res) => {
          const ackAt = epochMs()
          let text = ""
          res.setEncoding("utf8")
          res.on("data", (d: string) => (text += d))
          res.on("end", () => {
            let id: string | undefined
            try {
              const parsed = JSON.parse(text) as { id?: unknown }
              if (res.statusCode === 202 && typeof parsed.id === "string") id = parsed.id
            } catch {
              // not JSON: no id
            }
            record({ i, sentAt, ackAt, status: res.statusCode ?? 0, id })
          })
          res.on("error", fail)
        }
      )
      req.setTimeout(30_000, () => req.destroy())
      req.on("error", fail)
      req.end(body)
    }
    for (let i = 0; i < o.count; i++) {
      setTimeout(() => one(i), Math.max(0, t0 + i * o.periodMs - performance.now()))
    }
  })
