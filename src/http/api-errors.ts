/**
 * The wire form of the refusals the admin and operations API declares: one
 * schema per status, JSON `{"error", "message"}` (docs/api.md) with the
 * headers of that status. errors.ts decides the status, code, message and
 * headers of every edge error; `toApi` only picks the schema of its status.
 */
import { Schema, SchemaAST, type SchemaIssue } from "effect"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import type { StoreError } from "../store/store.js"
import type { StoreCheckBusy } from "../queue/format/check-service.js"
import type { TenantNotFound } from "../queue/tenants.js"
import type { InvalidEndpoint, UnsafeUrl } from "../domain/endpoints.js"
import type { EndpointLimit, EndpointNotFound } from "../queue/endpoints.js"
import type { AdmissionRefusal } from "../domain/admission.js"
import { type BadRequest, type Forbidden, type NotReady, type PortalOff, refusalOf, type TooLarge, type Unauthorized } from "./errors.js"

/** Every error an admin request can meet before it is answered. */
export type AdminError =
  | BadRequest
  | TooLarge
  | Unauthorized
  | Forbidden
  | TenantNotFound
  | NotReady
  | StoreError
  | StoreCheckBusy
  | InvalidEndpoint
  | UnsafeUrl
  | EndpointLimit
  | EndpointNotFound
  | PortalOff
  | AdmissionRefusal

const body = <const Codes extends ReadonlyArray<string>>(status: number, codes: Codes) =>
  Schema.Struct({ error: Schema.Literals(codes), message: Schema.String }).pipe(HttpApiSchema.status(status))

export class BadRequestError extends Schema.Error<BadRequestError>("BadRequest")(
  { error: Schema.Literals(["bad_query", "bad_body", "missing_filter"]), message: Schema.String },
  { httpApiStatus: 400, description: "A malformed query, path or body" }
) {}

/** 400 of `POST /v1/config/reload`: every issue of the file, as at boot; nothing changed. */
export class ConfigInvalidError extends Schema.Error<ConfigInvalidError>("ConfigInvalid")(
  { error: Schema.Literal("config_invalid"), message: Schema.String, issues: Schema.Array(Schema.String) },
  { httpApiStatus: 400, description: "The configuration read again is invalid; the running one stays" }
) {}

export class UnauthorizedError extends Schema.Error<UnauthorizedError>("Unauthorized")({
  error: Schema.Literal("unauthorized"),
  message: Schema.String
}) {}

/** 401 with `WWW-Authenticate: Bearer`. */
export const Unauthorized401 = UnauthorizedError.pipe(
  HttpApiSchema.encodeToWithHeaders(
    { body: body(401, ["unauthorized"]), headers: { "www-authenticate": Schema.Literal("Bearer") } },
    {
      decode: ({ body }) => new UnauthorizedError(body),
      encode: (e) => ({ body: { error: e.error, message: e.message }, headers: { "www-authenticate": "Bearer" as const } })
    }
  )
).annotate({ description: "No bearer token, or not one of adminTokens" })

export class ForbiddenError extends Schema.Error<ForbiddenError>("Forbidden")(
  { error: Schema.Literal("forbidden"), message: Schema.String },
  { httpApiStatus: 403, description: "A tenant outside the token's scope, or a global token is needed" }
) {}

export class UnknownTenantError extends Schema.Error<UnknownTenantError>("UnknownTenant")(
  { error: Schema.Literal("unknown_tenant"), message: Schema.String },
  { httpApiStatus: 404, description: "The tenant has never been seen on this node" }
) {}

export class UnknownEndpointError extends Schema.Error<UnknownEndpointError>("UnknownEndpoint")(
  { error: Schema.Literal("unknown_endpoint"), message: Schema.String },
  { httpApiStatus: 404, description: "No such endpoint of this tenant" }
) {}

export class UnprocessableError extends Schema.Error<UnprocessableError>("Unprocessable")(
  { error: Schema.Literals(["invalid_endpoint", "unsafe_url", "endpoint_limit"]), message: Schema.String },
  { httpApiStatus: 422, description: "A field refused (the message names it), a URL the SSRF guard refuses, or the tenant's endpoints are at tenants.maxEndpoints" }
) {}

