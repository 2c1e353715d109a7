/**
 * The console's only way to the node: the admin API of the origin that served it (docs/api.md),
 * with the signed-in token as a bearer header. Nothing else is ever fetched. A 401 signs out.
 */
import * as Session from "./session.js"

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string
  ) {
    super(message)
  }
}

export interface Principal {
  readonly name: string
  readonly tenants: ReadonlyArray<string> | null
  /** A portal token's expiry (ISO 8601): it opens only its tenant's endpoints and dead letters. */
  readonly expires_at?: string
}

/** A tenant's endpoint as the API shows it (docs/api.md "Endpoints"); the secret only on create or reveal. */
export interface Endpoint {
  readonly id: string
  readonly tenant: string
  readonly url: string
  readonly description: string
  readonly eventTypes: ReadonlyArray<string>
  readonly headers: Readonly<Record<string, string>>
  readonly ratePerSec: number
  readonly concurrency: number
  readonly disabled: boolean
  readonly disabledReason: string | null
  readonly createdAt: string
  readonly updatedAt: string
  /** Its breaker in the node's memory; null while it has no pool open there. */
  readonly breaker: Breaker | null
}

/** A destination's circuit breaker (docs/delivery.md "Failing destinations"). */
export interface Breaker {
  readonly state: "closed" | "open" | "half-open"
  readonly openUntil: string | null
  /** Failed calls since the last 2xx. */
  readonly failures: number
  readonly trips: number
  readonly lastSuccessAt: string | null
}

export interface EndpointInput {
  readonly url?: string
  readonly description?: string
  readonly eventTypes?: ReadonlyArray<string>
  readonly headers?: Readonly<Record<string, string>>
  readonly ratePerSec?: number
  readonly concurrency?: number
  readonly disabled?: boolean
  readonly disabledReason?: string | null
}

/** One attempt of an endpoint's recent log (`GET …/endpoints/:id/deliveries`), newest first. */
export interface Attempt {
  readonly at: string
  readonly hookId: string
  /** 0: no HTTP answer (a timeout or a transport error; `error` says which). */
  readonly status: number
  readonly latencyMs: number
  readonly outcome: "delivered" | "failed"
  readonly error: string | null
  /** A non-2xx answer's first 4 KiB of body. */
  readonly body: string | null
}

export interface Counters {
  readonly tenant: string
  readonly pending: number
  readonly scheduled: number
  readonly inflight: number
  readonly dead: number
  readonly bytes: number
  readonly archive_pending: number
  /** Rows of ordered lanes behind their key's head (docs/delivery.md "Ordered delivery"). */
  readonly waiting: number
  /** Effective limits, and what the tenant overrides (`PUT /v1/tenants/:tenant/limits`). */
  readonly limits: TenantLimits
  readonly limits_override: Partial<TenantLimits>
}

export interface TenantLimits {
  readonly weight: number
  readonly maxInflight: number
  readonly ratePerSec: number
  readonly ingestPerSec: number
  readonly maxQueuedBytes: number
}

export interface DeadItem {
  readonly id: string
  readonly tenant: string | null
  readonly source: string
  readonly sink: string | null
  readonly sink_index: number
  readonly seq: number
  readonly dead_at: string
  readonly attempts: number | null
  readonly last_status: number | null
}

export interface Page<A> {
  readonly items: ReadonlyArray<A>
  readonly next_cursor: string | null
}

export interface HookDetail {
  readonly id: string
  readonly tenant: string
  readonly source: string
  readonly received_at: string
  /** The event type the source's rule found; null when none. */
  readonly event_type: string | null
  readonly content_type: string
  readonly headers: Readonly<Record<string, string>>
  readonly body_bytes: number
  readonly body_preview: string
  readonly body_preview_encoding: "utf8" | "base64"
  readonly body_truncated: boolean
  readonly deliveries: ReadonlyArray<{
    readonly sink: string | null
    readonly sink_index: number
    readonly exists: boolean
    readonly attempts: number | null
    readonly last_status: number | null
    readonly last_attempt_at: string | null
    readonly size: number | null
  }>
}

