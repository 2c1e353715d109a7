/**
 * The admin and operations API as an `HttpApi` (docs/api.md): its groups,
 * endpoints, the schemas of their queries, paths, bodies and answers, the
 * errors each may answer, and the middleware they run behind. admin.ts and
 * ops.ts implement it; routes.ts serves it with its OpenAPI document.
 */
import { Effect, Schema, type SchemaAST, SchemaIssue, SchemaTransformation } from "effect"
import * as HttpApi from "effect/http-api/HttpApi"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { AUDIT_ACTIONS } from "../domain/audit.js"
import type * as K from "../domain/keys.js"
import { LimitsOverride } from "../domain/limits.js"
import * as Audit from "../lifecycle/audit.js"
import * as Quarantine from "../lifecycle/quarantine.js"
import * as Prometheus from "../observability/prometheus.js"
import { DEAD_MAX_LIMIT } from "../queue/queue.js"
import { ConfigInvalidError, ForbiddenError, TooLargeError, Unavailable503, UnknownTenantError } from "./api-errors.js"
import * as C from "./console-schemas.js"
import { EndpointOpsApi } from "./endpoint-ops-api.js"
import { EndpointsApi, PortalApi } from "./endpoints-api.js"
import { Count, CounterFields, Limit } from "./schema-fields.js"
import { ReloadAnswer } from "./config-schemas.js"
import { StoreCheckAnswer } from "./store-check-schemas.js"
import { EraseApi } from "./erase-api.js"
import { SvixAppsApi, SvixAuthApi, SvixEndpointsApi, SvixMessagesApi } from "./svix/api.js"

/** Largest replay request body. */
export const REPLAY_BODY_MAX_BYTES = 64 * 1024
/** Largest limits request body (`PUT /v1/tenants/:tenant/limits`). */
export const LIMITS_BODY_MAX_BYTES = 4 * 1024
/** Most hook ids one replay request names. */
export const REPLAY_MAX_IDS = 1_000
/** DLQ rows per page: the ceiling of `admin.dlqPageMax` (the handler applies the configured one). */
export const DLQ_PAGE_CEILING = DEAD_MAX_LIMIT
/** Quarantine records per page: default and most (the service's own maximum). */
export const QUARANTINE_PAGE_DEFAULT = 50
export const QUARANTINE_PAGE_MAX = Quarantine.MAX_LIST_LIMIT
/** Audit rows per page: default and most (the service's own maximum). */
export const AUDIT_PAGE_DEFAULT = 100
export const AUDIT_PAGE_MAX = Audit.MAX_LIST_LIMIT

import { AdminAuth, RequestErrors, Services } from "./api-security.js"
export { Admin, AdminAuth, type Principal, RequestErrors, Services } from "./api-security.js"

// ---------------------------------------------------------------------------
// Queries and bodies

/** Repeated (`?tenant=a&tenant=b`) or comma-separated (`?tenant=a,b`) values. */
const List = <S extends Schema.Top & { readonly Encoded: string }>(item: S, description: string) =>
  // Annotations on the encoded side: that is what the OpenAPI document shows.
  Schema.Array(Schema.String).annotate({ description: `${description}; repeated or comma-separated` }).pipe(
    Schema.decodeTo(
      Schema.Array(item),
      SchemaTransformation.transform({
        // Cast: the values are strings, which `item` decodes.
        decode: (raw) => raw.flatMap((v) => v.split(",")).map((v) => v.trim()).filter((v) => v !== "") as ReadonlyArray<S["Encoded"]>,
        encode: (values): ReadonlyArray<string> => values
      })
    )
  )

const invalid = (message: string) => (input: unknown, options: SchemaAST.ParseOptions) =>
  Effect.fail(new SchemaIssue.InvalidValue({ message }, input, options))

/** DLQ cursors are `<at>.<seq>.<sink>` of the last row returned; an empty one is no cursor. */
export const encodeDeadCursor = (r: K.DeadRef): string => `${r.at}.${r.seq}.${r.sink}`
const DeadRef = Schema.Struct({ at: Schema.Int, seq: Schema.Int, sink: Schema.Int })
const DeadCursor = Schema.String.annotate({ description: "The `next_cursor` of the previous page" }).pipe(
  Schema.decodeTo(
    Schema.UndefinedOr(DeadRef),
    SchemaTransformation.transformEffect({
      decode: (raw, options) => {
        if (raw === "") return Effect.succeed(undefined)
        const m = /^(\d{1,16})\.(\d{1,16})\.(\d{1,5})$/.exec(raw)
        return m === null || Number(m[3]) > 0xffff
          ? invalid("not a cursor this API returned")(raw, options)
          : Effect.succeed({ at: Number(m[1]), seq: Number(m[2]), sink: Number(m[3]) })
      },
      encode: (r) => Effect.succeed(r === undefined ? "" : encodeDeadCursor(r))
    })
  )
)

