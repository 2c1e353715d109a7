/**
 * The configuration: its Schema (every key, default and range), the embedded
 * default, and the redaction used by `GET /v1/config`. Pure: reading it from
 * the file, the environment and the flags lives in `src/config/config.ts`.
 * docs/configuration.md lists every key.
 */
import { Schema, SchemaTransformation } from "effect"
import { Admin, Archive, AuditSettings, Dlq, QuarantineSettings } from "./config-lifecycle.js"
import { BreakerSettings, EndpointsSettings, OperationsSettings, PortalSettings } from "./config-endpoints.js"
import { Pipeline, Writer } from "./config-dispatch.js"
import { Ha, redactUrl, Store } from "./config-store.js"
import { Telemetry } from "./config-telemetry.js"
import * as Endpoints from "./endpoints.js"
import * as Limits from "./limits.js"
import { Ordered } from "./config-ordering.js"
import * as RetryPolicy from "./retry-policy.js"
import * as Retry from "./retry-schedule.js"
import { int, withDefault } from "./schema-parts.js"
import { DEFAULT_TOLERANCE_SECONDS, parseSecret } from "./signature.js"
import { DEFAULT_MAX_TENANTS, MAX_TENANTS_LIMIT, validTenantId } from "./tenants.js"

// Building blocks
const MiB = 1024 * 1024

const Name = Schema.String.check(
  Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, {
    message: "expected 1 to 64 characters of A-Z a-z 0-9 . _ - (starting with a letter or digit)"
  })
)

const TenantId = Schema.String.check(
  Schema.makeFilter((s) => validTenantId(s) || "expected a tenant id: 1 to 256 UTF-8 bytes without NUL")
)

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/

/** An HTTP header name (RFC 9110 token). */
const HeaderKey = Schema.String.check(Schema.isPattern(HEADER_NAME, { message: "expected an HTTP header name" }))

/** A header name as looked up in requests: lower-case. */
const HeaderName = HeaderKey.pipe(
  Schema.decodeTo(Schema.String, SchemaTransformation.transform({ decode: (s) => s.toLowerCase(), encode: (s) => s }))
)

/**
 * Header name → value. The names are checked here rather than by the record's
 * key schema, which would skip a key it does not match instead of naming it.
 */
const Headers = Schema.Record(Schema.String, Schema.String).check(
  Schema.makeFilter((h) =>
    Object.keys(h)
      .filter((k) => !HEADER_NAME.test(k))
      .map((k) => ({ path: [k], issue: "expected an HTTP header name" }))
  )
)

/** A Standard Webhooks secret: `whsec_` + base64 of at least 16 bytes (the prefix is optional). */
export const WebhookSecret = Schema.String.check(
  Schema.makeFilter((s) => {
    const key = parseSecret(s)
    if (key === undefined) return "expected whsec_<base64>"
    return key.length >= 16 || "expected a secret of at least 16 bytes (whsec_<base64>)"
  })
)

/** The placeholder a sink URL may start with: the gateway's own bound origin, resolved at boot. */
export const SELF = "{self}"

const SinkUrl = Schema.String.check(
  Schema.makeFilter((s) => {
    const u = s.startsWith(SELF + "/") ? "http://self" + s.slice(SELF.length) : s
    try {
      const p = new URL(u)
      return p.protocol === "http:" || p.protocol === "https:" || "expected an http:// or https:// URL"
    } catch {
      return "expected an http:// or https:// URL (or {self}/path)"
    }
  })
)

const LogLevel = Schema.Literals(["trace", "debug", "info", "warning", "error", "fatal", "none"])
export type LogLevel = typeof LogLevel.Type

// ---------------------------------------------------------------------------
// Sources

/** A fixed tenant id, or `{header}`: a shared source takes the tenant from each request. */
export const TenantRule = Schema.Union([TenantId, Schema.Struct({ header: HeaderName })])
export type TenantRule = typeof TenantRule.Type

export const Verification = Schema.Union([
  Schema.Literal("none"),
  Schema.Struct({
    type: Schema.Literal("standard-webhooks"),
    secret: WebhookSecret,
    /** Accepted distance between `webhook-timestamp` and our clock. */
    toleranceSeconds: withDefault(int(1, 3_600), () => DEFAULT_TOLERANCE_SECONDS)
  })
])
export type Verification = typeof Verification.Type

