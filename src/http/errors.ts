/**
 * Every refusal of the HTTP edge, and the ONE place that maps an error to its
 * status, JSON body (`{"error": <stable code>, "message"}`, the message at most
 * `MESSAGE_MAX` characters) and headers.
 * docs/api.md lists the codes.
 */
import { Data } from "effect"
import { HttpServerResponse } from "effect/http"
import type { AdmissionRefusal } from "../domain/admission.js"
import type { InvalidEndpoint, UnsafeUrl } from "../domain/endpoints.js"
import type { TenantErased, TenantLimit } from "../domain/tenants.js"
import type { EndpointLimit, EndpointNotFound } from "../queue/endpoints.js"
import type { StoreError } from "../store/store.js"
import type { StoreCheckBusy } from "../queue/format/check-service.js"
import type { TenantNotFound } from "../queue/tenants.js"
import type { InvalidIngest, Overloaded, WriterClosed } from "../queue/writer.js"

export class UnknownSource extends Data.TaggedError("UnknownSource")<{ readonly source: string }> {}

export class TooLarge extends Data.TaggedError("TooLarge")<{ readonly limit: number }> {}

/** A malformed request; `code` is the stable error code. */
export class BadRequest extends Data.TaggedError("BadRequest")<{ readonly code: string; readonly message: string }> {}

/** `quarantined`: the request was kept in the quarantine (else it was only refused). */
export class VerificationFailed extends Data.TaggedError("VerificationFailed")<{ readonly reason: string; readonly quarantined: boolean }> {}

/** Missing or unknown bearer token. */
export class Unauthorized extends Data.TaggedError("Unauthorized")<{}> {}

/** A valid token asking for data outside its scope. */
export class Forbidden extends Data.TaggedError("Forbidden")<{ readonly message: string }> {}

/** `POST /v1/tenants/:tenant/portal-token` on a node without `portal.secret`. */
export class PortalOff extends Data.TaggedError("PortalOff")<{}> {}

/** An ingest body arrived slower than `http.minBodyBytesPerSec` past `http.bodyGraceMs`: 408, the connection closed. */
export class BodyTooSlow extends Data.TaggedError("BodyTooSlow")<{ readonly min: number; readonly graceMs: number }> {}

/** No route for the method and path. */
export class NotFound extends Data.TaggedError("NotFound")<{}> {}

/** The node is starting (migrations, recovery) or stopping: nothing is taken. */
export class NotReady extends Data.TaggedError("NotReady")<{ readonly phase: string }> {}

export type EdgeError =
  | UnknownSource
  | TooLarge
  | BodyTooSlow
  | BadRequest
  | VerificationFailed
  | Unauthorized
  | Forbidden
  | NotFound
  | NotReady
  | TenantNotFound
  | TenantLimit
  | TenantErased
  | Overloaded
  | WriterClosed
  | InvalidIngest
  | StoreError
  | StoreCheckBusy
  | AdmissionRefusal
  | InvalidEndpoint
  | UnsafeUrl
  | EndpointLimit
  | EndpointNotFound
  | PortalOff

/** Ingest outcomes as counted by `ankusa_ingest_requests_total{outcome}` (docs/api.md). */
export type Outcome =
  | "accepted"
  | "duplicate"
  | "quarantined"
  | "rejected"
  | "too_large"
  | "too_slow"
  | "tenant_limit"
  | "tenant_erased"
  | "unavailable"
  | "unknown_source"
  | "bad_request"
  | "tenant_rate"
  | "tenant_quota"
  | "disk_reserve"
  | "busy"
  | "standby"

export const OUTCOMES: ReadonlyArray<Outcome> = [
  "accepted",
  "duplicate",
  "quarantined",
  "rejected",
  "too_large",
  "too_slow",
  "tenant_limit",
  "tenant_erased",
  "unavailable",
  "unknown_source",
  "bad_request",
  "tenant_rate",
  "tenant_quota",
  "disk_reserve",
  "busy",
  "standby"
]

/** Retry-After (seconds) of a tenant_limit refusal (TEN-1 §2). */
export const TENANT_LIMIT_RETRY_AFTER_S = 300
/** Retry-After (seconds) when the Writer's queue is full: the backlog clears in milliseconds. */
export const OVERLOADED_RETRY_AFTER_S = 1
/** Retry-After (seconds) when the store fails a write, or the node is starting or stopping. */
export const UNAVAILABLE_RETRY_AFTER_S = 5
/** Retry-After (seconds) from a standby: about one standby poll plus a boot's recovery. */
export const STANDBY_RETRY_AFTER_S = 2

/** Retry-After (seconds) of a tenant_quota refusal: the tenant's queue drains at its sinks' pace. */
export const TENANT_QUOTA_RETRY_AFTER_S = 10
/** Retry-After (seconds) of a disk_reserve refusal: the reserve is read every second, space comes back slowly. */
export const DISK_RESERVE_RETRY_AFTER_S = 10
/** Retry-After (seconds) of a busy refusal: the bodies being read finish in milliseconds to seconds. */
export const BUSY_RETRY_AFTER_S = 1

/** Longest `message` of a refusal: one that would be longer (an echoed value) is cut. */
export const MESSAGE_MAX = 256

export interface Refusal {
  readonly status: number
  readonly body: { readonly error: string; readonly message: string }
  readonly headers: Readonly<Record<string, string>>
  /** How an ingest request refused this way is counted. */
  readonly outcome: Outcome
}

const bounded = (message: string): string => (message.length > MESSAGE_MAX ? `${message.slice(0, MESSAGE_MAX - 1)}…` : message)

