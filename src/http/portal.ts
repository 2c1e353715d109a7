/**
 * Portal tokens (docs/api.md "Portal tokens"): `POST /v1/tenants/:tenant/portal-token` issues
 * one (global tokens only, audited), and `principalOf` reads one for the `AdminAuth` middleware
 * (auth.ts): a principal scoped to that tenant alone that opens only `PORTAL_ROUTES`. Both use
 * `portal.secret` of the generation in force; no store read.
 */
import { Clock, Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { randomBytes } from "node:crypto"
import { currentOf, type Generation } from "../config/live.js"
import type { Config } from "../domain/config.js"
import * as Portal from "../domain/portal.js"
import { audited } from "../lifecycle/audit.js"
import { Admin, Api, type Principal } from "./api.js"
import { type AdminError, toApi } from "./api-errors.js"
import { requireGlobal } from "./auth.js"
import { BadRequest, PortalOff } from "./errors.js"

/** What a portal token opens, by group and endpoint name: the tenant's endpoints, its dead letters and replay, and the console's reads of its scope. */
export const PORTAL_ROUTES: Readonly<Record<string, ReadonlyArray<string> | "all">> = {
  endpoints: "all",
  endpointOps: "all",
  admin: ["dlq", "replay", "tenant"],
  console: ["whoami", "tenants", "hook"],
  // The Svix-compatible routes of the tenant's application (svix/): its endpoints, messages and attempts.
  svixApps: ["get"],
  svixEndpoints: "all",
  svixMessages: "all"
}

export const opens = (group: string, endpoint: string): boolean => {
  const r = PORTAL_ROUTES[group]
  return r === "all" || (r !== undefined && r.includes(endpoint))
}

/** The principal of a portal token valid at `now` under the generation's secret; undefined otherwise (no secret: none is). */
export const principalOf = (g: Generation, token: string, now: number): Principal | undefined => {
  const secret = g.config.portal.secret
  if (secret === undefined) return undefined
  const claims = Portal.verify(secret, token, now)
  return claims === undefined ? undefined : { name: `portal:${claims.tenant}`, tenants: [claims.tenant], portal: { expiresAt: claims.expiresAt } }
}

/** The console page a portal token opens: the tenant's endpoints, the token in the fragment (never sent to a server). */
export const portalUrl = (origin: string, tenant: string, token: string): string =>
  `${origin.replace(/\/+$/, "")}/ui/#/tenants/${encodeURIComponent(tenant)}/endpoints?portal=${token}`

const answer = <A, E extends AdminError, R>(effect: Effect.Effect<A, E, R>) => Effect.mapError(effect, toApi)

/** A portal token for `tenant` and the console URL it opens (global tokens only; audited). */
export const issue = (current: () => Generation, tenant: string, ttlSeconds: number | undefined) =>
  Effect.gen(function* () {
    const p = yield* Admin
    yield* requireGlobal(p)
    const settings = current().config.portal
    if (settings.secret === undefined) return yield* new PortalOff()
    const ttl = ttlSeconds ?? settings.ttlSeconds
    if (ttl > settings.maxTtlSeconds) {
      return yield* new BadRequest({ code: "bad_query", message: `ttlSeconds: expected an integer from 1 to ${settings.maxTtlSeconds}` })
    }
    const expiresAt = (yield* Clock.currentTimeMillis) + ttl * 1000
    const token = Portal.sign(settings.secret, { tenant, expiresAt }, randomBytes(8).toString("hex"))
    const request = yield* HttpServerRequest.HttpServerRequest
    const origin = settings.publicUrl ?? `http://${request.headers["host"] ?? "127.0.0.1"}`
    yield* audited({ actor: p.name, tenants: [tenant], action: "portal.token", params: { ttlSeconds: ttl, expiresAt: new Date(expiresAt).toISOString() } }, Effect.void)
    return { token, expiresAt: new Date(expiresAt).toISOString(), url: portalUrl(origin, tenant, token) }
  })

export const layer = (boot: Config) =>
  HttpApiBuilder.group(Api, "portal", (handlers) =>
    Effect.map(currentOf(boot), (current) => handlers.handle("token", ({ params, query }) => answer(issue(current, params.tenant, query.ttlSeconds))))
  )
