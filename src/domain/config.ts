/**
 * The configuration: its Schema (every key, default and range), the embedded
 * default, and the redaction used by `GET /v1/config`. Pure: loading a file
 * and applying environment overrides live in `src/layers/config.ts`.
 * docs/configuration.md lists every key.
 */
import { Schema } from "effect"
import * as Retry from "./retry-schedule.js"
import { DEFAULT_TOLERANCE_SECONDS, parseSecret } from "./signature.js"
import { DEFAULT_MAX_TENANTS, MAX_TENANTS_LIMIT, validTenantId } from "./tenants.js"

// ---------------------------------------------------------------------------
// Building blocks

const int = (min: number, max: number) => Schema.Int.pipe(Schema.between(min, max))

const MiB = 1024 * 1024

const Name = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, {
    message: () => "expected 1 to 64 characters of A-Z a-z 0-9 . _ - (starting with a letter or digit)"
  })
)

const TenantId = Schema.String.pipe(
  Schema.filter((s) => validTenantId(s) || "expected a tenant id: 1 to 256 UTF-8 bytes without NUL")
)

/** An HTTP header name (RFC 9110 token). */
const HeaderKey = Schema.String.pipe(
  Schema.pattern(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/, { message: () => "expected an HTTP header name" })
)

/** A header name as looked up in requests: lower-case. */
const HeaderName = HeaderKey.pipe(
  Schema.transform(Schema.String, { strict: true, decode: (s) => s.toLowerCase(), encode: (s) => s })
)

/** A Standard Webhooks secret: `whsec_` + base64 of at least 16 bytes (the prefix is optional). */
export const WebhookSecret = Schema.String.pipe(
  Schema.filter((s) => {
    const key = parseSecret(s)
    if (key === undefined) return "expected whsec_<base64>"
    return key.length >= 16 || "expected a secret of at least 16 bytes (whsec_<base64>)"
  })
)

/** The placeholder a sink URL may start with: the gateway's own bound origin, resolved at boot. */
export const SELF = "{self}"

const SinkUrl = Schema.String.pipe(
  Schema.filter((s) => {
    const u = s.startsWith(SELF + "/") ? "http://self" + s.slice(SELF.length) : s
    try {
      const p = new URL(u)
      return p.protocol === "http:" || p.protocol === "https:" || "expected an http:// or https:// URL"
    } catch {
      return "expected an http:// or https:// URL (or {self}/path)"
    }
  })
)

const LogLevel = Schema.Literal("trace", "debug", "info", "warning", "error", "fatal", "none")
export type LogLevel = typeof LogLevel.Type

// ---------------------------------------------------------------------------
// Sources

/** A fixed tenant id, or `{header}`: a shared source takes the tenant from each request. */
export const TenantRule = Schema.Union(TenantId, Schema.Struct({ header: HeaderName }))
export type TenantRule = typeof TenantRule.Type

export const Verification = Schema.Union(
  Schema.Literal("none"),
  Schema.Struct({
    type: Schema.Literal("standard-webhooks"),
    secret: WebhookSecret,
    /** Accepted distance between `webhook-timestamp` and our clock. */
    toleranceSeconds: Schema.optionalWith(int(1, 3_600), { default: () => DEFAULT_TOLERANCE_SECONDS })
  })
)
export type Verification = typeof Verification.Type

export const Source = Schema.Struct({
  id: Name,
  tenant: Schema.optionalWith(TenantRule, { default: () => "default" }),
  verification: Schema.optionalWith(Verification, { default: () => "none" as const }),
  routes: Schema.Array(Name).pipe(Schema.minItems(1), Schema.maxItems(64))
})
export type Source = typeof Source.Type

// ---------------------------------------------------------------------------
// Sinks