/** The route target that fans a hook out to its tenant's own endpoints (docs/delivery.md "Tenant endpoints"); no sink may take the name. */
export const TENANT_ENDPOINTS = "tenant-endpoints"

/** Where a hook's event type comes from: a request header, or a string at a JSON Pointer (RFC 6901, `/type`) in the body. */
export const EventTypeRule = Schema.Union([
  Schema.Struct({ header: HeaderName }),
  Schema.Struct({ jsonPointer: Schema.String.check(Schema.isPattern(/^(\/[^/]*)*$/, { message: "expected a JSON Pointer such as /type" }), Schema.isMaxLength(256)) })
])
export type EventTypeRule = typeof EventTypeRule.Type

export const Source = Schema.Struct({
  id: Name,
  tenant: withDefault(TenantRule, () => "default"),
  verification: withDefault(Verification, () => "none" as const),
  /** Sink names, and `tenant-endpoints` for the tenant's own endpoints. */
  routes: Schema.Array(Name).check(Schema.isMinLength(1), Schema.isMaxLength(64)),
  eventType: Schema.optional(EventTypeRule),
  /** Where a hook's ordering key comes from (docs/delivery.md "Ordered delivery"): as `eventType`. */
  orderingKey: Schema.optional(EventTypeRule)
})
export type Source = typeof Source.Type

// ---------------------------------------------------------------------------
// Sinks

/** `retry` of a sink, in either form: src/domain/retry-policy.ts. */
export const SinkRetry = RetryPolicy.SinkRetry
export type SinkRetry = typeof SinkRetry.Type

export const Sink = Schema.Struct({
  name: Name,
  url: SinkUrl,
  timeoutMs: withDefault(int(100, 300_000), () => 10_000),
  headers: withDefault(Headers, () => ({})),
  /** Signs deliveries with Standard Webhooks headers when present. */
  secret: Schema.optional(WebhookSecret),
  concurrency: withDefault(int(1, 1_024), () => 16),
  /** Calls a second at most across tenants (TEN-3); 0: unlimited. */
  ratePerSec: withDefault(Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 1_000_000 })), () => 0),
  /** Claimed rows waiting for a connection at most (docs/delivery.md "Fair dispatch"); absent: concurrency × SINK_WAIT_FACTOR. */
  maxWaiting: Schema.optional(int(0, 100_000)),
  /** How long a 429's Retry-After pauses the whole sink at most; the row itself waits all of it. */
  maxPauseMs: withDefault(int(0, 604_800_000), () => 60_000),
  retry: withDefault(SinkRetry, () => Retry.defaultSchedule),
  /** Hooks with an ordering key reach it one at a time per key, in accepted order (docs/delivery.md "Ordered delivery"). */
  ordered: withDefault(Ordered, () => false as const)
})
export type Sink = typeof Sink.Type

// ---------------------------------------------------------------------------
// Admin tokens

export const AdminToken = Schema.Struct({
  name: Name,
  token: Schema.String.check(Schema.isMinLength(16, { message: "expected a token of at least 16 characters" })),
  /** "*" (every tenant) or the tenants this token may see and touch. */
  tenants: Schema.Union([Schema.Literal("*"), Schema.Array(TenantId).check(Schema.isMinLength(1))])
})
export type AdminToken = typeof AdminToken.Type

// ---------------------------------------------------------------------------
// Settings

