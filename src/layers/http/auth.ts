/**
 * Admin bearer tokens (product.md "Admin"): a token is global or scoped to a
 * list of tenants, and a scoped token sees and touches only its tenants.
 * Scopes use the convention of the Quarantine and Audit services: `null` is
 * global.
 */
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import { createHash, timingSafeEqual } from "node:crypto"
import type { AdminToken } from "../../domain/config.js"
import { Forbidden, Unauthorized } from "./errors.js"

export interface Principal {
  /** The token's name (audit rows name it, never the token). */
  readonly name: string
  /** null: every tenant. */
  readonly tenants: ReadonlyArray<string> | null
}

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

const BEARER = /^Bearer\s+(\S+)\s*$/i

export const authenticate = (table: TokenTable) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (req) => {
    const m = BEARER.exec(req.headers["authorization"] ?? "")
    const p = m === null ? undefined : table.find(m[1]!)
    return p === undefined ? Effect.fail(new Unauthorized()) : Effect.succeed(p)
  })

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
