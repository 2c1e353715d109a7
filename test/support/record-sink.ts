/**
 * A recording sink for the tests that run a real `ankusa serve` child: a node:http server on
 * 127.0.0.1, port 0, that answers every call with `status` (changeable mid-test) and keeps each
 * call's path, headers, body and arrival time, and how many connections were open at most.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import * as Signature from "../../src/domain/signature.js"

export interface Got {
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: string
  /** Arrival (epoch ms). */
  readonly at: number
}

/** Whether a call's Standard Webhooks signature verifies with `secret` (a `whsec_` string). */
export const verifies = (g: Got, secret: string): boolean =>
  Signature.verify({
    header: (n) => (g.headers[n] === undefined ? undefined : String(g.headers[n])),
    body: g.body,
    keys: [Signature.parseSecret(secret)!],
    now: Date.now()
  })._tag === "Valid"

export interface RecordingSink {
  readonly url: string
  readonly got: Array<Got>
  status: number
  /** Connections open now, and the most at once. */
  readonly sockets: { open: number; max: number }
  readonly close: () => Promise<void>
}

export const startRecordingSink = (status = 204): Promise<RecordingSink> =>
  new Promise((resolve) => {
    const got: Array<Got> = []
    const sockets = { open: 0, max: 0 }
    const state: { status: number } = { status }
    const server: Server = createServer((req, res) => {
      let body = ""
      req.on("data", (c: Buffer) => (body += c.toString("utf8")))
      req.on("end", () => {
        got.push({ path: req.url ?? "", headers: req.headers, body, at: Date.now() })
        res.writeHead(state.status).end()
      })
    })
    server.on("connection", (s) => {
      sockets.open++
      sockets.max = Math.max(sockets.max, sockets.open)
      s.on("close", () => sockets.open--)
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve(
        Object.assign(state, {
          url: `http://127.0.0.1:${port}`,
          got,
          sockets,
          close: () =>
            new Promise<void>((done) => {
              server.closeAllConnections()
              server.close(() => done())
            })
        })
      )
    })
  })