const Http = Schema.Struct({
  host: withDefault(Schema.String.check(Schema.isMinLength(1)), () => "127.0.0.1"),
  /** 0 picks a free port (logged at start). */
  port: withDefault(int(0, 65_535), () => 8080),
  /**
   * Serve `POST /_demo/sink` (answers 204 and logs), the default demo sink: `auto` serves it only
   * when a sink's URL is `{self}/_demo/sink` (the built-in default configuration's); see `demoSinkServed`.
   */
  demoSink: withDefault(Schema.Union([Schema.Boolean, Schema.Literal("auto")]), () => "auto" as const),
  /** Connections open at once; past it a new connection is closed at once (Node's `server.maxConnections`). */
  maxConnections: withDefault(int(1, 1_000_000), () => 10_000),
  /** How long a client may take to send a request's line and headers; then 408 and the connection closes. */
  headersTimeoutMs: withDefault(int(1_000, 600_000), () => 10_000),
  /** How long a client may take to send a whole request (headers and body); then 408 and the connection closes. */
  requestTimeoutMs: withDefault(int(1_000, 3_600_000), () => 60_000),
  /**
   * An ingest body must arrive at this many bytes a second at least once it is `bodyGraceMs` old, and
   * never stall that long; else 408 and the connection closes (docs/api.md "Admission"). 0: no such rule.
   */
  minBodyBytesPerSec: withDefault(int(0, 1_073_741_824), () => 8_192),
  /** That grace; the pace is checked every quarter of it. */
  bodyGraceMs: withDefault(int(100, 60_000), () => 2_000),
  /** Serve the operator console at `GET /ui/` (and redirect `/` there); docs/console.md. */
  console: withDefault(Schema.Boolean, () => true)
})

const Ingest = Schema.Struct({
  maxBodyBytes: withDefault(int(1, 64 * MiB), () => MiB),
  /** Request body bytes being read at once across requests (Content-Length, else `maxBodyBytes`); past it, 503 `busy`. */
  maxBufferedBytes: withDefault(int(1, 4_096 * MiB), () => 64 * MiB)
})


const Dedupe = Schema.Struct({
  windowMs: withDefault(int(1_000, 30 * 24 * 3_600_000), () => 24 * 3_600_000)
})

/** Every tenant's limits unless it has an override (src/domain/limits.ts; the Limits service, src/queue/limits.ts). */
const TenantLimits = Schema.Struct({
  weight: withDefault(Limits.Weight, () => Limits.DEFAULT_LIMITS.weight),
  maxInflight: withDefault(Limits.MaxInflight, () => Limits.DEFAULT_LIMITS.maxInflight),
  ratePerSec: withDefault(Limits.RatePerSec, () => Limits.DEFAULT_LIMITS.ratePerSec),
  ingestPerSec: withDefault(Limits.IngestPerSec, () => Limits.DEFAULT_LIMITS.ingestPerSec),
  maxQueuedBytes: withDefault(Limits.MaxQueuedBytes, () => Limits.DEFAULT_LIMITS.maxQueuedBytes)
})

const Tenants = Schema.Struct({
  max: withDefault(int(1, MAX_TENANTS_LIMIT), () => DEFAULT_MAX_TENANTS),
  /** Endpoints a tenant may have (src/queue/endpoints.ts). */
  maxEndpoints: withDefault(int(1, Endpoints.MAX_ENDPOINTS_LIMIT), () => Endpoints.MAX_ENDPOINTS_DEFAULT),
  limits: withDefault(TenantLimits, () => Schema.decodeSync(TenantLimits)({}))
})

const Gauges = Schema.Struct({
  /** The gauge tick's and the store health read's period. */
  intervalMs: withDefault(int(100, 3_600_000), () => 15_000)
})

const Log = Schema.Struct({
  level: withDefault(LogLevel, () => "info" as const)
})

const Reload = Schema.Struct({
  /** Reload when the file's identity or mtime changes (polled once a second; docs/configuration.md "Reloading"). */
  watch: withDefault(Schema.Boolean, () => false)
})

// ---------------------------------------------------------------------------
// The whole file