export class PortalOffError extends Schema.Error<PortalOffError>("PortalOff")(
  { error: Schema.Literal("portal_off"), message: Schema.String },
  { httpApiStatus: 409, description: "Portal tokens are off: portal.secret is not set" }
) {}

export class TooLargeError extends Schema.Error<TooLargeError>("TooLarge")(
  { error: Schema.Literal("too_large"), message: Schema.String },
  { httpApiStatus: 413, description: "The body exceeds its bound" }
) {}

export class TooManyError extends Schema.Error<TooManyError>("TooMany")({
  error: Schema.Literals(["tenant_rate", "tenant_quota"]),
  message: Schema.String,
  retryAfter: Schema.String
}) {}

/** 429 with `Retry-After` (seconds): admission (docs/api.md "Admission"). */
export const TooMany429 = TooManyError.pipe(
  HttpApiSchema.encodeToWithHeaders(
    { body: body(429, ["tenant_rate", "tenant_quota"]), headers: { "retry-after": Schema.String } },
    {
      decode: ({ body, headers }) => new TooManyError({ ...body, retryAfter: headers["retry-after"] }),
      encode: (e) => ({ body: { error: e.error, message: e.message }, headers: { "retry-after": e.retryAfter } })
    }
  )
).annotate({ description: "The tenant is past its ingest rate or its queued-bytes quota: retry after" })

export class UnavailableError extends Schema.Error<UnavailableError>("Unavailable")({
  error: Schema.Literals(["unavailable", "disk_reserve", "standby"]),
  message: Schema.String,
  retryAfter: Schema.String
}) {}

/** 503 with `Retry-After` (seconds). */
export const Unavailable503 = UnavailableError.pipe(
  HttpApiSchema.encodeToWithHeaders(
    { body: body(503, ["unavailable", "disk_reserve", "standby"]), headers: { "retry-after": Schema.String } },
    {
      decode: ({ body, headers }) => new UnavailableError({ ...body, retryAfter: headers["retry-after"] }),
      encode: (e) => ({ body: { error: e.error, message: e.message }, headers: { "retry-after": e.retryAfter } })
    }
  )
).annotate({ description: "The node is starting, stopping or a standby, the store failed, or its disk is under store.minFreeBytes: retry" })

/** The wire error of each edge error (its status as errors.ts maps it). */
export type WireOf<E> = E extends { readonly _tag: "BadRequest" } ? BadRequestError
  : E extends { readonly _tag: "Unauthorized" } ? UnauthorizedError
  : E extends { readonly _tag: "Forbidden" } ? ForbiddenError
  : E extends { readonly _tag: "TenantNotFound" } ? UnknownTenantError
  : E extends { readonly _tag: "EndpointNotFound" } ? UnknownEndpointError
  : E extends { readonly _tag: "InvalidEndpoint" | "UnsafeUrl" | "EndpointLimit" } ? UnprocessableError
  : E extends { readonly _tag: "PortalOff" } ? PortalOffError
  : E extends { readonly _tag: "TooLarge" } ? TooLargeError
  : E extends { readonly _tag: "TenantRate" | "TenantQuota" } ? TooManyError
  : E extends { readonly _tag: "NotReady" | "StoreError" | "StoreCheckBusy" | "DiskReserve" | "Busy" } ? UnavailableError
  : never

export const toApi = <E extends AdminError>(e: E): WireOf<E> => {
  const r = refusalOf(e)
  const message = r.body.message
  const wire = (() => {
    switch (r.status) {
      case 400:
        return new BadRequestError({ error: r.body.error as BadRequestError["error"], message })
      case 401:
        return new UnauthorizedError({ error: "unauthorized", message })
      case 403:
        return new ForbiddenError({ error: "forbidden", message })
      case 404:
        return r.body.error === "unknown_endpoint"
          ? new UnknownEndpointError({ error: "unknown_endpoint", message })
          : new UnknownTenantError({ error: "unknown_tenant", message })
      case 409:
        return new PortalOffError({ error: "portal_off", message })
      case 422:
        return new UnprocessableError({ error: r.body.error as UnprocessableError["error"], message })
      case 413:
        return new TooLargeError({ error: "too_large", message })
      case 429:
        return new TooManyError({ error: r.body.error as TooManyError["error"], message, retryAfter: r.headers["retry-after"] ?? "" })
      case 503:
        return new UnavailableError({ error: r.body.error === "disk_reserve" || r.body.error === "standby" ? r.body.error : "unavailable", message, retryAfter: r.headers["retry-after"] ?? "" })
    }
    throw new Error(`no wire error for ${e._tag} (status ${r.status})`)
  })()
  return wire as WireOf<E>
}

