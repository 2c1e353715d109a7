/**
 * Who asks, and what runs around every admin endpoint (api.ts): the principal of a request, the
 * bearer token middleware (auth.ts implements it), the gate and the schema errors
 * (api-middleware.ts). Apart from api.ts so that every group's file can use them.
 */
import { Context } from "effect"
import * as HttpApiMiddleware from "effect/http-api/HttpApiMiddleware"
import * as HttpApiSecurity from "effect/http-api/HttpApiSecurity"
import * as OpenApi from "effect/http-api/OpenApi"
import { BadRequestError, Unauthorized401, Unavailable503 } from "./api-errors.js"
import type { ApiServices } from "./gate.js"

/** An admin token as a request sees it; scopes follow the Quarantine and Audit services: `null` is global. */
export interface Principal {
  /** The token's name (audit rows name it, never the token). */
  readonly name: string
  /** null: every tenant. */
  readonly tenants: ReadonlyArray<string> | null
  /** A portal token's (auth.ts, portal.ts): it opens only the portal's routes, until it expires. */
  readonly portal?: { readonly expiresAt: number }
}

/** The principal of the admin request being served. */
export class Admin extends Context.Service<Admin, Principal>()("ankusa/http/Admin") {}

/** Bearer token of `adminTokens` (auth.ts). Outermost: a request without one is refused before anything else. */
export class AdminAuth extends HttpApiMiddleware.Service<AdminAuth, { provides: Admin }>()("ankusa/http/AdminAuth", {
  security: {
    bearer: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(OpenApi.Description, "A token of `adminTokens`: global, or scoped to a list of tenants")
    )
  },
  error: Unauthorized401
}) {}

/** The services behind the gate (gate.ts): 503 while the node starts or stops. */
export class Services extends HttpApiMiddleware.Service<Services, { provides: ApiServices }>()("ankusa/http/Services", {
  error: Unavailable503
}) {}

/** A query, path or body that fails its schema answers 400 `bad_query` or `bad_body`. */
export class RequestErrors extends HttpApiMiddleware.Service<RequestErrors>()("ankusa/http/RequestErrors", {
  error: BadRequestError
}) {}

