/**
 * Issue 43: OpenTelemetry traces from sender to receiver (docs/observability.md). A real
 * `ankusa serve` child exports to an OTLP/HTTP receiver on 127.0.0.1 inside the test, which
 * decodes the JSON the node sends; the receivers are recording sinks on 127.0.0.1.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import * as Signature from "../src/domain/signature.js"
import { Effect } from "effect"
import { load } from "../src/config/config.js"
import { defaults, redact } from "../src/domain/config.js"
import { formatTraceparent, hookTraceId, parseTraceparent, sampledByRatio } from "../src/domain/trace-context.js"
import { attr, closedPort, type OtlpReceiver, type OtlpSpan, startOtlpReceiver } from "./support/otlp-receiver.js"
import { type Got, type RecordingSink, startRecordingSink } from "./support/record-sink.js"
import { type ServeChild, startServeChild } from "./support/serve-child.js"

const ADMIN = "trace-admin-token-0001"
const SOURCE_SECRET = `whsec_${Buffer.from("source-secret-bytes-0123456789").toString("base64")}`
const SINK_SECRET = `whsec_${Buffer.from("sink-secret-bytes-0123456789ab").toString("base64")}`
const SINK_AUTH = "Bearer sink-credential-value-42"
const COLLECTOR_KEY = "collector-api-key-value-77"
const QUERY_TOKEN = "query-token-value-99"

const open: Array<{ close: () => Promise<void> } | ServeChild> = []
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await ("stop" in o ? o.stop() : o.close())
})

const until = async <A>(what: string, get: () => A | undefined | false, ms = 20_000): Promise<A> => {
  const end = Date.now() + ms
  for (;;) {
    const v = get()
    if (v !== undefined && v !== false) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

const receiver = async () => {
  const r = await startOtlpReceiver()
  open.push(r)
  return r
}

const sink = async (status = 204) => {
  const s = await startRecordingSink(status)
  open.push(s)
  return s
}

interface NodeOptions {
  readonly endpoint: string
  readonly sink: RecordingSink
  readonly retry?: object
  readonly otlp?: object
}

const serve = async (o: NodeOptions): Promise<ServeChild> => {
  const node = await startServeChild({
    sources: [{ id: "shop", tenant: "acme", verification: { type: "standard-webhooks", secret: SOURCE_SECRET }, routes: ["orders"] }],
    sinks: [{
      name: "orders",
      url: `${o.sink.url}/hooks/in?token=${QUERY_TOKEN}`,
      secret: SINK_SECRET,
      headers: { authorization: SINK_AUTH },
      retry: o.retry ?? { delaysMs: [50, 50, 50], jitter: 0 }
    }],
    adminTokens: [{ name: "ops", token: ADMIN, tenants: "*" }],
    http: { demoSink: false },
    pipeline: { tickMs: 20 },
    telemetry: { otlp: { endpoint: o.endpoint, headers: { "x-api-key": COLLECTOR_KEY }, batchIntervalMs: 50, ...o.otlp } }
  })
  open.push(node)
  return node
}

const hex = (bytes: number) => randomBytes(bytes).toString("hex")

/** A signed hook, with the sender's `traceparent` when `trace` is given. */
const send = async (node: ServeChild, body: string, trace?: { readonly traceId: string; readonly spanId: string }) => {
  const id = `msg_${hex(8)}`
  const ts = Math.floor(Date.now() / 1000)
  const res = await fetch(`${node.url}/v1/hooks/shop`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "user-agent": "sender-agent/9.9 (ua-value)",
      "x-event-kind": "order-created-header-value",
      "webhook-id": id,
      "webhook-timestamp": String(ts),
      "webhook-signature": `v1,${Signature.sign(Signature.parseSecret(SOURCE_SECRET)!, id, ts, body)}`,
      ...(trace === undefined ? {} : { traceparent: `00-${trace.traceId}-${trace.spanId}-01`, tracestate: "vendor=opaque-state" })
    },
    body
  })
  return { status: res.status, answer: (await res.json()) as { id: string } }
}

