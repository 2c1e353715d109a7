/**
 * The span exporter: OTLP over HTTP with JSON bodies (`/v1/traces`), on plain timers and one
 * `node:http` request at a time. Effect's own (`effect/observability` OtlpExporter) keeps an
 * unbounded buffer and drops silently while disabled, so this one bounds its queue in spans
 * (`telemetry.otlp.maxQueueSpans`) and counts every span it does not deliver in
 * `ankusa_trace_spans_dropped_total{reason}`: a collector that is down or slow costs ingest
 * and delivery nothing but the spans (docs/observability.md).
 */
import { type Context, Metric } from "effect"
import * as http from "node:http"
import * as https from "node:https"
import type { TraceSpan } from "./trace-span.js"

export const spansExported = Metric.counter("ankusa_trace_spans_exported_total", {
  description: "Spans the OTLP collector accepted",
  incremental: true
})

export const spansDropped = Metric.counter("ankusa_trace_spans_dropped_total", {
  description: "Sampled spans not exported, by reason: queue_full (the bounded queue was full) or export_failed (the collector refused or could not be reached)",
  incremental: true
})

export interface ExportOptions {
  /** The traces endpoint, e.g. `http://127.0.0.1:4318/v1/traces`. */
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  /** Spans a request carries at most; a full batch is sent at once. */
  readonly batchSize: number
  /** A batch that is not full is sent this long after its first span. */
  readonly intervalMs: number
  /** Spans waiting at most; past it a span is dropped (and counted). */
  readonly maxQueueSpans: number
  /** One export request's limit, connect to answer. */
  readonly timeoutMs: number
  readonly serviceName: string
  readonly serviceVersion: string
}

export interface Exporter {
  readonly push: (span: TraceSpan) => void
  /** Send what is queued (one request a batch, in turn); resolves when they are answered or failed. */
  readonly flush: () => Promise<void>
  readonly close: () => void
}

const KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const

/** An attribute's OTLP/JSON `AnyValue`, as text. */
const valueOf = (v: unknown): string =>
  typeof v === "number"
    ? Number.isInteger(v) ? `{"intValue":${v}}` : Number.isFinite(v) ? `{"doubleValue":${v}}` : `{"stringValue":"${v}"}`
    : typeof v === "boolean" ? `{"boolValue":${v}}` : `{"stringValue":${JSON.stringify(String(v))}}`

/**
 * One span as OTLP/JSON text, written directly (no intermediate objects): ids are hex and times
 * decimal, so only the name, the trace state and string values go through `JSON.stringify`.
 */
const otlpSpan = (s: TraceSpan): string => {
  const status = s.status
  let out = `{"traceId":"${s.traceId}","spanId":"${s.spanId}"`
  if (s.parentSpanId !== undefined) out += `,"parentSpanId":"${s.parentSpanId}"`
  if (s.traceState !== undefined) out += `,"traceState":${JSON.stringify(s.traceState)}`
  out += `,"name":${JSON.stringify(s.name)},"kind":${KIND[s.kind]},"startTimeUnixNano":"${status.startTime}","endTimeUnixNano":"${status._tag === "Ended" ? status.endTime : status.startTime}","attributes":[`
  let first = true
  for (const [key, v] of s.attributes) {
    out += `${first ? "" : ","}{"key":${JSON.stringify(key)},"value":${valueOf(v)}}`
    first = false
  }
  out += `],"links":[`
  for (let i = 0; i < s.linked.length; i++) out += `${i === 0 ? "" : ","}{"traceId":"${s.linked[i]!.traceId}","spanId":"${s.linked[i]!.spanId}"}`
  return `${out}],"status":{"code":${s.error ? 2 : 0}}}`
}

/** The request body of one batch (OTLP/JSON `ExportTraceServiceRequest`), encoded when the batch is sent. */
export const encodeBatch = (spans: ReadonlyArray<TraceSpan>, o: Pick<ExportOptions, "serviceName" | "serviceVersion">): string => {
  const version = JSON.stringify(o.serviceVersion)
  let out = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":${JSON.stringify(o.serviceName)}}},{"key":"service.version","value":{"stringValue":${version}}}]},"scopeSpans":[{"scope":{"name":"ankusa","version":${version}},"spans":[`
  for (let i = 0; i < spans.length; i++) out += (i === 0 ? "" : ",") + otlpSpan(spans[i]!)
  return `${out}]}]}]}`
}

/** The exporter; `context` is the metric registry's. Its timers never keep the process alive. */
export const makeExporter = (o: ExportOptions, context: Context.Context<never>): Exporter => {
  const u = new URL(o.url)
  const client = u.protocol === "https:" ? https : http
  const agent = new client.Agent({ keepAlive: true, maxSockets: 1 })
  const queueFull = Metric.withAttributes(spansDropped, { reason: "queue_full" })
  const failedExport = Metric.withAttributes(spansDropped, { reason: "export_failed" })
  let queue: Array<TraceSpan> = []
  let sending: Promise<void> | undefined
  let timer: ReturnType<typeof setTimeout> | undefined
  let closed = false

  const post = (batch: Array<TraceSpan>): Promise<void> =>
    new Promise((resolve) => {
      const body = encodeBatch(batch, o)
      let done = false
      const end = (ok: boolean) => {
        if (done) return
        done = true
        ;(ok ? spansExported : failedExport).updateUnsafe(batch.length, context)
        resolve()
      }
      const req = client.request(u, {
        method: "POST",
        agent,
        timeout: o.timeoutMs,
        headers: { ...o.headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) }
      }, (res) => {
        res.resume()
        res.once("end", () => end(res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300))
        res.once("error", () => end(false))
      })
      req.once("timeout", () => req.destroy(new Error("timeout")))
      req.once("error", () => end(false))
      req.end(body)
    })

  /**
   * Batches in turn, one request in flight at most: while a full batch is queued, or with `all`
   * (the interval, a flush) until the queue is empty. A batch that is not full waits for the
   * interval, so an export request carries `batchSize` spans while spans come faster than that.
   */
  const drain = (all: boolean): Promise<void> => {
    if (sending !== undefined) return sending
    if (timer !== undefined) (clearTimeout(timer), (timer = undefined))
    const loop = async () => {
      while (queue.length >= o.batchSize || (all && queue.length > 0)) {
        const batch = queue.length <= o.batchSize ? queue : queue.slice(0, o.batchSize)
        queue = batch === queue ? [] : queue.slice(o.batchSize)
        await post(batch)
      }
    }
    sending = loop().finally(() => {
      sending = undefined
      // What is left is less than a batch: it waits for the next interval.
      if (queue.length > 0) arm()
    })
    return sending
  }

  const arm = () => {
    if (timer !== undefined || closed) return
    timer = setTimeout(() => ((timer = undefined), void drain(true)), o.intervalMs)
    timer.unref()
  }

  const push = (span: TraceSpan): void => {
    if (closed) return
    if (queue.length >= o.maxQueueSpans) return queueFull.updateUnsafe(1, context)
    queue.push(span)
    if (sending !== undefined) return
    if (queue.length >= o.batchSize) void drain(false)
    else arm()
  }

  return {
    push,
    flush: async () => {
      while (sending !== undefined || queue.length > 0) await drain(true)
    },
    close: () => {
      closed = true
      if (timer !== undefined) clearTimeout(timer)
      agent.destroy()
    }
  }
}
