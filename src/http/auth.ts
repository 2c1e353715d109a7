/**
 * Admin bearer tokens (product.md "Admin"): a token is global or scoped to a
 * list of tenants, and a scoped token sees and touches only its tenants.
 * Scopes use the convention of the Quarantine and Audit services: `null` is
 * global. The `AdminAuth` middleware of the API (api.ts) checks the token; a
 * portal token (`apt_…`, portal.ts) is a principal scoped to one tenant.
 */
import { Clock, Effect, Layer, Redacted } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { currentOf, type Generation } from "../config/live.js"
import type { AdminToken, Config } from "../domain/config.js"
import { Admin, AdminAuth, type Principal } from "./api.js"
import { toApi } from "./api-errors.js"
import { looksLikePortalToken } from "../domain/portal.js"
import { Forbidden, Unauthorized } from "./errors.js"
import { opens, principalOf } from "./portal.js"

export type { Principal }

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest()

export interface TokenTable {
  readonly find: (token: string) => Principal | undefined
}

/** Compares digests in constant time and always visits every token. */
export const tokenTable = (tokens: ReadonlyArray<AdminToken>): TokenTable => {
  const table = tokens.map((t) => ({ digest: digest(t.token), principal: { name: t.name, tenants: t.tenants === "*" ? null : t.tenants } }))
  return {
    find: (token) => {
      const d = digest(token)
      let found: Principal | undefined
      for (const t of table) if (timingSafeEqual(t.digest, d) && found === undefined) found = t.principal
      return found
    }
  }
}

/**
 * The `AdminAuth` middleware: the bearer token names the `Admin` of the request, or it is refused 401.
 * The tokens are the generation in force at the request (a reload adds or revokes them for the next one).
 */
export const layer = (config: Config): Layer.Layer<AdminAuth> =>
  Layer.effect(
    AdminAuth,
    Effect.map(currentOf(config), (current) => {
      let built: { readonly of: Generation; readonly table: TokenTable } | undefined
      const tableOf = (g: Generation) => {
        if (built === undefined || built.of !== g) built = { of: g, table: tokenTable(g.config.adminTokens) }
        return built.table
      }
      return {
        bearer: (httpEffect, { credential, endpoint, group }) => {
          const token = Redacted.value(credential).trim()
          const who = Effect.flatMap(Clock.currentTimeMillis, (now) => {
            const g = current()
            // A portal token (portal.ts) opens only its tenant's portal routes, until it expires.
            const p = token === ""
              ? undefined
              : looksLikePortalToken(token)
              ? (opens(group.identifier, endpoint.identifier) ? principalOf(g, token, now) : undefined)
              : tableOf(g).find(token)
            return p === undefined ? Effect.fail(toApi(new Unauthorized())) : Effect.succeed(p)
          })
          return Effect.flatMap(who, (p) => Effect.provideService(httpEffect, Admin, p))
        }
      }
    })
  )

export const isGlobal = (p: Principal): boolean => p.tenants === null

export const canSee = (p: Principal, tenant: string): boolean => p.tenants === null || p.tenants.includes(tenant)

/** The tenant must be in scope. */
export const requireTenant = (p: Principal, tenant: string): Effect.Effect<void, Forbidden> =>
  canSee(p, tenant) ? Effect.void : Effect.fail(new Forbidden({ message: `token ${p.name} is not scoped to tenant ${JSON.stringify(tenant)}` }))

export const requireGlobal = (p: Principal): Effect.Effect<void, Forbidden> =>
  isGlobal(p) ? Effect.void : Effect.fail(new Forbidden({ message: `token ${p.name} is scoped to tenants; this needs a global token` }))

/**
 * The tenants a request acts on: the ones asked for (each must be in scope),
 * or, when none are asked for, the token's scope (undefined: every tenant).
 */
export const tenantsFor = (
  p: Principal,
  requested: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<string> | undefined, Forbidden> =>
  requested.length === 0
    ? Effect.succeed(p.tenants ?? undefined)
    : Effect.as(Effect.forEach(requested, (t) => requireTenant(p, t), { discard: true }), [...new Set(requested)])