const traceparentOf = (g: Got) => parseTraceparent(String(g.headers["traceparent"]))
const inTrace = (r: OtlpReceiver, traceId: string) => r.spans.filter((s) => s.traceId === traceId)
const named = (spans: ReadonlyArray<OtlpSpan>, name: string) => spans.filter((s) => s.name === name)

const metric = async (node: ServeChild, name: string): Promise<number> => {
  const text = await (await fetch(`${node.url}/metrics`)).text()
  return text.split("\n").filter((l) => l.startsWith(name)).reduce((n, l) => n + Number(l.slice(l.lastIndexOf(" ") + 1)), 0)
}

describe("tracing", () => {
  it("a hook sent with a traceparent is traced through ingest, commit and delivery in the sender's trace", async () => {
    const [r, s] = [await receiver(), await sink()]
    const node = await serve({ endpoint: r.url, sink: s })
    const sender = { traceId: hex(16), spanId: hex(8) }
    const { status, answer } = await send(node, `{"order":1}`, sender)
    expect(status).toBe(202)
    const spans = await until("the outcome commit's span", () => {
      const t = inTrace(r, sender.traceId)
      return named(t, "ankusa.pipeline.outcome_commit").length > 0 && named(t, "ankusa.queue.claim").length > 0 && t
    })
    const [ingest] = named(spans, "POST /v1/hooks/:source")
    expect(ingest).toBeDefined()
    expect(ingest!.parentSpanId).toBe(sender.spanId)
    expect(ingest!.kind).toBe(2)
    expect(attr(ingest!, "http.response.status_code")).toBe(202)
    expect(attr(ingest!, "ankusa.hook_id")).toBe(answer.id)
    expect(attr(ingest!, "ankusa.tenant")).toBe("acme")
    expect(attr(ingest!, "ankusa.source")).toBe("shop")
    const [commit] = named(spans, "ankusa.writer.commit")
    expect(commit!.parentSpanId).toBe(ingest!.spanId)
    expect(named(spans, "ankusa.queue.claim")[0]!.parentSpanId).toBe(ingest!.spanId)
    const [attempt] = named(spans, "POST")
    expect(attempt!.kind).toBe(3)
    expect(attempt!.parentSpanId).toBe(ingest!.spanId)
    expect(attr(attempt!, "url.full")).toBe(`${s.url}/hooks/in`)
    expect(attr(attempt!, "http.response.status_code")).toBe(204)
    expect(attr(attempt!, "ankusa.attempt")).toBe(1)
    expect(attr(attempt!, "ankusa.destination")).toBe("orders")
    expect(attr(attempt!, "ankusa.hook_id")).toBe(answer.id)
    expect(named(spans, "ankusa.pipeline.outcome_commit")[0]!.parentSpanId).toBe(attempt!.spanId)
    // The receiver got the trace: its traceparent names the attempt's span, the sender's tracestate carried on.
    const got = traceparentOf(s.got[0]!)
    expect(got).toEqual({ traceId: sender.traceId, spanId: attempt!.spanId, sampled: true })
    expect(s.got[0]!.headers["tracestate"]).toBe("vendor=opaque-state")
    // The collector's headers go with every export.
    expect(r.requests.every((h) => h["x-api-key"] === COLLECTOR_KEY)).toBe(true)
  })

  it("the delivery carries a traceparent that continues the hook's trace, on every retry", async () => {
    const [r, s] = [await receiver(), await sink(503)]
    const node = await serve({ endpoint: r.url, sink: s })
    const sender = { traceId: hex(16), spanId: hex(8) }
    expect((await send(node, `{"order":2}`, sender)).status).toBe(202)
    await until("two failed calls", () => s.got.length >= 2)
    s.status = 204
    await until("the delivery", () => s.got.length >= 3)
    const attempts = await until("three attempt spans", () => {
      const a = named(inTrace(r, sender.traceId), "POST")
      return a.length >= 3 && a.every((x) => attr(x, "ankusa.attempt") !== undefined) && a
    })
    const [ingest] = named(inTrace(r, sender.traceId), "POST /v1/hooks/:source")
    const sent = s.got.map(traceparentOf)
    expect(sent.every((t) => t?.traceId === sender.traceId && t.sampled)).toBe(true)
    // A new span each attempt, each a child of the hook's ingest span, numbered.
    expect(new Set(sent.map((t) => t!.spanId)).size).toBe(s.got.length)
    for (const t of sent) {
      const span = attempts.find((a) => a.spanId === t!.spanId)
      expect(span?.parentSpanId).toBe(ingest!.spanId)
    }
    const bySpan = new Map(attempts.map((a) => [a.spanId, a]))
    expect(sent.map((t) => attr(bySpan.get(t!.spanId)!, "ankusa.attempt"))).toEqual(s.got.map((_, i) => i + 1))
    expect(sent.map((t) => attr(bySpan.get(t!.spanId)!, "http.response.status_code"))).toEqual([...s.got.slice(0, -1).map(() => 503), 204])
    expect(bySpan.get(sent[0]!.spanId)!.status.code).toBe(2)
  })

  it("an unsampled hook with no traceparent sends one trace, flag 00, on every retry, and nothing is exported", async () => {
    const [r, s] = [await receiver(), await sink(503)]
    const node = await serve({ endpoint: r.url, sink: s, otlp: { samplingRatio: 0 } })
    const { status, answer } = await send(node, `{"order":7}`)
    expect(status).toBe(202)
    await until("two failed calls", () => s.got.length >= 2)
    s.status = 204
    await until("the delivery", () => s.got.length >= 3)
    const sent = s.got.map(traceparentOf)
    // The trace is the hook's own (hookTraceId of its id): nothing stored, the same on every attempt.
    expect(sent.every((t) => t?.traceId === hookTraceId(answer.id) && !t.sampled)).toBe(true)
    expect(new Set(sent.map((t) => t!.spanId)).size).toBe(s.got.length)
    expect(s.got.every((g) => g.headers["tracestate"] === undefined)).toBe(true)
    await node.stop()
    expect(r.spans).toEqual([])
  })

  it("a replayed hook's delivery joins its original trace", async () => {
    const [r, s] = [await receiver(), await sink(500)]
    const node = await serve({ endpoint: r.url, sink: s, retry: { delaysMs: [], jitter: 0 } })
    const sender = { traceId: hex(16), spanId: hex(8) }
    const { answer } = await send(node, `{"order":3}`, sender)
    await until("the dead letter", () => s.got.length >= 1)
    s.status = 204
    // The row is dead once its outcome is committed: replay until it revives.
    const end = Date.now() + 20_000
    for (;;) {
      const res = await fetch(`${node.url}/v1/dlq/replay`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
        body: JSON.stringify({ ids: [answer.id] })
      })
      expect(res.status).toBe(200)
      if (((await res.json()) as { revived: number }).revived === 1) break
      if (Date.now() > end) throw new Error("the hook never reached the DLQ")
      await new Promise((done) => setTimeout(done, 50))
    }
    await until("the replayed delivery", () => s.got.length >= 2)
    const replayed = traceparentOf(s.got[1]!)
    expect(replayed?.traceId).toBe(sender.traceId)
    const attempts = await until("both attempt spans", () => {
      const a = named(inTrace(r, sender.traceId), "POST")
      return a.length >= 2 && a
    })
    const [ingest] = named(inTrace(r, sender.traceId), "POST /v1/hooks/:source")
    const span = attempts.find((a) => a.spanId === replayed!.spanId)
    expect(span?.parentSpanId).toBe(ingest!.spanId)
    expect(attr(span!, "http.response.status_code")).toBe(204)
    expect(replayed!.spanId).not.toBe(traceparentOf(s.got[0]!)!.spanId)
  })

  it("no span attribute holds a body, a header value or a secret", async () => {
    const [r, s] = [await receiver(), await sink(503)]
    const node = await serve({ endpoint: r.url, sink: s })
    const sender = { traceId: hex(16), spanId: hex(8) }
    const body = `{"card":"4111-body-marker-1111"}`
    expect((await send(node, body, sender)).status).toBe(202)
    await until("a failed call", () => s.got.length >= 1)
    s.status = 204
    await until("every span of the trace", () => {
      const t = inTrace(r, sender.traceId)
      return named(t, "POST").some((a) => attr(a, "http.response.status_code") === 204) && named(t, "ankusa.pipeline.outcome_commit").length >= 2
    })
    const forbidden = [
      "4111-body-marker-1111", // the body
      "sender-agent", "order-created-header-value", "vendor=opaque-state", // the sender's header values
      SOURCE_SECRET, SINK_SECRET, SINK_AUTH, "sink-credential-value", COLLECTOR_KEY, ADMIN, QUERY_TOKEN,
      Buffer.from("source-secret-bytes-0123456789").toString("base64"),
      String(s.got[0]!.headers["webhook-signature"]).slice(3, 20)
    ]
    expect(r.spans.length).toBeGreaterThan(4)
    for (const span of r.spans) {
      for (const a of span.attributes) {
        const text = JSON.stringify(a.value)
        for (const f of forbidden) expect(text, `${span.name} ${a.key}`).not.toContain(f)
        expect(a.key).not.toMatch(/header|body|secret|token|authorization/i)
      }
    }
  })

  it("an unreachable collector does not slow ingest and its dropped spans are counted", async () => {
    const s = await sink()
    const port = await closedPort()
    const node = await serve({ endpoint: `http://127.0.0.1:${port}/v1/traces`, sink: s, otlp: { maxQueueSpans: 16, batchSize: 8 } })
    const hooks = 200
    const statuses: Array<number> = []
    for (let i = 0; i < hooks; i += 20) {
      const batch = await Promise.all(Array.from({ length: 20 }, (_, j) => send(node, `{"n":${i + j}}`, { traceId: hex(16), spanId: hex(8) })))
      statuses.push(...batch.map((b) => b.status))
    }
    // Ingest answers every hook at once, whatever the exporter is doing.
    expect(statuses).toEqual(Array.from({ length: hooks }, () => 202))
    await until("every delivery", () => s.got.length >= hooks, 60_000)
    // Every sampled span (one ingest and one attempt span a hook at least) is counted as dropped, none exported.
    let dropped = 0
    for (const end = Date.now() + 20_000; dropped < 2 * hooks && Date.now() < end; await new Promise((done) => setTimeout(done, 100))) {
      dropped = await metric(node, "ankusa_trace_spans_dropped_total")
    }
    expect(dropped).toBeGreaterThanOrEqual(2 * hooks)
    expect(await metric(node, 'ankusa_trace_spans_dropped_total{reason="queue_full"}')).toBeGreaterThan(0)
    expect(await metric(node, "ankusa_trace_spans_exported_total")).toBe(0)
  })

  it("log lines written during a delivery carry its trace id", async () => {
    const [r, s] = [await receiver(), await sink(503)]
    const node = await serve({ endpoint: r.url, sink: s })
    const sender = { traceId: hex(16), spanId: hex(8) }
    expect((await send(node, `{"order":6}`, sender)).status).toBe(202)
    await until("a failed call", () => s.got.length >= 1)
    s.status = 204
    await until("the delivery", () => s.got.length >= 2)
    const line = await until("the retry's log line", () =>
      node.stdout().split("\n").filter((l) => l.includes("attempt failed; retry scheduled")).map((l) => JSON.parse(l) as Record<string, unknown>)[0]
    )
    const first = traceparentOf(s.got[0]!)!
    expect(line["traceId"]).toBe(sender.traceId)
    expect(line["spanId"]).toBe(first.spanId)
    // Lines written outside a delivery carry none.
    const serving = node.stdout().split("\n").find((l) => l.includes("ankusa serving"))!
    expect(JSON.parse(serving)).not.toHaveProperty("traceId")
  })
})