/** Field names follow `RetrySchedule` (src/domain/retry-schedule.ts); docs/delivery.md explains them. */
export const SinkRetry = Schema.Struct({
  /** Wait after each failed attempt (ms); attempts = length + 1, then the row is dead-lettered. */
  delaysMs: Schema.optionalWith(Schema.Array(int(0, 7 * 24 * 3_600_000)).pipe(Schema.maxItems(100)), {
    default: () => Retry.DEFAULT_DELAYS_MS
  }),
  /** Uniform jitter as a fraction of each delay (0.2 = ±20%). */
  jitter: Schema.optionalWith(Schema.Number.pipe(Schema.greaterThanOrEqualTo(0), Schema.lessThan(1)), {
    default: () => Retry.DEFAULT_JITTER
  }),
  /** Upper bound on a sink's `Retry-After`. */
  maxRetryAfterMs: Schema.optionalWith(int(0, 7 * 24 * 3_600_000), { default: () => Retry.DEFAULT_MAX_RETRY_AFTER_MS })
})
export type SinkRetry = typeof SinkRetry.Type

export const Sink = Schema.Struct({
  name: Name,
  url: SinkUrl,
  timeoutMs: Schema.optionalWith(int(100, 300_000), { default: () => 10_000 }),
  headers: Schema.optionalWith(Schema.Record({ key: HeaderKey, value: Schema.String }), { default: () => ({}) }),
  /** Signs deliveries with Standard Webhooks headers when present. */
  secret: Schema.optional(WebhookSecret),
  concurrency: Schema.optionalWith(int(1, 1_024), { default: () => 16 }),
  retry: Schema.optionalWith(SinkRetry, { default: () => Retry.defaultSchedule })
})
export type Sink = typeof Sink.Type

// ---------------------------------------------------------------------------
// Admin tokens

export const AdminToken = Schema.Struct({
  name: Name,
  token: Schema.String.pipe(Schema.minLength(16, { message: () => "expected a token of at least 16 characters" })),
  /** "*" (every tenant) or the tenants this token may see and touch. */
  tenants: Schema.Union(Schema.Literal("*"), Schema.Array(TenantId).pipe(Schema.minItems(1)))
})
export type AdminToken = typeof AdminToken.Type

// ---------------------------------------------------------------------------
// Settings

const Http = Schema.Struct({
  host: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1)), { default: () => "127.0.0.1" }),
  /** 0 picks a free port (logged at start). */
  port: Schema.optionalWith(int(0, 65_535), { default: () => 8080 }),
  /** Serve `POST /_demo/sink` (answers 204 and logs), the default demo sink. */
  demoSink: Schema.optionalWith(Schema.Boolean, { default: () => true })
})

const Ingest = Schema.Struct({
  maxBodyBytes: Schema.optionalWith(int(1, 64 * MiB), { default: () => MiB })
})

const Dedupe = Schema.Struct({
  windowMs: Schema.optionalWith(int(1_000, 30 * 24 * 3_600_000), { default: () => 24 * 3_600_000 })
})

const Tenants = Schema.Struct({
  max: Schema.optionalWith(int(1, MAX_TENANTS_LIMIT), { default: () => DEFAULT_MAX_TENANTS })
})

const Gauges = Schema.Struct({
  intervalMs: Schema.optionalWith(int(1_000, 3_600_000), { default: () => 15_000 })
})

const Log = Schema.Struct({
  level: Schema.optionalWith(LogLevel, { default: () => "info" as const })
})

const DAY = 24 * 3_600_000
const GiB = 1024 * MiB

/** Passed to the Archive (src/layers/archive.ts `ArchiveOptions`). */
const Archive = Schema.Struct({
  enabled: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** Obligations of hooks received longer ago than this are dropped unwritten (counted). */
  retentionMs: Schema.optionalWith(int(60_000, 365 * DAY), { default: () => 7 * DAY }),
  /** A segment past this size is closed. */
  segmentBytes: Schema.optionalWith(int(MiB, 4 * GiB), { default: () => 64 * MiB })
})

/** Passed to the Quarantine (src/layers/quarantine.ts `QuarantineOptions`). */
const QuarantineSettings = Schema.Struct({
  /** Records kept at most; past it the oldest are dropped. 0 keeps none (failures are only refused). */
  maxCount: Schema.optionalWith(int(0, 10_000_000), { default: () => 10_000 }),
  /** Bytes kept at most (key + value of every record). */
  maxBytes: Schema.optionalWith(int(1_024, 16 * GiB), { default: () => 64 * MiB }),
  retentionMs: Schema.optionalWith(int(60_000, 365 * DAY), { default: () => 7 * DAY })
})