export interface Sample {
  readonly at: string
  readonly pending: number
  readonly scheduled: number
  readonly inflight: number
  readonly dead: number
  readonly bytes: number
  readonly archive_pending: number
  readonly oldest_due_age_seconds: number
  readonly tenants: number
  readonly ingested: number
  readonly delivered: number
  readonly failed: number
  readonly ingest_per_second: number
  readonly delivered_per_second: number
  readonly failed_per_second: number
}

export interface History {
  readonly interval_ms: number
  readonly max_samples: number
  readonly samples: ReadonlyArray<Sample>
  readonly config: { readonly generation: number; readonly loaded_at: string; readonly trigger: "boot" | "signal" | "api" | "watch" }
}

export interface SinkStats {
  readonly sink: string
  readonly delivered: number
  readonly retried: number
  readonly dead: number
  readonly dropped: number
  readonly calls: number
  readonly p50_seconds: number | null
  readonly p99_seconds: number | null
  readonly mean_seconds: number | null
  /** The newest failed attempt still in the node's attempt log (memory), with a non-2xx's first 4 KiB of body. */
  readonly last_failure: { readonly at: string; readonly status: number; readonly error: string | null; readonly body: string | null } | null
  readonly breaker: Breaker | null
}

export interface QuarantineItem {
  readonly at: string
  readonly tenant: string
  readonly source: string
  readonly reason: string
  readonly headers: Readonly<Record<string, string>>
  readonly body_base64: string
}

export interface AuditItem {
  readonly seq: number
  readonly at: string
  readonly actor: string
  readonly tenants: ReadonlyArray<string> | null
  readonly action: string
  readonly params: Readonly<Record<string, unknown>>
}

/** A tenant's erase job (docs/api.md "Erasing a tenant"). */
export interface EraseJob {
  readonly id: string
  readonly tenant: string
  readonly step: number
  readonly step_name: string
  readonly done: boolean
  readonly counts: Readonly<Record<string, number>>
  readonly actor: string
  readonly started_at: string
  readonly updated_at: string
  readonly finished_at: string | null
}

/** A key of an ordered destination held by its dead head (onDead hold, docs/delivery.md "Ordered delivery"). */
export interface HeldLane {
  readonly destination: string | null
  readonly ordering_key: string | null
  /** The dead head's hook; null when its hook is gone. */
  readonly id: string | null
  readonly seq: number
  readonly sink_index: number
}

export interface ReplayFilter {
  readonly tenant?: string
  readonly source?: string
  readonly from?: number
  readonly to?: number
  readonly ids?: ReadonlyArray<string>
  /** A sink's name or `endpoint:<id>`. */
  readonly destination?: string
}

export interface ReplayResult {
  readonly revived: number
  readonly scanned: number
  readonly done: boolean
}

/** A query string of the defined values. */
const query = (params: Readonly<Record<string, string | number | undefined | null>>): string => {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, String(v))
  const s = q.toString()
  return s === "" ? "" : `?${s}`
}

const call = async <A>(method: string, path: string, body?: unknown, token = Session.token()): Promise<A> => {
  const headers: Record<string, string> = { accept: "application/json" }
  if (token !== undefined) headers["authorization"] = `Bearer ${token}`
  if (body !== undefined) headers["content-type"] = "application/json"
  const init: RequestInit = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" }
  if (body !== undefined) init.body = JSON.stringify(body)
  const r = await fetch(path, init)
  const text = await r.text()
  let doc: any = null
  try {
    doc = text === "" ? null : JSON.parse(text)
  } catch {
    // not JSON: the status says enough
  }
  if (!r.ok) {
    if (r.status === 401 && token === Session.token()) Session.signOut()
    throw new ApiError(r.status, doc?.error ?? "http_" + r.status, doc?.message ?? `${r.status} ${r.statusText}`)
  }
  return doc as A
}

const seg = encodeURIComponent