/** `kinds` of a purge: `pending`, `dead` or both. */
const kindsMessage = "expected pending, dead or both (comma-separated)"
const Kinds = List(Schema.Literals(["pending", "dead"]).annotate({ message: kindsMessage }), "`pending`, `dead` or both")
  .check(Schema.isMinLength(1, { message: kindsMessage }))
  .annotateKey({ messageMissingKey: kindsMessage })

const Required = Schema.String.check(Schema.isMinLength(1, { message: "required" })).annotateKey({ messageMissingKey: "required" })

/** An instant: ms since the epoch or ISO 8601; a refusal names both forms (api-errors.ts `issueMessage`). */
const instantMessage = "expected an ISO 8601 time or epoch ms"
const Instant = Schema.Union([
  Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
  Schema.String.check(Schema.makeFilter((s) => !Number.isNaN(Date.parse(s)) || instantMessage)).pipe(
    Schema.decodeTo(
      Schema.Number,
      SchemaTransformation.transform({ decode: (s) => Date.parse(s), encode: (n) => new Date(n).toISOString() })
    )
  )
]).annotate({ message: instantMessage })

export const ReplayBody = Schema.Struct({
  tenant: Schema.optionalKey(
    Schema.Union([Schema.String, Schema.Array(Schema.String)]).annotate({ message: "expected a tenant id or a list of tenant ids" })
  ),
  source: Schema.optionalKey(Schema.String.annotate({ message: "expected a source id" })),
  /** Dead-letter time bounds, inclusive. */
  from: Schema.optionalKey(Instant),
  to: Schema.optionalKey(Instant),
  ids: Schema.optionalKey(
    Schema.Array(Schema.String.annotate({ message: "expected a hook id" }))
      .annotate({ message: `expected a list of at most ${REPLAY_MAX_IDS.toLocaleString("en-US")} hook ids` })
      .check(Schema.isMaxLength(REPLAY_MAX_IDS, { message: `expected at most ${REPLAY_MAX_IDS.toLocaleString("en-US")} hook ids` }))
  ),
  /** Only rows for this destination: a sink's name, or `endpoint:<id>`. */
  destination: Schema.optionalKey(Schema.String.annotate({ message: "expected a sink name or endpoint:<id>" }))
}).annotate({ identifier: "ReplayFilter", message: "expected a JSON object with tenant, source, from, to, ids or destination" })

// ---------------------------------------------------------------------------
// Answers

const Cursor = Schema.NullOr(Schema.String)

/** A page of a tenant's rows, newest first: `tenant`, `limit` up to `max`, and the last page's `cursor`. */
const pageQuery = (max: number) => ({
  tenant: Schema.optionalKey(Schema.String),
  limit: Schema.optionalKey(Limit(max)),
  cursor: Schema.optionalKey(Schema.String)
})

const DeadItem = Schema.Struct({
  id: Schema.String,
  tenant: Schema.NullOr(Schema.String),
  source: Schema.String,
  sink: Schema.NullOr(Schema.String),
  sink_index: Count,
  seq: Count,
  dead_at: Schema.String,
  attempts: Schema.NullOr(Count),
  last_status: Schema.NullOr(Count),
  /** The head of an ordered lane when it died (docs/delivery.md "Ordered delivery"): `skipped` past, or `held` for. */
  lane: Schema.optionalKey(Schema.Literals(["skipped", "held"]))
}).annotate({ identifier: "DeadItem" })

/** A held lane (onDead hold): its dead head, which the lane waits for. */
const HeldLane = Schema.Struct({
  destination: Schema.NullOr(Schema.String),
  ordering_key: Schema.NullOr(Schema.String),
  id: Schema.NullOr(Schema.String),
  seq: Count,
  sink_index: Count
}).annotate({ identifier: "HeldLane" })

/** Held lanes listed at most by one call. */
export const HELD_LANES_MAX = 1_000

/** A tenant's effective limits (src/domain/limits.ts) and what it overrides. */
const TenantLimits = {
  limits: Schema.Struct({ weight: Count, maxInflight: Count, ratePerSec: Schema.Number, ingestPerSec: Schema.Number, maxQueuedBytes: Count })
    .annotate({ identifier: "TenantLimits" }),
  limits_override: LimitsOverride
}

const TenantCounters = Schema.Struct({
  tenant: Schema.String,
  ...CounterFields,
  /** Rows of ordered lanes waiting behind their key's head (docs/delivery.md "Ordered delivery"). */
  waiting: Count,
  ...TenantLimits
}).annotate({ identifier: "TenantCounters" })