/** Passed to the Audit service (src/layers/audit.ts `AuditOptions`). */
const AuditSettings = Schema.Struct({
  retentionMs: Schema.optionalWith(int(DAY, 3_650 * DAY), { default: () => 90 * DAY })
})

/** Passed to the DLQ ceiling (src/layers/dlq-ceiling.ts `DlqCeilingOptions`). */
const Dlq = Schema.Struct({
  /** Dead rows kept at most (the `dead` counter); past it the oldest are dropped (counted). */
  maxRows: Schema.optionalWith(int(1, 1_000_000_000), { default: () => 1_000_000 }),
  /** Queue bytes (the `bytes` counter) past which the oldest dead rows are shed. */
  maxBytes: Schema.optionalWith(int(MiB, 1_024 * GiB), { default: () => 8 * GiB })
})

const Admin = Schema.Struct({
  /** Rows per page of `GET /v1/dlq` when `limit` is not given, and its ceiling. */
  dlqPageDefault: Schema.optionalWith(int(1, 1_000), { default: () => 100 }),
  dlqPageMax: Schema.optionalWith(int(1, 1_000), { default: () => 1_000 }),
  /** Dead rows examined per synced batch of a replay. */
  replayChunk: Schema.optionalWith(int(1, 10_000), { default: () => 500 }),
  /** Most rows one replay request revives (the answer says whether more remain). */
  replayMax: Schema.optionalWith(int(1, 10_000_000), { default: () => 100_000 }),
  /** Most dead rows one replay request examines (filters may match few of them). */
  replayScanMax: Schema.optionalWith(int(1, 100_000_000), { default: () => 1_000_000 }),
  /** Synced chunks (500 rows each) one purge request runs at most; the answer says whether more remain. */
  purgeMaxChunks: Schema.optionalWith(int(1, 1_000_000), { default: () => 200 })
})

/** Passed to the Writer (src/layers/writer.ts `WriterOptions`); ranges are its `Ranges`, defaults its `Defaults`. */
const Writer = Schema.Struct({
  /** Requests per synced commit. */
  maxBatch: Schema.optionalWith(int(1, 4_096), { default: () => 256 }),
  /** Body bytes per commit (a single larger request still commits alone). */
  maxBatchBytes: Schema.optionalWith(int(1, 256 * MiB), { default: () => 16 * MiB }),
  /** How long a batch that is not full waits for more requests. */
  lingerMs: Schema.optionalWith(int(0, 100), { default: () => 0 }),
  /** Requests waiting for the Writer; past it, 503 unavailable. */
  queueCapacity: Schema.optionalWith(int(1, 1_048_576), { default: () => 4_096 }),
  /** Body bytes waiting for the Writer; past it, 503 unavailable. */
  queueBytes: Schema.optionalWith(int(1, 4_096 * MiB), { default: () => 64 * MiB })
})

/** Passed to the Pipeline (src/layers/pipeline.ts `PipelineOptions`); ranges are its `Ranges`, defaults its `Defaults`. */
const Pipeline = Schema.Struct({
  /** Dispatch tick period. */
  tickMs: Schema.optionalWith(int(1, 60_000), { default: () => 100 }),
  /** Rows claimed per tick at most, across tenants. */
  claimLimit: Schema.optionalWith(int(1, 100_000), { default: () => 1_000 }),
  /** Bytes claimed per tick at most (a tenant's first row is taken even past it). */
  claimBytes: Schema.optionalWith(int(1, 1_024 * MiB), { default: () => 64 * MiB }),
  /** Rows claimed and not yet settled, across sinks. */
  maxInflight: Schema.optionalWith(int(1, 100_000), { default: () => 256 }),
  /** Active tenants one tick looks at. */
  activeTenants: Schema.optionalWith(int(1, 100_000), { default: () => 4_096 }),
  /** Outcomes committed together in one write at most. */
  commitBatch: Schema.optionalWith(int(1, 10_000), { default: () => 256 }),
  /** Shutdown: how long inflight sink calls may finish before their rows are left to boot recovery. */
  graceMs: Schema.optionalWith(int(0, 600_000), { default: () => 10_000 })
})

// ---------------------------------------------------------------------------
// The whole file