export const api = {
  /** Checks a token before it is kept (sign-in). */
  whoami: (token?: string) => call<Principal>("GET", "/v1/whoami", undefined, token),
  history: () => call<History>("GET", "/v1/stats/history"),
  sinks: () => call<{ readonly since: string; readonly items: ReadonlyArray<SinkStats> }>("GET", "/v1/stats/sinks"),
  tenants: () => call<{ readonly items: ReadonlyArray<{ readonly tenant: string; readonly pending: number }> }>("GET", "/v1/tenants"),
  tenant: (tenant: string) => call<Counters>("GET", `/v1/tenants/${seg(tenant)}`),
  held: (tenant: string, limit: number) =>
    call<{ readonly tenant: string; readonly items: ReadonlyArray<HeldLane> }>("GET", `/v1/tenants/${seg(tenant)}/ordering/held${query({ limit })}`),
  purge: (tenant: string, kinds: ReadonlyArray<"pending" | "dead">) =>
    call<{ readonly purged: { readonly pending: number; readonly dead: number }; readonly done: boolean }>(
      "DELETE",
      `/v1/tenants/${seg(tenant)}/queue${query({ kinds: kinds.join(",") })}`
    ),
  erase: (tenant: string) => call<EraseJob>("DELETE", `/v1/tenants/${seg(tenant)}${query({ confirm: tenant })}`),
  eraseStatus: (tenant: string) => call<EraseJob>("GET", `/v1/tenants/${seg(tenant)}/erase`),
  liftErase: (tenant: string) => call<EraseJob>("DELETE", `/v1/tenants/${seg(tenant)}/erase${query({ confirm: tenant })}`),
  dlq: (q: { readonly tenant?: string | undefined; readonly limit?: number; readonly cursor?: string | null | undefined }) =>
    call<Page<DeadItem>>("GET", `/v1/dlq${query({ tenant: q.tenant, limit: q.limit, cursor: q.cursor })}`),
  hook: (id: string) => call<HookDetail>("GET", `/v1/dlq/${seg(id)}`),
  replay: (filter: ReplayFilter) => call<ReplayResult>("POST", "/v1/dlq/replay", filter),
  quarantine: (q: { readonly tenant?: string | undefined; readonly cursor?: string | null | undefined }) =>
    call<Page<QuarantineItem>>("GET", `/v1/quarantine${query({ tenant: q.tenant, cursor: q.cursor, limit: 50 })}`),
  quarantineDelete: (tenant: string) => call<{ readonly deleted: number }>("DELETE", `/v1/quarantine${query({ tenant })}`),
  endpoints: (tenant: string) => call<{ readonly items: ReadonlyArray<Endpoint> }>("GET", `/v1/tenants/${seg(tenant)}/endpoints`),
  createEndpoint: (tenant: string, body: EndpointInput) =>
    call<Endpoint & { readonly secret: string }>("POST", `/v1/tenants/${seg(tenant)}/endpoints`, body),
  updateEndpoint: (tenant: string, id: string, body: EndpointInput) =>
    call<Endpoint>("PATCH", `/v1/tenants/${seg(tenant)}/endpoints/${seg(id)}`, body),
  deleteEndpoint: (tenant: string, id: string) => call<{ readonly id: string }>("DELETE", `/v1/tenants/${seg(tenant)}/endpoints/${seg(id)}`),
  endpointSecret: (tenant: string, id: string) =>
    call<{ readonly id: string; readonly secret: string }>("GET", `/v1/tenants/${seg(tenant)}/endpoints/${seg(id)}/secret`),
  testEndpoint: (tenant: string, id: string) =>
    call<{ readonly id: string; readonly seq: number }>("POST", `/v1/tenants/${seg(tenant)}/endpoints/${seg(id)}/test`),
  endpointAttempts: (tenant: string, id: string, limit: number) =>
    call<{ readonly items: ReadonlyArray<Attempt> }>("GET", `/v1/tenants/${seg(tenant)}/endpoints/${seg(id)}/deliveries${query({ limit })}`),
  audit: (q: { readonly cursor?: string | null | undefined }) => call<Page<AuditItem>>("GET", `/v1/audit${query({ cursor: q.cursor, limit: 50 })}`)
}
