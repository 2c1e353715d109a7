/**
 * A real HTTP sink for the delivery tests: a node:http server on 127.0.0.1,
 * port 0, that records every request (headers, body bytes, arrival time) and
 * answers what the test's handler says.
 */
import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, type Scope } from "effect"

export interface Received {
  readonly method: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly body: Buffer
  /** Arrival time (ms since the epoch, wall clock). */
  readonly at: number
}

export interface Reply {
  readonly status?: number
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: string
  /** Answer after this long. */
  readonly delayMs?: number
  /** Drop the connection without an answer (a transport error for the client). */
  readonly destroy?: boolean
}

export interface SinkServer {
  readonly url: string
  readonly received: Array<Received>
}

/** `reply(request, n)`: n is the 1-based number of this request at this server. */
export const startSink = (reply: (r: Received, n: number) => Reply = () => ({ status: 204 })): Effect.Effect<SinkServer, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<{ readonly sink: SinkServer; readonly close: () => Promise<void> }>((resume) => {
      const received: Array<Received> = []
      const server = createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (c: Buffer) => chunks.push(c))
        req.on("end", () => {
          const r: Received = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks), at: Date.now() }
          received.push(r)
          const out = reply(r, received.length)
          const send = () => {
            if (out.destroy === true) {
              req.socket.destroy()
              return
            }
            res.writeHead(out.status ?? 204, out.headers ?? {})
            res.end(out.body ?? "")
          }
          if (out.delayMs !== undefined) setTimeout(send, out.delayMs)
          else send()
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(
          Effect.succeed({
            sink: { url: `http://127.0.0.1:${port}/hook`, received },
            close: () =>
              new Promise<void>((done) => {
                server.closeAllConnections()
                server.close(() => done())
              })
          })
        )
      })
    }),
    (s) => Effect.promise(s.close)
  ).pipe(Effect.map((s) => s.sink))