/** Longest key or path segment an error message shows: a message never echoes the request. */
export const SHOWN_MAX = 64

/** A path segment as shown (`ids[3]`, `from`), cut to `SHOWN_MAX`. */
const segment = (p: PropertyKey, first: boolean): string => {
  if (typeof p === "number") return `[${p}]`
  const s = String(p)
  const cut = s.length > SHOWN_MAX ? `${s.slice(0, SHOWN_MAX)}…` : s
  return first ? cut : `.${cut}`
}

const own = (ast: SchemaAST.AST | undefined): string | undefined => {
  const m = ast?.annotations?.["message"]
  return typeof m === "string" ? m : undefined
}

/** What a type expects, in words, without the value. */
const expectedOf = (ast: SchemaAST.AST): string => {
  if (SchemaAST.isString(ast)) return "expected a string"
  if (SchemaAST.isNumber(ast)) return "expected a number"
  if (SchemaAST.isBoolean(ast)) return "expected true or false"
  if (SchemaAST.isArrays(ast)) return "expected a list"
  if (SchemaAST.isObjects(ast)) return "expected a JSON object"
  if (SchemaAST.isLiteral(ast)) return `expected ${JSON.stringify(ast.literal)}`
  if (SchemaAST.isUnion(ast)) return `expected ${ast.types.map((t) => expectedOf(t).replace(/^expected /, "")).join(" or ")}`
  return "invalid value"
}

const fieldsOf = (ast: SchemaAST.AST): ReadonlyArray<string> =>
  SchemaAST.isObjects(ast) ? ast.propertySignatures.map((p) => String(p.name)) : []

/**
 * The first problem of a schema failure: where (the path) and what is accepted there.
 * The outermost annotated `message` on the way wins (a field names its accepted
 * forms); nothing of the input is ever part of it, and an unknown key is cut.
 */
const firstProblem = (issue: SchemaIssue.Issue, path: ReadonlyArray<PropertyKey>): { path: ReadonlyArray<PropertyKey>; message: string } => {
  switch (issue._tag) {
    case "Pointer":
      return firstProblem(issue.issue, [...path, ...issue.path])
    case "Encoding":
      return own(issue.ast) !== undefined ? { path, message: own(issue.ast)! } : firstProblem(issue.issue, path)
    case "Filter": {
      const m = issue.filter.annotations?.["message"]
      return typeof m === "string" ? { path, message: m } : firstProblem(issue.issue, path)
    }
    case "Composite":
      return firstProblem(issue.issues[0], path)
    case "AnyOf": {
      if (own(issue.ast) !== undefined) return { path, message: own(issue.ast)! }
      const deeper = issue.issues.find((i) => i._tag !== "InvalidType")
      return deeper !== undefined ? firstProblem(deeper, path) : { path, message: expectedOf(issue.ast) }
    }
    case "InvalidType":
      return { path, message: own(issue.ast) ?? expectedOf(issue.ast) }
    case "InvalidValue": {
      const m = issue.annotations?.["message"]
      return { path, message: typeof m === "string" ? m : "invalid value" }
    }
    case "MissingKey": {
      const m = issue.annotations?.["messageMissingKey"]
      return { path, message: typeof m === "string" ? m : "required" }
    }
    case "UnexpectedKey": {
      const fields = fieldsOf(issue.ast)
      return { path, message: fields.length === 0 ? "not a field here" : `not a field; expected one of ${fields.join(", ")}` }
    }
    case "OneOf":
    case "Forbidden":
      return { path, message: "invalid value" }
  }
}

/**
 * `<path>: <what is accepted>` of a schema failure's first problem; `at` names a failure with no path.
 * `depth` cuts the path (a query names the parameter, not the list position in it).
 */
export const issueMessage = (issue: SchemaIssue.Issue, at: string, depth = Infinity): string => {
  const first = firstProblem(issue, [])
  const shown = first.path.slice(0, depth)
  return `${shown.length === 0 ? at : shown.map((p, i) => segment(p, i === 0)).join("")}: ${first.message}`
}
