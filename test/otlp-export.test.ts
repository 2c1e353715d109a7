/**
 * The span exporter's batching (src/observability/otlp-export.ts): a request carries a full batch
 * while spans come faster than the interval; what is less than a batch waits for the interval (or
 * a flush). An OTLP/HTTP receiver on 127.0.0.1 decodes what it sends.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import { Context } from "effect"
import { createServer, type Socket } from "node:net"
import { makeExporter } from "../src/observability/otlp-export.js"
import { newSpanId, newTraceId, nowNanos, TraceSpan } from "../src/observability/trace-span.js"
import { type OtlpReceiver, startOtlpReceiver } from "./support/otlp-receiver.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const until = async (what: string, ok: () => boolean) => {
  const end = Date.now() + 10_000
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(10)
  }
}

describe("the OTLP span exporter", () => {
  it("an export request carries a whole batch, and the rest waits for the interval or a flush", async () => {
    const receiver: OtlpReceiver = await startOtlpReceiver()
    cleanups.push(() => receiver.close())
    const exporter = makeExporter(
      { url: receiver.url, headers: {}, batchSize: 100, intervalMs: 60_000, maxQueueSpans: 1_000, timeoutMs: 5_000, serviceName: "ankusa", serviceVersion: "test" },
      Context.empty()
    )
    cleanups.push(() => exporter.close())
    const span = () => {
      const s = new TraceSpan("delivery", "client", newTraceId(), newSpanId(), undefined, true, undefined, nowNanos(), exporter.push)
      s.endNow()
    }
    for (let i = 0; i < 100; i++) span()
    // The first batch is on its way: 30 more arrive while it is.
    for (let i = 0; i < 30; i++) span()
    await until("the first export request", () => receiver.requests.length === 1)
    expect(receiver.spans.length).toBe(100)
    // Less than a batch left, and the interval a minute away: nothing is sent after the first answer.
    await sleep(300)
    expect(receiver.requests.length).toBe(1)
    await exporter.flush()
    expect(receiver.requests.length).toBe(2)
    expect(receiver.spans.length).toBe(130)
  })

  it("an export the collector never answers ends at exportTimeoutMs, and the next goes on a new connection", async () => {
    // A collector that takes the connection and the request and never answers.
    const held: Array<Socket> = []
    const server = createServer((s) => (held.push(s), s.resume()))
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    cleanups.push(() => (held.forEach((s) => s.destroy()), new Promise<void>((r) => server.close(() => r()))))
    const port = (server.address() as { port: number }).port
    const exporter = makeExporter(
      { url: `http://127.0.0.1:${port}/v1/traces`, headers: {}, batchSize: 10, intervalMs: 60_000, maxQueueSpans: 100, timeoutMs: 200, serviceName: "ankusa", serviceVersion: "test" },
      Context.empty()
    )
    cleanups.push(() => exporter.close())
    const span = () => new TraceSpan("delivery", "client", newTraceId(), newSpanId(), undefined, true, undefined, nowNanos(), exporter.push).endNow()
    span()
    const started = performance.now()
    await exporter.flush()
    expect(performance.now() - started).toBeGreaterThanOrEqual(150)
    expect(performance.now() - started).toBeLessThan(2_000)
    span()
    await exporter.flush()
    expect(held.length).toBe(2)
  })
})