const QuarantineItem = Schema.Struct({
  at: Schema.String,
  tenant: Schema.String,
  source: Schema.String,
  reason: Schema.String,
  headers: Schema.Record(Schema.String, Schema.String),
  body_base64: Schema.String
}).annotate({ identifier: "QuarantineItem" })

const AuditItem = Schema.Struct({
  seq: Count,
  at: Schema.String,
  actor: Schema.String,
  tenants: Schema.NullOr(Schema.Array(Schema.String)),
  action: Schema.Literals(AUDIT_ACTIONS),
  params: Schema.Record(Schema.String, Schema.Unknown)
}).annotate({ identifier: "AuditItem" })

/** 503 of `/readyz`: not the `{error}` shape, the phase the node is in. */
export class NotReadyYet extends Schema.Error<NotReadyYet>("NotReadyYet")(
  {
    ready: Schema.Literal(false),
    phase: Schema.Literals(["starting", "standby", "migrating", "recovering", "stopping", "store_unavailable", "disk_reserve"])
  },
  { httpApiStatus: 503 }
) {}

// ---------------------------------------------------------------------------
// Endpoints

const tenantPath = { tenant: Schema.String }

export class AdminApi extends HttpApiGroup.make("admin")
  .add(
    HttpApiEndpoint.get("dlq", "/v1/dlq", {
      query: {
        tenant: Schema.optionalKey(List(Schema.String, "Tenants (default: the token's scope)")),
        limit: Schema.optionalKey(Limit(DLQ_PAGE_CEILING, "An integer from 1 to `admin.dlqPageMax` (at most 1,000)")),
        cursor: Schema.optionalKey(DeadCursor)
      },
      success: Schema.Struct({ items: Schema.Array(DeadItem), next_cursor: Cursor }),
      error: ForbiddenError
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "Dead rows, newest first"),
    HttpApiEndpoint.post("replay", "/v1/dlq/replay", {
      payload: ReplayBody,
      success: Schema.Struct({ revived: Count, scanned: Count, done: Schema.Boolean }),
      error: [ForbiddenError, TooLargeError]
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "Revive dead rows as first attempts"),
    HttpApiEndpoint.get("tenant", "/v1/tenants/:tenant", {
      params: tenantPath,
      success: TenantCounters,
      error: [ForbiddenError, UnknownTenantError]
    }).annotate(OpenApi.Summary, "The tenant's counters and its limits"),
    HttpApiEndpoint.get("heldLanes", "/v1/tenants/:tenant/ordering/held", {
      params: tenantPath,
      query: { limit: Schema.optionalKey(Limit(HELD_LANES_MAX)) },
      success: Schema.Struct({ tenant: Schema.String, items: Schema.Array(HeldLane) }),
      error: [ForbiddenError, UnknownTenantError]
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "The tenant's ordered lanes held by a dead head (onDead hold)"),
    HttpApiEndpoint.delete("purge", "/v1/tenants/:tenant/queue", {
      params: tenantPath,
      query: { kinds: Kinds },
      success: Schema.Struct({
        tenant: Schema.String,
        purged: Schema.Struct({ pending: Count, dead: Count }),
        done: Schema.Boolean
      }),
      error: [ForbiddenError, UnknownTenantError]
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "Purge the tenant's waiting or dead rows"),
    HttpApiEndpoint.get("quarantineList", "/v1/quarantine", {
      query: pageQuery(QUARANTINE_PAGE_MAX),
      success: Schema.Struct({ items: Schema.Array(QuarantineItem), next_cursor: Cursor }),
      error: ForbiddenError
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "Requests that failed verification, newest first"),
    HttpApiEndpoint.delete("quarantineDelete", "/v1/quarantine", {
      query: { tenant: Required },
      success: Schema.Struct({ tenant: Schema.String, deleted: Count }),
      error: ForbiddenError
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "Delete a tenant's quarantined requests"),
    HttpApiEndpoint.get("audit", "/v1/audit", {
      query: pageQuery(AUDIT_PAGE_MAX),
      success: Schema.Struct({ items: Schema.Array(AuditItem), next_cursor: Cursor }),
      error: ForbiddenError
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "Audit rows, newest first"),
    HttpApiEndpoint.get("config", "/v1/config", {
      success: Schema.Record(Schema.String, Schema.Unknown).annotate({
        description: "The effective configuration (docs/configuration.md), secrets and tokens `[redacted]`"
      }),
      error: ForbiddenError
    }).annotate(OpenApi.Summary, "The effective configuration, its generation and loadedAt; global tokens only"),
    HttpApiEndpoint.post("configReload", "/v1/config/reload", {
      success: ReloadAnswer,
      error: [ForbiddenError, ConfigInvalidError]
    }).annotate(OpenApi.Summary, "Read the configuration again and apply what can change live; global tokens only")
  )
  // Added last, so they run outside the endpoints' own: the token first, then the gate.
  .middleware(Services)
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Needs `Authorization: Bearer <token>`; a scoped token sees and touches only its tenants")
{}

/** What the operator console reads beyond the admin group (console-api.ts; docs/api.md "The console's reads"). */
export class ConsoleApi extends HttpApiGroup.make("console")
  .add(
    HttpApiEndpoint.get("whoami", "/v1/whoami", { success: C.Whoami }).annotate(OpenApi.Summary, "The token's name and scope"),
    HttpApiEndpoint.get("tenants", "/v1/tenants", { success: C.TenantList }).annotate(
      OpenApi.Summary,
      "Tenants by pending: the last gauge tick's top (global token) or the token's own tenants"
    ),
    HttpApiEndpoint.get("hook", "/v1/dlq/:id", {
      params: { id: Schema.String },
      success: C.HookDetail,
      error: C.UnknownHookError
    }).annotate(OpenApi.Summary, "A hook's rows and a capped preview of its body"),
    HttpApiEndpoint.get("history", "/v1/stats/history", { success: C.HistoryAnswer, error: ForbiddenError }).annotate(
      OpenApi.Summary,
      "The node's gauges and rates over the last hour; global tokens only"
    ),
    HttpApiEndpoint.get("sinks", "/v1/stats/sinks", { success: C.SinksAnswer, error: ForbiddenError }).annotate(
      OpenApi.Summary,
      "Per sink: delivery outcomes and latency; global tokens only"
    )
  )
  .middleware(Services)
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Needs `Authorization: Bearer <token>`, as the admin group")
{}

/** Per-tenant limits (limits.ts; docs/api.md). */
export class LimitsApi extends HttpApiGroup.make("limits")
  .add(
    HttpApiEndpoint.put("set", "/v1/tenants/:tenant/limits", {
      params: tenantPath,
      payload: LimitsOverride,
      success: Schema.Struct({ tenant: Schema.String, ...TenantLimits }),
      error: [ForbiddenError, UnknownTenantError, TooLargeError]
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "Set the tenant's limits override; global tokens only")
  )
  .middleware(Services)
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Needs `Authorization: Bearer <token>`, as the admin group")
{}

/** `store check` on the live store (store-check.ts; docs/api.md); global tokens only. */
export class StoreApi extends HttpApiGroup.make("store")
  .add(
    HttpApiEndpoint.post("check", "/v1/store/check", { success: StoreCheckAnswer, error: [ForbiddenError, Unavailable503] })
      .annotate(OpenApi.Summary, "Run `store check` on the live store; global tokens only")
  )
  .middleware(Services)
  .middleware(AdminAuth)
{}

export class OpsApi extends HttpApiGroup.make("ops")
  .add(
    HttpApiEndpoint.get("healthz", "/healthz", {
      success: Schema.Struct({ status: Schema.Literal("ok") })
    }).annotate(OpenApi.Summary, "The process serves (also during boot)"),
    HttpApiEndpoint.get("readyz", "/readyz", {
      success: Schema.Struct({ ready: Schema.Literal(true), phase: Schema.Literal("ready") }),
      error: NotReadyYet
    }).annotate(OpenApi.Summary, "Store open, migrations and recovery done, the store answers a read, free space above the disk reserve"),
    HttpApiEndpoint.get("metrics", "/metrics", {
      success: Schema.String.pipe(HttpApiSchema.asText({ contentType: Prometheus.CONTENT_TYPE }))
    }).annotate(OpenApi.Summary, "Prometheus text of every metric of the process")
  )
  .annotate(OpenApi.Description, "No token; keep them behind the network boundary")
{}

export class Api extends HttpApi.make("ankusa")
  .add(AdminApi)
  .add(LimitsApi)
  .add(EndpointsApi)
  .add(EndpointOpsApi)
  .add(PortalApi)
  .add(ConsoleApi)
  .add(StoreApi)
  .add(EraseApi)
  .add(OpsApi)
  .add(SvixAppsApi)
  .add(SvixEndpointsApi)
  .add(SvixMessagesApi)
  .add(SvixAuthApi)
  .annotateMerge(OpenApi.annotations({ title: "Ankusa admin and operations API", version: "v1" }))
{}

/** Where the API serves its OpenAPI document. */
export const OPENAPI_PATH = "/v1/openapi.json"