const Fields = Schema.Struct({
  sources: withDefault(Schema.Array(Source), () => DEFAULT_SOURCES),
  sinks: withDefault(Schema.Array(Sink), () => DEFAULT_SINKS),
  adminTokens: withDefault(Schema.Array(AdminToken), () => []),
  http: withDefault(Http, () => Schema.decodeSync(Http)({})),
  dataDir: withDefault(Schema.String.check(Schema.isMinLength(1)), () => "./data"),
  ingest: withDefault(Ingest, () => Schema.decodeSync(Ingest)({})),
  store: withDefault(Store, () => Schema.decodeSync(Store)({})),
  ha: withDefault(Ha, () => Schema.decodeSync(Ha)({})),
  dedupe: withDefault(Dedupe, () => Schema.decodeSync(Dedupe)({})),
  tenants: withDefault(Tenants, () => Schema.decodeSync(Tenants)({})),
  gauges: withDefault(Gauges, () => Schema.decodeSync(Gauges)({})),
  log: withDefault(Log, () => Schema.decodeSync(Log)({})),
  archive: withDefault(Archive, () => Schema.decodeSync(Archive)({})),
  quarantine: withDefault(QuarantineSettings, () => Schema.decodeSync(QuarantineSettings)({})),
  audit: withDefault(AuditSettings, () => Schema.decodeSync(AuditSettings)({})),
  dlq: withDefault(Dlq, () => Schema.decodeSync(Dlq)({})),
  admin: withDefault(Admin, () => Schema.decodeSync(Admin)({})),
  writer: withDefault(Writer, () => Schema.decodeSync(Writer)({})),
  pipeline: withDefault(Pipeline, () => Schema.decodeSync(Pipeline)({})),
  config: withDefault(Reload, () => Schema.decodeSync(Reload)({})),
  endpoints: withDefault(EndpointsSettings, () => Schema.decodeSync(EndpointsSettings)({})),
  portal: withDefault(PortalSettings, () => Schema.decodeSync(PortalSettings)({})),
  breaker: withDefault(BreakerSettings, () => Schema.decodeSync(BreakerSettings)({})),
  operations: withDefault(OperationsSettings, () => Schema.decodeSync(OperationsSettings)({})),
  telemetry: withDefault(Telemetry, () => Schema.decodeSync(Telemetry)({}))
})

const duplicates = <A>(
  items: ReadonlyArray<A>,
  key: (a: A) => string,
  at: (i: number) => ReadonlyArray<PropertyKey>,
  message: (k: string) => string
) => {
  const seen = new Set<string>()
  const out: Array<Schema.FilterIssue> = []
  items.forEach((a, i) => {
    const k = key(a)
    if (seen.has(k)) out.push({ path: at(i), issue: message(k) })
    seen.add(k)
  })
  return out
}

/** Cross-references: unique names, routes that name a configured sink. */
export const Config = Fields.check(
  Schema.makeFilter((c) => {
    const sinkNames = new Set(c.sinks.map((s) => s.name))
    const issues: Array<Schema.FilterIssue> = [
      ...duplicates(c.sources, (s) => s.id, (i) => ["sources", i, "id"], (k) => `duplicate source id ${JSON.stringify(k)}`),
      ...duplicates(c.sinks, (s) => s.name, (i) => ["sinks", i, "name"], (k) => `duplicate sink name ${JSON.stringify(k)}`),
      ...duplicates(c.adminTokens, (t) => t.name, (i) => ["adminTokens", i, "name"], (k) => `duplicate token name ${JSON.stringify(k)}`),
      // A message never shows a token: it goes to stderr and the logs.
      ...duplicates(c.adminTokens, (t) => t.token, (i) => ["adminTokens", i, "token"], () => "the same token as another (tokens must differ)")
    ]
    c.sources.forEach((s, i) =>
      s.routes.forEach((r, j) => {
        if (!sinkNames.has(r) && r !== TENANT_ENDPOINTS) issues.push({ path: ["sources", i, "routes", j], issue: `no sink named ${JSON.stringify(r)}` })
      })
    )
    c.sinks.forEach((s, i) => {
      if (s.name === TENANT_ENDPOINTS) issues.push({ path: ["sinks", i, "name"], issue: `${TENANT_ENDPOINTS} is a route target, not a sink name` })
    })
    c.sources.forEach((s, i) => {
      if (new Set(s.routes).size !== s.routes.length) issues.push({ path: ["sources", i, "routes"], issue: "a sink is listed twice" })
    })
    if (c.http.demoSink === false) {
      c.sinks.forEach((s, i) => {
        if (s.url === SELF + DEMO_SINK_PATH) issues.push({ path: ["sinks", i, "url"], issue: "the demo sink is off (http.demoSink: false)" })
      })
    }
    if (c.operations.sink !== undefined && !sinkNames.has(c.operations.sink)) issues.push({ path: ["operations", "sink"], issue: `no sink named ${JSON.stringify(c.operations.sink)}` })
    if (c.http.headersTimeoutMs > c.http.requestTimeoutMs) {
      issues.push({ path: ["http", "headersTimeoutMs"], issue: "must not exceed http.requestTimeoutMs" })
    }
    if (c.ha.renewMs * 2 >= c.ha.leaseMs) issues.push({ path: ["ha", "renewMs"], issue: "must be under half of ha.leaseMs" })
    if (c.store.kind === "postgres" && c.store.postgres.url === "") {
      issues.push({ path: ["store", "postgres", "url"], issue: "is required when store.kind is postgres" })
    }
    // Archive segments are files under dataDir: on PostgreSQL they would be the one thing a failover loses.
    if (c.store.kind === "postgres" && c.archive.enabled) {
      issues.push({ path: ["archive", "enabled"], issue: "the archive writes segments to the local disk; it is not available with store.kind postgres" })
    }
    if (c.admin.dlqPageDefault > c.admin.dlqPageMax) {
      issues.push({ path: ["admin", "dlqPageDefault"], issue: "must not exceed admin.dlqPageMax" })
    }
    return issues
  })
)
export type Config = typeof Config.Type
export type ConfigInput = typeof Config.Encoded

