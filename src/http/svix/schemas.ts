/**
 * The Svix-compatible routes' bodies and answers as the OpenAPI document shows them
 * (docs/svix-compat.md). The handlers read bodies themselves (translate.ts) so that a field
 * Ankusa cannot honour is named in a 422; these schemas describe, they do not decode.
 */
import { Schema } from "effect"

const Time = Schema.String.annotate({ description: "ISO 8601" })
const Labels = Schema.Record(Schema.String, Schema.String)
const Opt = <S extends Schema.Top>(s: S) => Schema.optionalKey(Schema.NullOr(s))

export const ApplicationIn = Schema.Struct({
  name: Schema.String.annotate({ description: "The tenant id when `uid` is left out; else it must equal `uid`" }),
  uid: Opt(Schema.String.annotate({ description: "The tenant id" })),
  throttleRate: Opt(Schema.Number.annotate({ description: "Refused (422): set the tenant's limits with PUT /v1/tenants/:tenant/limits" })),
  metadata: Opt(Labels.annotate({ description: "Only {} is accepted" }))
}).annotate({ identifier: "SvixApplicationIn" })

export const ApplicationOut = Schema.Struct({
  id: Schema.String.annotate({ description: "`app_` + the tenant id in base64url" }),
  uid: Schema.String,
  name: Schema.String,
  throttleRate: Schema.Null,
  metadata: Labels,
  createdAt: Time,
  updatedAt: Time
}).annotate({ identifier: "SvixApplicationOut" })

const endpointFields = {
  url: Schema.String,
  description: Opt(Schema.String),
  eventTypes: Opt(Schema.Array(Schema.String)),
  filterTypes: Opt(Schema.Array(Schema.String).annotate({ description: "Same as eventTypes" })),
  throttleRate: Opt(Schema.Number.annotate({ description: "Deliveries a second (the endpoint's ratePerSec)" })),
  rateLimit: Opt(Schema.Number.annotate({ description: "Same as throttleRate" })),
  disabled: Opt(Schema.Boolean),
  metadata: Opt(Labels),
  headers: Opt(Labels),
  secret: Opt(Schema.String),
  uid: Opt(Schema.String.annotate({ description: "Refused (422) unless null" })),
  channels: Opt(Schema.Array(Schema.String).annotate({ description: "Refused (422) unless null or empty" }))
}

export const EndpointIn = Schema.Struct(endpointFields).annotate({ identifier: "SvixEndpointIn" })
export const EndpointPatch = Schema.Struct({ ...endpointFields, url: Schema.optionalKey(Schema.String) }).annotate({ identifier: "SvixEndpointPatch" })

export const EndpointOut = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  description: Schema.String,
  eventTypes: Schema.NullOr(Schema.Array(Schema.String)),
  filterTypes: Schema.NullOr(Schema.Array(Schema.String)),
  throttleRate: Schema.NullOr(Schema.Number),
  rateLimit: Schema.NullOr(Schema.Number),
  uid: Schema.Null,
  channels: Schema.Null,
  disabled: Schema.Boolean,
  metadata: Labels,
  version: Schema.Number,
  createdAt: Time,
  updatedAt: Time
}).annotate({ identifier: "SvixEndpointOut" })

export const SecretOut = Schema.Struct({ key: Schema.String }).annotate({ identifier: "SvixEndpointSecretOut" })

export const MessageIn = Schema.Struct({
  eventType: Schema.String,
  payload: Schema.Record(Schema.String, Schema.Unknown),
  eventId: Opt(Schema.String.annotate({ description: "The idempotency key: a repeat within dedupe.windowMs is 409" }))
}).annotate({ identifier: "SvixMessageIn" })

export const MessageOut = Schema.Struct({
  id: Schema.String.annotate({ description: "The hook id (`webhook-id` on delivery)" }),
  eventType: Schema.NullOr(Schema.String),
  eventId: Schema.NullOr(Schema.String),
  payload: Schema.Unknown,
  channels: Schema.Null,
  tags: Schema.Null,
  timestamp: Time
}).annotate({ identifier: "SvixMessageOut" })

export const AttemptOut = Schema.Struct({
  id: Schema.String,
  msgId: Schema.String,
  endpointId: Schema.String,
  url: Schema.String,
  response: Schema.String,
  responseStatusCode: Schema.Number.annotate({ description: "0: no HTTP answer (a timeout or a transport error)" }),
  responseDurationMs: Schema.Number,
  status: Schema.Literals([0, 2]).annotate({ description: "0 success, 2 fail" }),
  statusText: Schema.Literals(["success", "fail"]),
  triggerType: Schema.Literal(0),
  timestamp: Time
}).annotate({ identifier: "SvixMessageAttemptOut" })

export const RecoverIn = Schema.Struct({ since: Time, until: Opt(Time) }).annotate({ identifier: "SvixRecoverIn" })

export const RecoverOut = Schema.Struct({
  id: Schema.String,
  status: Schema.Literals(["finished", "failed"]),
  task: Schema.Literal("endpoint.recover"),
  updatedAt: Time
}).annotate({ identifier: "SvixRecoverOut" })

export const PortalAccessIn = Schema.Struct({
  expiry: Opt(Schema.Int.annotate({ description: "Seconds the token lives (portal.ttlSeconds by default)" }))
}).annotate({ identifier: "SvixAppPortalAccessIn" })

export const PortalAccessOut = Schema.Struct({ url: Schema.String, token: Schema.String }).annotate({ identifier: "SvixAppPortalAccessOut" })

export const ListOf = <S extends Schema.Top>(item: S, identifier: string) =>
  Schema.Struct({ data: Schema.Array(item), iterator: Schema.NullOr(Schema.String), prevIterator: Schema.NullOr(Schema.String), done: Schema.Boolean })
    .annotate({ identifier })

export class SvixHttpError extends Schema.Error<SvixHttpError>("SvixHttpError")(
  { code: Schema.String, detail: Schema.String },
  { httpApiStatus: 404 }
) {}

export class SvixValidationError extends Schema.Error<SvixValidationError>("SvixValidationError")(
  { detail: Schema.Array(Schema.Struct({ loc: Schema.Array(Schema.String), msg: Schema.String, type: Schema.String })) },
  { httpApiStatus: 422 }
) {}