describe("trace context", () => {
  it("traceparent round-trips, and a malformed one is not continued", () => {
    const c = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", sampled: true }
    expect(parseTraceparent(formatTraceparent(c))).toEqual(c)
    expect(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "k=v")).toEqual({ ...c, sampled: false, traceState: "k=v" })
    // A later version is read by its first fields; version ff, zero ids, upper case and a 00 with a tail are not.
    expect(parseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra")?.traceId).toBe(c.traceId)
    for (const bad of [
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
      undefined
    ]) expect(parseTraceparent(bad), String(bad)).toBeUndefined()
    // A tracestate over 512 characters or with a control character is dropped, the traceparent kept.
    expect(parseTraceparent(formatTraceparent(c), "k=" + "v".repeat(600))).toEqual(c)
  })

  it("the ratio sampler decides by the trace id, so every span of a trace decides alike", () => {
    const ids = Array.from({ length: 2_000 }, () => hex(16))
    expect(ids.every((id) => sampledByRatio(id, 1))).toBe(true)
    expect(ids.some((id) => sampledByRatio(id, 0))).toBe(false)
    const share = ids.filter((id) => sampledByRatio(id, 0.25)).length / ids.length
    expect(share).toBeGreaterThan(0.15)
    expect(share).toBeLessThan(0.35)
    expect(ids.map((id) => sampledByRatio(id, 0.25))).toEqual(ids.map((id) => sampledByRatio(id, 0.25)))
  })

  it("a hook's own trace id is fixed by its id, 32 random-looking hex digits, one per hook", () => {
    const ids = Array.from({ length: 4_000 }, (_, i) => `h_9f3c2a1b0d4e5f60_${i.toString(16).padStart(16, "0")}`)
    const traces = ids.map(hookTraceId)
    expect(traces.map((t) => /^[0-9a-f]{32}$/.test(t)).every(Boolean)).toBe(true)
    expect(new Set(traces).size).toBe(ids.length)
    expect(ids.map(hookTraceId)).toEqual(traces)
    expect(traces.every((t) => parseTraceparent(`00-${t}-00f067aa0ba902b7-00`)?.traceId === t)).toBe(true)
    // Consecutive ids give digits a ratio sampler can use (its share near the ratio).
    const share = traces.filter((t) => sampledByRatio(t, 0.25)).length / traces.length
    expect(share).toBeGreaterThan(0.2)
    expect(share).toBeLessThan(0.3)
  })

  it("telemetry is off by default, a bad value names its key, and the collector's header values are redacted", async () => {
    expect(defaults.telemetry.otlp.endpoint).toBe("")
    const message = (env: Record<string, string>) => Effect.runPromise(Effect.flip(load({ env }))).then((e) => e.message)
    expect(await message({ ANKUSA_OTLP_SAMPLING_RATIO: "2" })).toMatch(/^config error at telemetry\.otlp\.samplingRatio .*ANKUSA_OTLP_SAMPLING_RATIO/)
    expect(await message({ ANKUSA_OTLP_ENDPOINT: "ftp://127.0.0.1/v1/traces" })).toMatch(/^config error at telemetry\.otlp\.endpoint .*expected an http/)
    const shown = redact({ ...defaults, telemetry: { ...defaults.telemetry, otlp: { ...defaults.telemetry.otlp, headers: { "x-api-key": COLLECTOR_KEY } } } })
    expect(JSON.stringify(shown)).not.toContain(COLLECTOR_KEY)
  })
})
