/**
 * Answers of the endpoints the operator console reads beyond the admin group (api.ts `ConsoleApi`,
 * docs/api.md "The console's reads"): who the token is, the top tenants, a dead hook's detail,
 * the node's recent history and the per-sink figures.
 */
import { Schema } from "effect"
import { BreakerStateView } from "./endpoints-api.js"
import { Count, CounterFields } from "./schema-fields.js"

export const Whoami = Schema.Struct({
  name: Schema.String,
  /** null: a global token. */
  tenants: Schema.NullOr(Schema.Array(Schema.String)),
  /** A portal token's expiry; absent for the tokens of `adminTokens`. */
  expires_at: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "Whoami" })

export const TenantList = Schema.Struct({
  items: Schema.Array(Schema.Struct({ tenant: Schema.String, pending: Count }))
}).annotate({ identifier: "TenantList" })

/** Bytes of a body's preview at most. */
export const PREVIEW_MAX_BYTES = 2_048

const HookDelivery = Schema.Struct({
  sink: Schema.NullOr(Schema.String),
  sink_index: Count,
  /** false: the row is gone (delivered, purged); the other fields are null. */
  exists: Schema.Boolean,
  attempts: Schema.NullOr(Count),
  /** HTTP status of the last attempt; 0 when it got no answer (a timeout or a connection error). */
  last_status: Schema.NullOr(Count),
  last_attempt_at: Schema.NullOr(Schema.String),
  size: Schema.NullOr(Count)
})

export const HookDetail = Schema.Struct({
  id: Schema.String,
  tenant: Schema.String,
  source: Schema.String,
  received_at: Schema.String,
  /** The event type the source's rule found (docs/delivery.md "Tenant endpoints"); null when none. */
  event_type: Schema.NullOr(Schema.String),
  content_type: Schema.String,
  headers: Schema.Record(Schema.String, Schema.String),
  body_bytes: Count,
  /** The first `PREVIEW_MAX_BYTES` of the body, as text when they are UTF-8, else base64. */
  body_preview: Schema.String,
  body_preview_encoding: Schema.Literals(["utf8", "base64"]),
  body_truncated: Schema.Boolean,
  deliveries: Schema.Array(HookDelivery)
}).annotate({ identifier: "HookDetail" })

const HistorySample = Schema.Struct({
  at: Schema.String,
  ...CounterFields,
  oldest_due_age_seconds: Schema.Number,
  tenants: Count,
  ingested: Count,
  delivered: Count,
  failed: Count,
  ingest_per_second: Schema.Number,
  delivered_per_second: Schema.Number,
  failed_per_second: Schema.Number
})

export const HistoryAnswer = Schema.Struct({
  interval_ms: Count,
  max_samples: Count,
  samples: Schema.Array(HistorySample),
  /** The configuration generation in force, when it was loaded and by what (docs/configuration.md "Reloading"). */
  config: Schema.Struct({ generation: Count, loaded_at: Schema.String, trigger: Schema.Literals(["boot", "signal", "api", "watch"]) })
}).annotate({ identifier: "History" })

export const SinksAnswer = Schema.Struct({
  /** The figures count from this instant (the process start). */
  since: Schema.String,
  items: Schema.Array(
    Schema.Struct({
      sink: Schema.String,
      delivered: Count,
      retried: Count,
      dead: Count,
      dropped: Count,
      calls: Count,
      p50_seconds: Schema.NullOr(Schema.Number),
      p99_seconds: Schema.NullOr(Schema.Number),
      mean_seconds: Schema.NullOr(Schema.Number),
      /** Its newest failed attempt still in the attempt log: a non-2xx's status and first 4 KiB of body, or the error. */
      last_failure: Schema.NullOr(
        Schema.Struct({ at: Schema.String, status: Count, error: Schema.NullOr(Schema.String), body: Schema.NullOr(Schema.String) })
      ),
      /** Its circuit breaker and last 2xx, in this node's memory (null when the pipeline does not run here). */
      breaker: Schema.NullOr(BreakerStateView)
    })
  )
}).annotate({ identifier: "SinkStats" })

/** 404 of a hook detail: no such hook, or (never told apart) one outside the token's scope. */
export class UnknownHookError extends Schema.Error<UnknownHookError>("UnknownHook")(
  { error: Schema.Literal("unknown_hook"), message: Schema.String },
  { httpApiStatus: 404, description: "No such hook in the token's scope" }
) {}
