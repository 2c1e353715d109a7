/**
 * The sink client (src/delivery/sink-client.ts) against real sinks on 127.0.0.1:
 * the headers a call sends (one request head, with our own `host`),
 * and the sink's timeout.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as net from "node:net"
import type { AddressInfo } from "node:net"
import type { Envelope } from "../src/domain/envelope.js"
import * as SinkClient from "../src/delivery/sink-client.js"
import { startSink } from "./sink-server.js"

const envelope = (id: string): Envelope => ({
  id,
  tenantId: null,
  sourceId: "src",
  receivedAt: Date.now(),
  contentType: "application/json",
  headers: { "X-Upstream": "shop-1", host: "ingest.example", "content-length": "999" },
  sinks: ["s"],
  idempotencyKey: null,
  body: new TextEncoder().encode(`{"id":"${id}"}`)
})

const sinkOf = (url: string, o: Partial<SinkClient.SinkOptions> = {}): SinkClient.SinkOptions => ({
  name: "s",
  url,
  timeoutMs: 5_000,
  headers: {},
  concurrency: 8,
  retry: { delaysMs: [], jitter: 0, maxRetryAfterMs: 0 },
  ...o
})

/** One call, started now; resolves with its attempt and how long it took by the test's own clock. */
const call = (t: SinkClient.Transport, sink: SinkClient.SinkOptions, id: string) =>
  Effect.callback<{ readonly attempt: SinkClient.Attempt; readonly ms: number }>((resume) => {
    const t0 = performance.now()
    SinkClient.start(t, sink, undefined, envelope(id), Date.now, (attempt) =>
      resume(Effect.succeed({ attempt, ms: performance.now() - t0 })))
  })

