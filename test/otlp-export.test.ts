/**
 * The span exporter's batching (src/observability/otlp-export.ts): a request carries a full batch
 * while spans come faster than the interval; what is less than a batch waits for the interval (or
 * a flush). An OTLP/HTTP receiver on 127.0.0.1 decodes what it sends.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import { Context } from "effect"
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
})
