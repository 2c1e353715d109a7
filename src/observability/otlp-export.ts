/**
 * The span exporter: OTLP over HTTP with JSON bodies (`/v1/traces`), on plain timers and one
 * request at a time. Effect's own (`effect/observability` OtlpExporter) keeps an
 * unbounded buffer and drops silently while disabled, so this one bounds its queue in spans
 * (`telemetry.otlp.maxQueueSpans`) and counts every span it does not deliver in
 * `ankusa_trace_spans_dropped_total{reason}`: a collector that is down or slow costs ingest
 * and delivery nothing but the spans (docs/observability.md).
 * The requests go through the sinks' HTTP/1.1 client (src/delivery/http1.ts), not `node:http`:
 * a `ClientRequest` in the process made the `OutgoingMessage` code that answers every ingest
 * request serve two classes, and that cost each hook more than its export (docs/observability.md).
 */
import { type Context, Metric } from "effect"
import * as Http1 from "../delivery/http1.js"
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

/** An idle connection to the collector is closed after this long (a `Keep-Alive: timeout` hint, when sent, wins). */
const IDLE_MS = 4_000

/**
 * The request head but its `content-length` line: the request line, `host`, the configured
 * headers and `content-type`. Undefined when a header is one HTTP forbids (every export then fails).
 */
const headOf = (u: URL, headers: Readonly<Record<string, string>>): string | undefined => {
  let head = `POST ${u.pathname}${u.search} HTTP/1.1\r\nhost: ${u.host}\r\n`
  for (const [name, value] of Object.entries(headers)) {
    const n = name.toLowerCase()
    if (n === "host" || n === "content-type" || n === "content-length") continue
    if (!Http1.validName(n) || !Http1.validValue(value)) return undefined
    head += `${n}: ${value}\r\n`
  }
  return `${head}content-type: application/json\r\n`
}

/** The exporter; `context` is the metric registry's. Its timers never keep the process alive. */
export const makeExporter = (o: ExportOptions, context: Context.Context<never>): Exporter => {
  const u = new URL(o.url)
  const secure = u.protocol === "https:"
  const hostname = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname
  const pool = Http1.pool({ secure, hostname, port: u.port === "" ? (secure ? 443 : 80) : Number(u.port), maxSockets: 1, idleMs: IDLE_MS })
  const head = headOf(u, o.headers)
  const queueFull = Metric.withAttributes(spansDropped, { reason: "queue_full" })
  const failedExport = Metric.withAttributes(spansDropped, { reason: "export_failed" })
  let queue: Array<TraceSpan> = []
  let sending: Promise<void> | undefined
  let timer: ReturnType<typeof setTimeout> | undefined
  let closed = false

  const post = (batch: Array<TraceSpan>): Promise<void> =>
    new Promise((resolve) => {
      const end = (ok: boolean) => {
        ;(ok ? spansExported : failedExport).updateUnsafe(batch.length, context)
        resolve()
      }
      if (head === undefined) return end(false)
      const body = Buffer.from(encodeBatch(batch, o), "utf8")
      // `exportTimeoutMs`, connect to answer: past it the exchange is cut (its connection closed).
      const timeout = setTimeout(() => (cut(), end(false)), o.timeoutMs)
      // After `close` cuts what is in flight, this timer alone must not hold the process open.
      timeout.unref()
      const cut = pool.send(`${head}content-length: ${body.length}\r\n\r\n`, body, (e) => {
        clearTimeout(timeout)
        end(e._tag === "Answer" && e.status >= 200 && e.status < 300)
      })
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
      pool.close()
    }
  }
}
