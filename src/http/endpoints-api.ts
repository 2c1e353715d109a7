/**
 * Tenant endpoints and portal tokens in the API (docs/api.md "Endpoints", "Portal tokens"): the
 * groups, their paths, bodies and answers. endpoints.ts and portal.ts implement them; api.ts adds
 * them to the document.
 */
import { Effect, Schema, SchemaIssue, SchemaTransformation } from "effect"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { PORTAL_TTL_CEILING_S } from "../domain/config-endpoints.js"
import { EndpointCreate, EndpointPatch } from "../domain/endpoints.js"
import {
  ForbiddenError,
  PortalOffError,
  TooLargeError,
  UnknownEndpointError,
  UnknownTenantError,
  UnprocessableError
} from "./api-errors.js"
import { AdminAuth, RequestErrors, Services } from "./api-security.js"
import { Count } from "./schema-fields.js"

/** Largest endpoint create or patch body. */
export const ENDPOINT_BODY_MAX_BYTES = 16 * 1024

const tenantPath = { tenant: Schema.String }
const endpointPath = { tenant: Schema.String, id: Schema.String }

/** A destination's circuit breaker as this node holds it in memory (docs/delivery.md "Failing destinations"). */
export const BreakerStateView = Schema.Struct({
  state: Schema.Literals(["closed", "open", "half-open"]),
  /** While open or half-open: when its probe is (was) due. */
  openUntil: Schema.NullOr(Schema.String),
  /** Failed calls since its last 2xx. */
  failures: Count,
  trips: Count,
  /** Its last 2xx since this node started (or since its pool opened), else null. */
  lastSuccessAt: Schema.NullOr(Schema.String)
}).annotate({ identifier: "Breaker" })

/** An endpoint as answers show it: never its secret (`GET …/:id/secret` and the create answer do). */
export const EndpointView = Schema.Struct({
  id: Schema.String,
  tenant: Schema.String,
  url: Schema.String,
  description: Schema.String,
  eventTypes: Schema.Array(Schema.String),
  headers: Schema.Record(Schema.String, Schema.String),
  /** The tenant's labels, when it gave some: kept and answered, never read by delivery. */
  metadata: Schema.optionalKey(Schema.Record(Schema.String, Schema.String)),
  ratePerSec: Schema.Number,
  concurrency: Count,
  disabled: Schema.Boolean,
  disabledReason: Schema.NullOr(Schema.String),
  /** Present when it orders hooks by key (docs/delivery.md "Ordered delivery"). */
  ordered: Schema.optionalKey(Schema.Struct({ onDead: Schema.Literals(["skip", "hold"]) })),
  createdAt: Schema.String,
  updatedAt: Schema.String,
  /** Its breaker on the node that answers; null while it has no pool open there (no call since, or closed by `endpoints.maxPools`). */
  breaker: Schema.NullOr(BreakerStateView)
}).annotate({ identifier: "Endpoint" })

const Created = Schema.Struct({ ...EndpointView.fields, secret: Schema.String }).annotate({ identifier: "EndpointCreated" })

const ttlMessage = `expected an integer number of seconds from 1 to portal.maxTtlSeconds`
const Ttl = Schema.String.annotate({ description: "Seconds the token lives (default `portal.ttlSeconds`, at most `portal.maxTtlSeconds`)" }).pipe(
  Schema.decodeTo(
    Schema.Int,
    SchemaTransformation.transformEffect({
      decode: (s, options) =>
        /^\d{1,7}$/.test(s) && Number(s) >= 1 && Number(s) <= PORTAL_TTL_CEILING_S
          ? Effect.succeed(Number(s))
          : Effect.fail(new SchemaIssue.InvalidValue({ message: ttlMessage }, s, options)),
      encode: (n) => Effect.succeed(String(n))
    })
  )
)

const notFound = [ForbiddenError, UnknownTenantError, UnknownEndpointError]

export class EndpointsApi extends HttpApiGroup.make("endpoints")
  .add(
    HttpApiEndpoint.get("list", "/v1/tenants/:tenant/endpoints", {
      params: tenantPath,
      success: Schema.Struct({ items: Schema.Array(EndpointView) }),
      error: [ForbiddenError, UnknownTenantError]
    }).annotate(OpenApi.Summary, "The tenant's endpoints, without their secrets"),
    HttpApiEndpoint.post("create", "/v1/tenants/:tenant/endpoints", {
      params: tenantPath,
      payload: EndpointCreate,
      success: Created.pipe(HttpApiSchema.status(201)),
      error: [ForbiddenError, UnknownTenantError, TooLargeError, UnprocessableError]
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "Create an endpoint; the answer shows its secret"),
    HttpApiEndpoint.get("get", "/v1/tenants/:tenant/endpoints/:id", {
      params: endpointPath,
      success: EndpointView,
      error: notFound
    }).annotate(OpenApi.Summary, "One endpoint, without its secret"),
    HttpApiEndpoint.get("secret", "/v1/tenants/:tenant/endpoints/:id/secret", {
      params: endpointPath,
      success: Schema.Struct({ id: Schema.String, secret: Schema.String }),
      error: notFound
    }).annotate(OpenApi.Summary, "Reveal the endpoint's signing secret (leaves an audit row)"),
    HttpApiEndpoint.patch("update", "/v1/tenants/:tenant/endpoints/:id", {
      params: endpointPath,
      payload: EndpointPatch,
      success: EndpointView,
      error: [...notFound, TooLargeError, UnprocessableError]
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "Change an endpoint: the fields given replace theirs"),
    HttpApiEndpoint.delete("remove", "/v1/tenants/:tenant/endpoints/:id", {
      params: endpointPath,
      success: Schema.Struct({ id: Schema.String, deleted: Schema.Literal(true) }),
      error: notFound
    }).annotate(OpenApi.Summary, "Delete an endpoint")
  )
  .middleware(Services)
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Needs `Authorization: Bearer <token>`: a global token, one scoped to the tenant, or the tenant's portal token")
{}

export class PortalApi extends HttpApiGroup.make("portal")
  .add(
    HttpApiEndpoint.post("token", "/v1/tenants/:tenant/portal-token", {
      params: tenantPath,
      query: { ttlSeconds: Schema.optionalKey(Ttl) },
      success: Schema.Struct({ token: Schema.String, expiresAt: Schema.String, url: Schema.String }),
      error: [ForbiddenError, PortalOffError]
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "A short-lived token and console URL for the tenant's own endpoints page; global tokens only")
  )
  .middleware(Services)
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Needs `Authorization: Bearer <token>` of a global token")
{}