const Fields = Schema.Struct({
  sources: Schema.optionalWith(Schema.Array(Source), { default: () => DEFAULT_SOURCES }),
  sinks: Schema.optionalWith(Schema.Array(Sink), { default: () => DEFAULT_SINKS }),
  adminTokens: Schema.optionalWith(Schema.Array(AdminToken), { default: () => [] }),
  http: Schema.optionalWith(Http, { default: () => Schema.decodeSync(Http)({}) }),
  dataDir: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1)), { default: () => "./data" }),
  ingest: Schema.optionalWith(Ingest, { default: () => Schema.decodeSync(Ingest)({}) }),
  dedupe: Schema.optionalWith(Dedupe, { default: () => Schema.decodeSync(Dedupe)({}) }),
  tenants: Schema.optionalWith(Tenants, { default: () => Schema.decodeSync(Tenants)({}) }),
  gauges: Schema.optionalWith(Gauges, { default: () => Schema.decodeSync(Gauges)({}) }),
  log: Schema.optionalWith(Log, { default: () => Schema.decodeSync(Log)({}) }),
  archive: Schema.optionalWith(Archive, { default: () => Schema.decodeSync(Archive)({}) }),
  quarantine: Schema.optionalWith(QuarantineSettings, { default: () => Schema.decodeSync(QuarantineSettings)({}) }),
  audit: Schema.optionalWith(AuditSettings, { default: () => Schema.decodeSync(AuditSettings)({}) }),
  dlq: Schema.optionalWith(Dlq, { default: () => Schema.decodeSync(Dlq)({}) }),
  admin: Schema.optionalWith(Admin, { default: () => Schema.decodeSync(Admin)({}) }),
  writer: Schema.optionalWith(Writer, { default: () => Schema.decodeSync(Writer)({}) }),
  pipeline: Schema.optionalWith(Pipeline, { default: () => Schema.decodeSync(Pipeline)({}) })
})

const duplicates = <A>(items: ReadonlyArray<A>, key: (a: A) => string, at: (i: number) => ReadonlyArray<PropertyKey>, what: string) => {
  const seen = new Set<string>()
  const out: Array<Schema.FilterIssue> = []
  items.forEach((a, i) => {
    const k = key(a)
    if (seen.has(k)) out.push({ path: at(i), message: `duplicate ${what} ${JSON.stringify(k)}` })
    seen.add(k)
  })
  return out
}

/** Cross-references: unique names, routes that name a configured sink. */
export const Config = Fields.pipe(
  Schema.filter((c) => {
    const sinkNames = new Set(c.sinks.map((s) => s.name))
    const issues: Array<Schema.FilterIssue> = [
      ...duplicates(c.sources, (s) => s.id, (i) => ["sources", i, "id"], "source id"),
      ...duplicates(c.sinks, (s) => s.name, (i) => ["sinks", i, "name"], "sink name"),
      ...duplicates(c.adminTokens, (t) => t.name, (i) => ["adminTokens", i, "name"], "token name"),
      ...duplicates(c.adminTokens, (t) => t.token, (i) => ["adminTokens", i, "token"], "token (tokens must differ)")
    ]
    c.sources.forEach((s, i) =>
      s.routes.forEach((r, j) => {
        if (!sinkNames.has(r)) issues.push({ path: ["sources", i, "routes", j], message: `no sink named ${JSON.stringify(r)}` })
      })
    )
    c.sources.forEach((s, i) => {
      if (new Set(s.routes).size !== s.routes.length) issues.push({ path: ["sources", i, "routes"], message: "a sink is listed twice" })
    })
    if (c.admin.dlqPageDefault > c.admin.dlqPageMax) {
      issues.push({ path: ["admin", "dlqPageDefault"], message: "must not exceed admin.dlqPageMax" })
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
    retry: Retry.defaultSchedule
  }
]

export const decode = Schema.decodeUnknownEither(Config, { errors: "all", onExcessProperty: "error" })

/** The default configuration (no file, no environment). */
export const defaults: Config = Schema.decodeUnknownSync(Config)({})

// ---------------------------------------------------------------------------
// Helpers for the edge

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
  adminTokens: c.adminTokens.map((t) => ({ name: t.name, token: REDACTED, tenants: t.tenants }))
})