const withTransport = <A, E, R>(sink: SinkClient.SinkOptions, f: (t: SinkClient.Transport) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(Effect.sync(() => SinkClient.transport(sink)), f, (t) => Effect.sync(() => SinkClient.close(t)))

describe("sink client", () => {
  it.live("sends one host, the kept headers, the sink's headers, and its own content type and length", () =>
    Effect.gen(function* () {
      const server = yield* startSink()
      const sink = sinkOf(server.url, { headers: { Authorization: "Bearer b", "Content-Type": "text/plain" } })
      const { attempt } = yield* withTransport(sink, (t) => call(t, sink, "msg_1"))
      expect(attempt).toMatchObject({ status: 204, error: undefined })
      const r = server.received[0]!
      expect(r.headers.host).toBe(new URL(server.url).host)
      expect(r.headers["x-upstream"]).toBe("shop-1")
      expect(r.headers["authorization"]).toBe("Bearer b")
      expect(r.headers["content-type"]).toBe("application/json")
      expect(r.headers["content-length"]).toBe(String(r.body.length))
      expect(r.headers["webhook-id"]).toBe("msg_1")
      expect(r.headers["user-agent"]).toBe(SinkClient.USER_AGENT)
      expect(r.body.toString()).toBe(`{"id":"msg_1"}`)
    })
  )

  it.live("a sink's own user-agent and host win; its webhook and framing headers never do", () =>
    Effect.gen(function* () {
      const server = yield* startSink()
      const sink = sinkOf(server.url, {
        headers: { "User-Agent": "shop-relay/2", Host: "sink.example", "Webhook-Id": "forged", "webhook-signature": "v1,forged", "Content-Length": "1" }
      })
      const { attempt } = yield* withTransport(sink, (t) => call(t, sink, "msg_2"))
      expect(attempt).toMatchObject({ status: 204, error: undefined })
      const r = server.received[0]!
      expect(r.headers["user-agent"]).toBe("shop-relay/2")
      expect(r.headers.host).toBe("sink.example")
      expect(r.headers["webhook-id"]).toBe("msg_2")
      expect(r.headers["webhook-signature"]).toBeUndefined()
      expect(r.headers["content-length"]).toBe(String(r.body.length))
    })
  )

  it.live("a header value HTTP forbids, the sink's or the hook's, fails the call as a transport error before anything is sent", () =>
    Effect.gen(function* () {
      const server = yield* startSink()
      const bad = sinkOf(server.url, { headers: { "x-token": "a\r\nb" } })
      expect((yield* withTransport(bad, (t) => call(t, bad, "msg_3"))).attempt).toMatchObject({ status: 0, error: "transport" })
      const sink = sinkOf(server.url)
      const badHook = { ...envelope("msg_4"), headers: { "x-upstream": "a\u0000b" } }
      const attempt = yield* withTransport(sink, (t) =>
        Effect.callback<SinkClient.Attempt>((resume) => {
          SinkClient.start(t, sink, undefined, badHook, Date.now, (a) => resume(Effect.succeed(a)))
        }))
      expect(attempt).toMatchObject({ status: 0, error: "transport" })
      expect(server.received).toHaveLength(0)
    })
  )

  it.live("a hanging call times out at the sink's timeout, and calls started later each at their own", () =>
    Effect.gen(function* () {
      const timeoutMs = 400
      // Calls 1 and 3 hang; 2 and 4 answer at once.
      const server = yield* startSink((_, n) => (n % 2 === 1 ? { status: 204, delayMs: 30_000 } : { status: 204 }))
      const sink = sinkOf(server.url, { timeoutMs })
      const out = yield* withTransport(sink, (t) =>
        Effect.all(
          [0, 1, 2, 3].map((i) => Effect.sleep(i * 150).pipe(Effect.andThen(call(t, sink, `msg_${i}`)))),
          { concurrency: "unbounded" }
        ))
      // Requests reach the sink in start order (spaced 150 ms apart), so the hanging ones are the 1st and 3rd.
      const [a, b, c, d] = out
      for (const hung of [a!, c!]) {
        expect(hung.attempt).toMatchObject({ status: 0, error: "timeout" })
        // Not before its own deadline, and not long after it (a loaded machine may add some delay).
        expect(hung.ms).toBeGreaterThanOrEqual(timeoutMs - 1)
        expect(hung.ms).toBeLessThan(timeoutMs + 250)
      }
      for (const ok of [b!, d!]) {
        expect(ok.attempt).toMatchObject({ status: 204, error: undefined })
        expect(ok.ms).toBeLessThan(timeoutMs)
      }
    })
  )

  it.live("a call that answers in time is not timed out", () =>
    Effect.gen(function* () {
      const server = yield* startSink(() => ({ status: 200, delayMs: 100 }))
      const sink = sinkOf(server.url, { timeoutMs: 300 })
      yield* withTransport(sink, (t) =>
        Effect.gen(function* () {
          for (let i = 0; i < 5; i++) {
            const { attempt } = yield* call(t, sink, `msg_${i}`)
            expect(attempt).toMatchObject({ status: 200, error: undefined })
          }
        }))
    })
  )

  it.live("a call cut before its end never calls back, not even at its timeout", () =>
    Effect.gen(function* () {
      const server = yield* startSink(() => ({ status: 204, delayMs: 30_000 }))
      const sink = sinkOf(server.url, { timeoutMs: 200 })
      yield* withTransport(sink, (t) =>
        Effect.gen(function* () {
          let called = false
          const stop = SinkClient.start(t, sink, undefined, envelope("msg_cut"), Date.now, () => {
            called = true
          })
          yield* Effect.sleep(50)
          stop()
          yield* Effect.sleep(400)
          expect(called).toBe(false)
        }))
    })
  )

  it.live("a 2xx whose body trickles past the sink's timeout is delivered at its head; a non-2xx keeps its first 4 KiB", () =>
    Effect.gen(function* () {
      // One raw server: the first request gets a 200 whose body never ends (a byte every 100 ms),
      // the next a 500 with 10 KiB of body.
      let n = 0
      const server = net.createServer((socket) => {
        socket.on("error", () => {})
        socket.once("data", () => {
          if (n++ === 0) {
            socket.write("HTTP/1.1 200 OK\r\ncontent-length: 10000000\r\n\r\n")
            const timer = setInterval(() => socket.write("x"), 100)
            socket.on("close", () => clearInterval(timer))
          } else socket.end(`HTTP/1.1 500 Oops\r\ncontent-length: 10240\r\n\r\n${"é".repeat(5120)}`)
        })
      })
      yield* Effect.acquireRelease(
        Effect.callback<void>((resume) => {
          server.listen(0, "127.0.0.1", () => resume(Effect.void))
        }),
        () => Effect.callback<void>((resume) => {
          server.close(() => resume(Effect.void))
        })
      )
      const sink = sinkOf(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, { timeoutMs: 500 })
      yield* withTransport(sink, (t) =>
        Effect.gen(function* () {
          const ok = yield* call(t, sink, "msg_trickle")
          expect(ok.attempt).toMatchObject({ status: 200, error: undefined, body: undefined })
          expect(ok.ms).toBeLessThan(sink.timeoutMs)
          const failed = yield* call(t, sink, "msg_500")
          expect(failed.attempt).toMatchObject({ status: 500, error: undefined })
          // 4 KiB of bytes: 2,048 two-byte characters.
          expect(failed.attempt.body).toBe("é".repeat(2048))
        }))
    })
  )
})

