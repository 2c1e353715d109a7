/**
 * The Svix-compatible routes under `/api/v1/` as `HttpApi` groups (docs/svix-compat.md has the
 * table): behind the same gate and bearer token as the `/v1/` routes. The handlers (apps.ts,
 * endpoints.ts, messages.ts, portal.ts) answer in Svix's shapes; api.ts adds the groups to the
 * document.
 */
import { Schema } from "effect"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { AdminAuth, Services } from "../api-security.js"
import * as S from "./schemas.js"

const app = { app_id: Schema.String }
const endpoint = { app_id: Schema.String, endpoint_id: Schema.String }
const listQuery = { limit: Schema.optionalKey(Schema.String), iterator: Schema.optionalKey(Schema.String), order: Schema.optionalKey(Schema.String) }
const errors = [S.SvixHttpError, S.SvixValidationError]
const status = (n: number) => HttpApiSchema.status(n)
const none = Schema.Void.pipe(status(204))

export class SvixAppsApi extends HttpApiGroup.make("svixApps")
  .add(
    HttpApiEndpoint.get("list", "/api/v1/app", { query: listQuery, success: S.ListOf(S.ApplicationOut, "SvixListApplicationOut"), error: errors })
      .annotate(OpenApi.Summary, "Applications: the tenants the token may see, by ordinal"),
    HttpApiEndpoint.post("create", "/api/v1/app", {
      query: { get_if_exists: Schema.optionalKey(Schema.String) },
      payload: S.ApplicationIn,
      success: [S.ApplicationOut.pipe(status(201)), S.ApplicationOut],
      error: errors
    }).annotate(OpenApi.Summary, "Create a tenant (an ordinal); with get_if_exists=true an existing one answers 200"),
    HttpApiEndpoint.get("get", "/api/v1/app/:app_id", { params: app, success: S.ApplicationOut, error: errors })
      .annotate(OpenApi.Summary, "One application (its uid or its app_ id)"),
    HttpApiEndpoint.put("update", "/api/v1/app/:app_id", { params: app, payload: S.ApplicationIn, success: S.ApplicationOut, error: errors })
      .annotate(OpenApi.Summary, "Create the tenant if it is new; an application has nothing else to change"),
    HttpApiEndpoint.delete("remove", "/api/v1/app/:app_id", { params: app, success: none, error: errors })
      .annotate(OpenApi.Summary, "Erase the tenant (TEN-5); global tokens only")
  )
  .middleware(Services)
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Svix-compatible: an application is a tenant (docs/svix-compat.md)")
{}

export class SvixEndpointsApi extends HttpApiGroup.make("svixEndpoints")
  .add(
    HttpApiEndpoint.get("list", "/api/v1/app/:app_id/endpoint", { params: app, query: listQuery, success: S.ListOf(S.EndpointOut, "SvixListEndpointOut"), error: errors }),
    HttpApiEndpoint.post("create", "/api/v1/app/:app_id/endpoint", { params: app, payload: S.EndpointIn, success: S.EndpointOut.pipe(status(201)), error: errors }),
    HttpApiEndpoint.get("get", "/api/v1/app/:app_id/endpoint/:endpoint_id", { params: endpoint, success: S.EndpointOut, error: errors }),
    HttpApiEndpoint.put("update", "/api/v1/app/:app_id/endpoint/:endpoint_id", { params: endpoint, payload: S.EndpointIn, success: S.EndpointOut, error: errors }),
    HttpApiEndpoint.patch("patch", "/api/v1/app/:app_id/endpoint/:endpoint_id", { params: endpoint, payload: S.EndpointPatch, success: S.EndpointOut, error: errors }),
    HttpApiEndpoint.delete("remove", "/api/v1/app/:app_id/endpoint/:endpoint_id", { params: endpoint, success: none, error: errors }),
    HttpApiEndpoint.get("secret", "/api/v1/app/:app_id/endpoint/:endpoint_id/secret", { params: endpoint, success: S.SecretOut, error: errors }),
    HttpApiEndpoint.post("rotate", "/api/v1/app/:app_id/endpoint/:endpoint_id/secret/rotate", { params: endpoint, success: none, error: errors })
      .annotate(OpenApi.Summary, "A new secret; the old one signs beside it for endpoints.rotationOverlapMs"),
    HttpApiEndpoint.post("recover", "/api/v1/app/:app_id/endpoint/:endpoint_id/recover", {
      params: endpoint,
      payload: S.RecoverIn,
      success: S.RecoverOut.pipe(status(202)),
      error: errors
    }).annotate(OpenApi.Summary, "Replay the endpoint's dead rows whose dead-letter time is in [since, until]")
  )
  .middleware(Services)
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Svix-compatible: an endpoint is a tenant endpoint (docs/svix-compat.md)")
{}

export class SvixMessagesApi extends HttpApiGroup.make("svixMessages")
  .add(
    HttpApiEndpoint.post("create", "/api/v1/app/:app_id/msg", {
      params: app,
      query: { with_content: Schema.optionalKey(Schema.String) },
      payload: S.MessageIn,
      success: S.MessageOut.pipe(status(202)),
      error: errors
    }).annotate(OpenApi.Summary, "A hook of the tenant, routed to its endpoints by event type; answered after the synced commit"),
    HttpApiEndpoint.get("get", "/api/v1/app/:app_id/msg/:msg_id", {
      params: { app_id: Schema.String, msg_id: Schema.String },
      query: { with_content: Schema.optionalKey(Schema.String) },
      success: S.MessageOut,
      error: errors
    }),
    HttpApiEndpoint.get("byMessage", "/api/v1/app/:app_id/attempt/msg/:msg_id", {
      params: { app_id: Schema.String, msg_id: Schema.String },
      query: listQuery,
      success: S.ListOf(S.AttemptOut, "SvixListMessageAttemptOut"),
      error: errors
    }).annotate(OpenApi.Summary, "The message's attempts still in the attempt log (memory, bounded)"),
    HttpApiEndpoint.get("byEndpoint", "/api/v1/app/:app_id/attempt/endpoint/:endpoint_id", {
      params: endpoint,
      query: listQuery,
      success: S.ListOf(S.AttemptOut, "SvixListEndpointAttemptOut"),
      error: errors
    }).annotate(OpenApi.Summary, "The endpoint's recent attempts (memory, bounded)")
  )
  .middleware(Services)
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Svix-compatible: a message is a hook (docs/svix-compat.md)")
{}

export class SvixAuthApi extends HttpApiGroup.make("svixAuth")
  .add(
    HttpApiEndpoint.post("portalAccess", "/api/v1/auth/app-portal-access/:app_id", {
      params: app,
      payload: S.PortalAccessIn,
      success: S.PortalAccessOut,
      error: errors
    }).annotate(OpenApi.Summary, "A portal token and the console URL of the tenant's Endpoints page; global tokens only")
  )
  .middleware(Services)
  .middleware(AdminAuth)
{}
