/**
 * The tracing settings of the configuration (`telemetry`): OTLP over HTTP, off until
 * `telemetry.otlp.endpoint` is set. src/domain/config.ts puts them in the whole file;
 * docs/configuration.md and docs/observability.md list every key.
 */
import { Schema } from "effect"
import { int, withDefault } from "./schema-parts.js"

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/

/** An `http://` or `https://` URL, or "" (tracing off). */
const Endpoint = Schema.String.check(
  Schema.makeFilter((s) => {
    if (s === "") return true
    try {
      const u = new URL(s)
      return u.protocol === "http:" || u.protocol === "https:" || "expected an http:// or https:// URL (the collector's /v1/traces)"
    } catch {
      return "expected an http:// or https:// URL (the collector's /v1/traces)"
    }
  })
)

/** Sent with every export (a collector's API key): names checked here, values kept out of `GET /v1/config`. */
const ExportHeaders = Schema.Record(Schema.String, Schema.String).check(
  Schema.makeFilter((h) =>
    Object.entries(h).flatMap(([k, v]) =>
      !HEADER_NAME.test(k)
        ? [{ path: [k], issue: "expected an HTTP header name" }]
        : /[\0\r\n]/.test(v) ? [{ path: [k], issue: "expected a header value without CR, LF or NUL" }] : []
    )
  )
)

const Ratio = Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 1 }))

export const Otlp = Schema.Struct({
  /** The collector's traces endpoint (OTLP/HTTP, JSON bodies), e.g. `http://127.0.0.1:4318/v1/traces`; "" is off. */
  endpoint: withDefault(Endpoint, () => ""),
  headers: withDefault(ExportHeaders, () => ({})),
  /** The share of new traces sampled; a sender's sampled flag decides for its own trace (parent-based). */
  samplingRatio: withDefault(Ratio, () => 1),
  /** Spans per export request at most. */
  batchSize: withDefault(int(1, 8_192), () => 512),
  /** How long a batch that is not full waits for more spans. */
  batchIntervalMs: withDefault(int(10, 60_000), () => 1_000),
  /** Spans waiting for export at most; past it they are dropped and counted (`ankusa_trace_spans_dropped_total`). */
  maxQueueSpans: withDefault(int(1, 1_048_576), () => 8_192),
  /** One export request's limit. */
  exportTimeoutMs: withDefault(int(100, 60_000), () => 10_000)
})

export const Telemetry = Schema.Struct({
  /** The resource's `service.name`. */
  serviceName: withDefault(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128)), () => "ankusa"),
  otlp: withDefault(Otlp, () => Schema.decodeSync(Otlp)({}))
})
export type Telemetry = typeof Telemetry.Type
