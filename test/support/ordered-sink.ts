/**
 * A sink for the ordered-delivery tests: a node:http server on 127.0.0.1, port 0. Each call's body
 * is a JSON `{k, n}` (ordering key, its number in accepted order); the test's `answer` says the
 * status by key, number and attempt. It records every call and, per key, how many calls were open
 * at once at most (a call is open from its arrival until its answer is written).
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, type Scope } from "effect"

export interface Call {
  readonly k: string
  readonly n: number
  /** 1-based attempt of (k, n) at this sink. */
  readonly attempt: number
  readonly status: number
  readonly at: number
}

export interface OrderedSink {
  readonly url: string
  readonly calls: Array<Call>
  /** Most calls of one key open at once, by key. */
  readonly maxOpen: Map<string, number>
  answer: (k: string, n: number, attempt: number) => number
  /** Delivered (2xx) numbers by key, in arrival order. */
  readonly delivered: (k: string) => Array<number>
}

export const startOrderedSink = (answer: OrderedSink["answer"] = () => 204, delayMs = 2): Effect.Effect<OrderedSink, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<{ readonly sink: OrderedSink; readonly close: () => Promise<void> }>((resume) => {
      const calls: Array<Call> = []
      const open = new Map<string, number>()
      const maxOpen = new Map<string, number>()
      const attempts = new Map<string, number>()
      const sink: OrderedSink = {
        url: "",
        calls,
        maxOpen,
        answer,
        delivered: (k) => calls.filter((c) => c.k === k && c.status < 300).map((c) => c.n)
      }
      const server = createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (c: Buffer) => chunks.push(c))
        req.on("end", () => {
          let k = "?"
          let n = -1
          try {
            const b = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { k?: string; n?: number }
            k = b.k ?? "?"
            n = b.n ?? -1
          } catch {
            // recorded as key "?"
          }
          const now = (open.get(k) ?? 0) + 1
          open.set(k, now)
          maxOpen.set(k, Math.max(maxOpen.get(k) ?? 0, now))
          const id = `${k}\u0000${n}`
          const attempt = (attempts.get(id) ?? 0) + 1
          attempts.set(id, attempt)
          const status = sink.answer(k, n, attempt)
          calls.push({ k, n, attempt, status, at: Date.now() })
          setTimeout(() => {
            open.set(k, open.get(k)! - 1)
            res.writeHead(status)
            res.end()
          }, delayMs)
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        ;(sink as { url: string }).url = `http://127.0.0.1:${port}/hook`
        resume(
          Effect.succeed({
            sink,
            close: () =>
              new Promise<void>((done) => {
                server.closeAllConnections()
                server.close(() => done())
              })
          })
        )
      })
    }),
    ({ close }) => Effect.promise(close)
  ).pipe(Effect.map(({ sink }) => sink))
