/**
 * Portal tokens (issue 27; docs/api.md "Portal tokens"): short-lived bearer tokens for one
 * tenant's self-service pages, signed with `portal.secret` so that every node of a fleet verifies
 * them without a store read. Pure (HMAC from node:crypto).
 *
 * `apt_<payload>.<signature>`: payload is base64url of `{"v":1,"t":tenant,"s":"portal","e":expiresAtMs,"n":nonce}`,
 * signature base64url of HMAC-SHA256(secret, "ankusa-portal-v1." + payload). A new secret makes
 * every token signed with the old one invalid.
 */
import { createHmac, timingSafeEqual } from "node:crypto"

export const PREFIX = "apt_"
const VERSION = 1
/** The only scope a portal token has: the tenant's endpoints and its dead letters. */
export const SCOPE = "portal"
/** Longest token accepted (a tenant id is at most 256 bytes). */
export const TOKEN_MAX_CHARS = 1_024

export interface PortalClaims {
  readonly tenant: string
  readonly expiresAt: number
}

const mac = (secret: string, payload: string): Buffer => createHmac("sha256", secret).update(`ankusa-portal-v1.${payload}`).digest()

/** A token for `claims`; `nonce` makes two tokens of one tenant and expiry differ. */
export const sign = (secret: string, claims: PortalClaims, nonce: string): string => {
  const payload = Buffer.from(JSON.stringify({ v: VERSION, t: claims.tenant, s: SCOPE, e: claims.expiresAt, n: nonce }), "utf8").toString("base64url")
  return `${PREFIX}${payload}.${mac(secret, payload).toString("base64url")}`
}

export const looksLikePortalToken = (token: string): boolean => token.startsWith(PREFIX)

/** The claims of a token signed with `secret` and not expired at `now`; undefined for anything else. */
export const verify = (secret: string, token: string, now: number): PortalClaims | undefined => {
  if (!token.startsWith(PREFIX) || token.length > TOKEN_MAX_CHARS) return undefined
  const [payload, sig, extra] = token.slice(PREFIX.length).split(".")
  if (payload === undefined || sig === undefined || extra !== undefined) return undefined
  const given = Buffer.from(sig, "base64url")
  const expected = mac(secret, payload)
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined
  let m: Record<string, unknown>
  try {
    m = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as Record<string, unknown>
  } catch {
    return undefined
  }
  if (m["v"] !== VERSION || m["s"] !== SCOPE || typeof m["t"] !== "string" || typeof m["e"] !== "number") return undefined
  return m["e"] > now ? { tenant: m["t"], expiresAt: m["e"] } : undefined
}
