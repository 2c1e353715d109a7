/**
 * What a tenant does with an endpoint beyond changing it (docs/api.md "Endpoints"): send it a
 * signed test event through the normal path, and read its recent attempts. endpoint-ops.ts
 * implements them.
 */
import { Schema } from "effect"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { ATTEMPT_LOG_PER_DESTINATION } from "../delivery/attempt-log.js"
import { ForbiddenError, TooMany429, Unavailable503, UnknownEndpointError, UnknownTenantError } from "./api-errors.js"
import { AdminAuth, RequestErrors, Services } from "./api-security.js"
import { Count, Limit } from "./schema-fields.js"

/** The event type of a test event. */
export const TEST_EVENT_TYPE = "ankusa.test"

const endpointPath = { tenant: Schema.String, id: Schema.String }

const AttemptsLimit = Limit(ATTEMPT_LOG_PER_DESTINATION)

export const AttemptView = Schema.Struct({
  at: Schema.String,
  hookId: Schema.String,
  /** 0 for a timeout or a transport error. */
  status: Count,
  latencyMs: Schema.Number,
  outcome: Schema.Literals(["delivered", "failed"]),
  error: Schema.NullOr(Schema.String),
  /** A non-2xx answer's first 4 KiB of body. */
  body: Schema.NullOr(Schema.String)
}).annotate({ identifier: "EndpointAttempt" })

export class EndpointOpsApi extends HttpApiGroup.make("endpointOps")
  .add(
    HttpApiEndpoint.post("test", "/v1/tenants/:tenant/endpoints/:id/test", {
      params: endpointPath,
      success: Schema.Struct({ id: Schema.String, seq: Count }).pipe(HttpApiSchema.status(202)),
      error: [ForbiddenError, UnknownTenantError, UnknownEndpointError, TooMany429, Unavailable503]
    }).annotate(OpenApi.Summary, "Send the endpoint a signed test event through the normal path, admitted as any hook of the tenant; answers its hook id"),
    HttpApiEndpoint.post("rotate", "/v1/tenants/:tenant/endpoints/:id/secret/rotate", {
      params: endpointPath,
      success: Schema.Struct({ id: Schema.String, secret: Schema.String, previousUntil: Schema.NullOr(Schema.String) }),
      error: [ForbiddenError, UnknownTenantError, UnknownEndpointError]
    }).annotate(OpenApi.Summary, "A new signing secret; the old one signs beside it for endpoints.rotationOverlapMs (two v1 signatures)"),
    HttpApiEndpoint.get("attempts", "/v1/tenants/:tenant/endpoints/:id/deliveries", {
      params: endpointPath,
      query: { limit: Schema.optionalKey(AttemptsLimit) },
      success: Schema.Struct({ items: Schema.Array(AttemptView) }),
      error: [ForbiddenError, UnknownTenantError, UnknownEndpointError]
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "The endpoint's recent attempts, newest first (memory only, a bounded log)")
  )
  .middleware(Services)
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Needs `Authorization: Bearer <token>`: a global token, one scoped to the tenant, or the tenant's portal token")
{}
