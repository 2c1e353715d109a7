/**
 * Svix's ids for what Ankusa already names (docs/svix-compat.md): an application is a tenant,
 * its `id` is `app_` and the tenant id's UTF-8 bytes in base64url, so either form names it in a
 * path and no table maps one to the other. Pure.
 */
import { createHash } from "node:crypto"

export const APP_PREFIX = "app_"
/** A tenant id's bound (docs/api.md "Ingest": 1..256 UTF-8 bytes without NUL). */
export const TENANT_MAX_BYTES = 256

export const appIdOf = (tenant: string): string => APP_PREFIX + Buffer.from(tenant, "utf8").toString("base64url")

/** The tenant a path segment names: an `app_` id this module made, else the segment itself (the uid). */
export const tenantOfSegment = (segment: string): string => {
  if (!segment.startsWith(APP_PREFIX)) return segment
  const tenant = Buffer.from(segment.slice(APP_PREFIX.length), "base64url").toString("utf8")
  return tenant !== "" && appIdOf(tenant) === segment ? tenant : segment
}

/** Why `uid` cannot be a tenant id here, or undefined. */
export const uidRefusal = (uid: string): string | undefined => {
  const bytes = Buffer.byteLength(uid, "utf8")
  if (bytes < 1 || bytes > TENANT_MAX_BYTES || uid.includes("\0")) return `expected 1 to ${TENANT_MAX_BYTES} UTF-8 bytes without NUL`
  if (uid.startsWith(APP_PREFIX)) return `a uid may not start with ${APP_PREFIX}, the prefix of application ids`
  return undefined
}

/**
 * The Writer's idempotency key of a message sent without `eventId`: the token's name and the
 * request's `Idempotency-Key`, digested, in a form no `eventId` can take (a colon).
 */
export const requestKeyOf = (tokenName: string, key: string): string =>
  "idem:" + createHash("sha256").update(`${tokenName}\0${key}`, "utf8").digest("base64url")

export const isRequestKey = (key: string | null): boolean => key !== null && key.startsWith("idem:")

/** An attempt's id: its message and its time, which with the endpoint name it in the attempt log. */
export const attemptIdOf = (hookId: string, endpointId: string, at: number): string => `atmpt_${hookId}_${endpointId}_${at}`