const refusal = (
  status: number,
  error: string,
  outcome: Outcome,
  message: string,
  headers: Readonly<Record<string, string>> = {}
): Refusal => ({ status, body: { error, message: bounded(message) }, headers, outcome })

/** The store's own words for a failed write that mean its disk is full (RocksDB's IO error text). */
const NO_SPACE = /No space left on device|ENOSPC/

/** A standby is told so: a proxy or a client sends the request to the shard's active node. */
const notReady = (e: NotReady): Refusal =>
  e.phase === "standby"
    ? refusal(503, "standby", "standby", "this node is a standby; the shard's active node takes writes", { "retry-after": String(STANDBY_RETRY_AFTER_S) })
    : refusal(503, "unavailable", "unavailable", `the node is ${e.phase}`, { "retry-after": String(UNAVAILABLE_RETRY_AFTER_S) })

export const refusalOf = (e: EdgeError): Refusal => {
  switch (e._tag) {
    case "UnknownSource":
      return refusal(404, "unknown_source", "unknown_source", `no source ${JSON.stringify(e.source)}`)
    case "TooLarge":
      return refusal(413, "too_large", "too_large", `the body exceeds ${e.limit} bytes`)
    case "BodyTooSlow":
      return refusal(408, "body_too_slow", "too_slow", `the body arrived slower than ${e.min} bytes a second past its first ${e.graceMs} ms`, { connection: "close" })
    case "BadRequest":
    case "InvalidIngest":
      return e._tag === "BadRequest"
        ? refusal(400, e.code, "bad_request", e.message)
        : refusal(400, "bad_request", "bad_request", `invalid ${e.reason}`)
    case "VerificationFailed":
      return refusal(401, "verification_failed", e.quarantined ? "quarantined" : "rejected", e.reason)
    case "Unauthorized":
      return refusal(401, "unauthorized", "bad_request", "a valid bearer token is required", { "www-authenticate": "Bearer" })
    case "Forbidden":
      return refusal(403, "forbidden", "bad_request", e.message)
    case "NotFound":
      return refusal(404, "not_found", "bad_request", "no such endpoint (GET /v1/openapi.json lists the admin API)")
    case "TenantNotFound":
      return refusal(404, "unknown_tenant", "bad_request", "no such tenant on this node")
    case "EndpointNotFound":
      return refusal(404, "unknown_endpoint", "bad_request", "no such endpoint of this tenant")
    case "InvalidEndpoint":
      return refusal(422, "invalid_endpoint", "bad_request", e.message)
    case "UnsafeUrl":
      return refusal(422, "unsafe_url", "bad_request", e.message)
    case "EndpointLimit":
      return refusal(422, "endpoint_limit", "bad_request", `the tenant has ${e.max} endpoints, its most (tenants.maxEndpoints)`)
    case "PortalOff":
      return refusal(409, "portal_off", "bad_request", "portal tokens are off on this node: portal.secret is not set")
    case "TenantLimit":
      return refusal(503, "tenant_limit", "tenant_limit", `this node serves at most ${e.max} tenants`, {
        "retry-after": String(TENANT_LIMIT_RETRY_AFTER_S)
      })
    case "TenantErased":
      return refusal(410, "tenant_erased", "tenant_erased", "this tenant was erased on this node; an operator must lift the refusal first")
    case "Overloaded":
      return refusal(503, "unavailable", "unavailable", "the write queue is full", { "retry-after": String(OVERLOADED_RETRY_AFTER_S) })
    case "WriterClosed":
      return refusal(503, "unavailable", "unavailable", "the node is shutting down", {
        "retry-after": String(UNAVAILABLE_RETRY_AFTER_S)
      })
    case "StoreCheckBusy":
      return refusal(503, "unavailable", "bad_request", "a store check is already running", { "retry-after": String(UNAVAILABLE_RETRY_AFTER_S) })
    case "NotReady":
      return notReady(e)
    case "TenantRate":
      return refusal(429, "tenant_rate", "tenant_rate", `this tenant may send ${e.perSec} hooks a second`, {
        "retry-after": String(e.retryAfterS)
      })
    case "TenantQuota":
      return refusal(429, "tenant_quota", "tenant_quota", `this tenant's queue holds its quota of ${e.max} bytes`, {
        "retry-after": String(TENANT_QUOTA_RETRY_AFTER_S)
      })
    case "DiskReserve":
      return refusal(503, "disk_reserve", "disk_reserve", `the store's disk has ${e.free} bytes free, under its reserve of ${e.min}`, {
        "retry-after": String(DISK_RESERVE_RETRY_AFTER_S)
      })
    case "Busy":
      // The body is left unread: the connection closes after the answer instead of draining it.
      return refusal(503, "busy", "busy", `request bodies being read are at ${e.max} bytes`, {
        "retry-after": String(BUSY_RETRY_AFTER_S),
        connection: "close"
      })
    case "StoreError":
      return refusal(
        503,
        "unavailable",
        "unavailable",
        NO_SPACE.test(e.message) ? "the store's disk is full; nothing was acknowledged" : "the store cannot take writes",
        { "retry-after": String(UNAVAILABLE_RETRY_AFTER_S) }
      )
  }
}

export const json = (status: number, body: unknown, headers: Readonly<Record<string, string>> = {}) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers })

export const respond = (e: EdgeError): HttpServerResponse.HttpServerResponse => {
  const r = refusalOf(e)
  return json(r.status, r.body, r.headers)
}

/** A defect: logged by the caller, answered without details. */
export const internal = (): HttpServerResponse.HttpServerResponse =>
  json(500, { error: "internal", message: "an internal error (logged); nothing was acknowledged" })