// ---------------------------------------------------------------------------
// The embedded default: works with no file (README run command)

export const DEMO_SINK_PATH = "/_demo/sink"

export const DEFAULT_SOURCES: ReadonlyArray<Source> = [
  { id: "demo", tenant: "default", verification: "none", routes: ["demo"] }
]

export const DEFAULT_SINKS: ReadonlyArray<Sink> = [
  {
    name: "demo",
    url: `${SELF}${DEMO_SINK_PATH}`,
    timeoutMs: 10_000,
    headers: {},
    concurrency: 16,
    ratePerSec: 0,
    maxPauseMs: 60_000,
    retry: Retry.defaultSchedule,
    ordered: false
  }
]

/**
 * A JSON document (the parsed file) against the Schema: every issue, an
 * unknown key refused, and the rejected value kept on each issue so that a
 * message can show it (src/config/issues.ts formats them).
 */
export const decode = Schema.decodeUnknownResult(Config, { errors: "all", onExcessProperty: "error", reportInput: true })

/** The default configuration (no file, no environment). */
export const defaults: Config = Schema.decodeUnknownSync(Config)({})

// ---------------------------------------------------------------------------
// Helpers for the edge

/** `http.demoSink` resolved: `auto` serves the demo sink when a sink delivers to it. */
export const demoSinkServed = (c: Config): boolean =>
  c.http.demoSink === "auto" ? c.sinks.some((s) => s.url === SELF + DEMO_SINK_PATH) : c.http.demoSink

/** The sink URL with `{self}` replaced by the server's bound origin (e.g. `http://127.0.0.1:8080`). */
export const resolveUrl = (url: string, selfOrigin: string): string =>
  url.startsWith(SELF) ? selfOrigin + url.slice(SELF.length) : url

const REDACTED = "[redacted]"

/** The configuration as `GET /v1/config` shows it: secrets, tokens and sink header values redacted. */
export const redact = (c: Config): unknown => ({
  ...c,
  sources: c.sources.map((s) => ({
    ...s,
    verification: s.verification === "none" ? "none" : { ...s.verification, secret: REDACTED }
  })),
  sinks: c.sinks.map((s) => ({
    ...s,
    // Header values often carry credentials (Authorization, API keys).
    headers: Object.fromEntries(Object.keys(s.headers).map((k) => [k, REDACTED])),
    ...(s.secret === undefined ? {} : { secret: REDACTED })
  })),
  adminTokens: c.adminTokens.map((t) => ({ name: t.name, token: REDACTED, tenants: t.tenants })),
  portal: c.portal.secret === undefined ? c.portal : { ...c.portal, secret: REDACTED },
  store: { ...c.store, postgres: { ...c.store.postgres, url: redactUrl(c.store.postgres.url) } },
  telemetry: { ...c.telemetry, otlp: { ...c.telemetry.otlp, headers: Object.fromEntries(Object.keys(c.telemetry.otlp.headers).map((k) => [k, REDACTED])) } }
})
