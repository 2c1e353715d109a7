/**
 * Tenant endpoints (issue 27; docs/api.md "Endpoints"): a tenant's own destinations. Pure: the
 * type, its bounds, the API's input Schemas (create and patch), the stored value's codec, ids and
 * secrets from given random bytes, and the event-type filter `matches`.
 *
 * Stored in the tenants column family under the tenant's ordinal, `<<?e, ord::32, id::64>>`
 * (docs/storage.md); the `Endpoints` service (src/queue/endpoints.ts) is its only writer.
 */
import { Data, Schema } from "effect"
import { asBuffer } from "./bytes.js"
import { onDeadOf, Ordered } from "./config-ordering.js"
import { validName, validValue } from "./http-headers.js"
import { parseSecret, SECRET_PREFIX } from "./signature.js"

export interface Endpoint {
  /** `ep_` + 14 hex digits: the key's 53-bit id (made by the server). */
  readonly id: string
  readonly url: string
  readonly description: string
  /** Exact event types or prefixes (`invoice.*`); empty: every hook, with or without an event type. */
  readonly eventTypes: ReadonlyArray<string>
  /** Added to every delivery; framing headers, `Host` and `webhook-*` are refused. */
  readonly headers: Readonly<Record<string, string>>
  /** `whsec_<base64>`: signs deliveries (Standard Webhooks). */
  readonly secret: string
  /** Deliveries a second at most; 0: unlimited. */
  readonly ratePerSec: number
  /** Calls in flight at most. */
  readonly concurrency: number
  readonly disabled: boolean
  /** Why it is disabled (a person's words, or the gateway's); null when enabled. */
  readonly disabledReason: string | null
  /** Epoch ms. */
  readonly createdAt: number
  readonly updatedAt: number
  /** The tenant's own labels: kept and answered, never read by delivery. */
  readonly metadata?: Readonly<Record<string, string>>
  /** The secret a rotation replaced: it still signs, beside `secret`, until `until` (epoch ms). */
  readonly previousSecret?: { readonly secret: string; readonly until: number } | undefined
  /** It orders hooks by key (docs/delivery.md "Ordered delivery"); absent: it does not. */
  readonly ordered?: { readonly onDead: "skip" | "hold" }
}

export const CONCURRENCY_DEFAULT = 4
export const CONCURRENCY_MAX = 64
export const RATE_MAX = 1_000_000
export const URL_MAX_CHARS = 2_048
export const DESCRIPTION_MAX_CHARS = 512
export const REASON_MAX_CHARS = 256
export const EVENT_TYPES_MAX = 64
export const EVENT_TYPE_MAX_CHARS = 128
export const HEADERS_MAX = 32
export const HEADER_VALUE_MAX_CHARS = 1_024
export const METADATA_MAX = 16
export const METADATA_VALUE_MAX_CHARS = 512
/** Random bytes of a generated secret. */
export const SECRET_BYTES = 24
/** Default and range of `tenants.maxEndpoints`. */
export const MAX_ENDPOINTS_DEFAULT = 50
export const MAX_ENDPOINTS_LIMIT = 10_000

/** A body that fails the Schema: `message` names the field (`headers.host: …`). Answered 422 `invalid_endpoint`. */
export class InvalidEndpoint extends Data.TaggedError("InvalidEndpoint")<{ readonly message: string }> {}
/** A URL the SSRF guard refuses at save (src/domain/ssrf.ts `checkUrl`). Answered 422 `unsafe_url`. */
export class UnsafeUrl extends Data.TaggedError("UnsafeUrl")<{ readonly message: string }> {}

// ---------------------------------------------------------------------------
// Ids and secrets

const ID = /^ep_[0-9a-f]{14}$/

/** The key part of an id; undefined for anything this server did not make. */
export const parseId = (id: string): number | undefined => {
  if (!ID.test(id)) return undefined
  const n = parseInt(id.slice(3), 16)
  return n > 0 && n <= Number.MAX_SAFE_INTEGER ? n : undefined
}

export const formatId = (n: number): string => `ep_${n.toString(16).padStart(14, "0")}`

/** A 53-bit id from 8 random bytes (never 0). */
export const idFrom = (random: Uint8Array): number => {
  const b = asBuffer(random)
  const n = (b.readUInt32BE(0) & 0x1f_ffff) * 0x1_0000_0000 + b.readUInt32BE(4)
  return n === 0 ? 1 : n
}

export const secretFrom = (random: Uint8Array): string => SECRET_PREFIX + asBuffer(random).toString("base64")

// ---------------------------------------------------------------------------
// The event-type filter

const EVENT_TYPE = /^[A-Za-z0-9_:-][A-Za-z0-9_.:-]*$/

/** An exact type (`invoice.paid`) or a prefix (`invoice.*`: every type starting `invoice.`). */
export const validPattern = (p: string): boolean =>
  p.length <= EVENT_TYPE_MAX_CHARS && (p.endsWith(".*") ? EVENT_TYPE.test(p.slice(0, -2)) : EVENT_TYPE.test(p))

/**
 * Whether a hook of `eventType` goes to `endpoint`. Empty `eventTypes` take every hook; a hook
 * with no event type goes only to those (a filter cannot match what is not there).
 */
export const matches = (endpoint: Pick<Endpoint, "eventTypes">, eventType: string | undefined): boolean => {
  const patterns = endpoint.eventTypes
  if (patterns.length === 0) return true
  if (eventType === undefined) return false
  for (const p of patterns) {
    if (p.endsWith(".*") ? eventType.startsWith(p.slice(0, -1)) : p === eventType) return true
  }
  return false
}

// ---------------------------------------------------------------------------
// Headers a tenant may not set

export const HEADER_NAME_MAX_CHARS = 128
/** Framing and hop-by-hop headers, and Host: the client sets them. */
export const RESERVED_HEADERS: ReadonlyArray<string> = [
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "upgrade",
  "te",
  "trailer",
  "proxy-connection",
  "expect"
]

const VALUE_REFUSED = "expected a header value HTTP can send: tab and the characters U+0020 to U+00FF, but U+007F"

/** Why a tenant may not set header `name`, or undefined. */
export const headerRefusal = (name: string): string | undefined => {
  if (name.length > HEADER_NAME_MAX_CHARS || !validName(name)) return `expected an HTTP header name of at most ${HEADER_NAME_MAX_CHARS} characters`
  const n = name.toLowerCase()
  if (RESERVED_HEADERS.includes(n)) return "a framing header or Host, which the gateway sets"
  if (n.startsWith("webhook-")) return "a signature header (webhook-*), which the gateway sets"
  return undefined
}

// ---------------------------------------------------------------------------
// The API's input

const text = (max: number, what: string) =>
  Schema.String.annotate({ message: `expected ${what} of at most ${max} characters` }).check(
    Schema.makeFilter((s: string) => s.length <= max || `expected ${what} of at most ${max} characters`)
  )

const Url = Schema.String.annotate({ message: "expected an absolute http:// or https:// URL" }).check(
  Schema.makeFilter((s: string) => {
    if (s.length > URL_MAX_CHARS) return `expected a URL of at most ${URL_MAX_CHARS} characters`
    try {
      const u = new URL(s)
      if (u.protocol !== "http:" && u.protocol !== "https:") return "expected an absolute http:// or https:// URL"
      return u.username === "" && u.password === "" ? true : "expected a URL without user:password (use headers)"
    } catch {
      return "expected an absolute http:// or https:// URL"
    }
  })
)

const EventTypes = Schema.Array(
  Schema.String.annotate({ message: "expected an event type or a prefix such as invoice.*" }).check(
    Schema.makeFilter((s: string) => validPattern(s) || "expected an event type or a prefix such as invoice.* (A-Z a-z 0-9 _ . : -)")
  )
).annotate({ message: `expected a list of at most ${EVENT_TYPES_MAX} event types` })
  .check(Schema.isMaxLength(EVENT_TYPES_MAX, { message: `expected at most ${EVENT_TYPES_MAX} event types` }))

// The names are checked here rather than by the record's key schema, which would skip a bad key instead of naming it.
const Headers = Schema.Record(Schema.String, text(HEADER_VALUE_MAX_CHARS, "a header value"))
  .annotate({ message: "expected a JSON object of header names and values" })
  .check(
    Schema.makeFilter((h: Readonly<Record<string, string>>) => {
      const issues: Array<Schema.FilterIssue> = []
      for (const [k, v] of Object.entries(h)) {
        const why = headerRefusal(k)
        if (why !== undefined) issues.push({ path: [k], issue: why })
        // The sink client's own rule (http-headers.ts): a value it cannot send would fail every call.
        else if (!validValue(v)) issues.push({ path: [k], issue: VALUE_REFUSED })
      }
      if (Object.keys(h).length > HEADERS_MAX) issues.push({ path: [], issue: `expected at most ${HEADERS_MAX} headers` })
      return issues
    })
  )

const Secret = Schema.String.annotate({ message: "expected whsec_<base64> of at least 16 bytes" }).check(
  Schema.makeFilter((s: string) => {
    const key = parseSecret(s)
    return (key !== undefined && key.length >= 16 && key.length <= 64) || "expected whsec_<base64> of 16 to 64 bytes"
  })
)

const Rate = Schema.Number.annotate({ message: `expected a number from 0 to ${RATE_MAX} (0: unlimited)` }).check(
  Schema.makeFilter((n: number) => (Number.isFinite(n) && n >= 0 && n <= RATE_MAX) || `expected a number from 0 to ${RATE_MAX} (0: unlimited)`)
)

const Concurrency = Schema.Number.annotate({ message: `expected an integer from 1 to ${CONCURRENCY_MAX}` }).check(
  Schema.makeFilter((n: number) => (Number.isInteger(n) && n >= 1 && n <= CONCURRENCY_MAX) || `expected an integer from 1 to ${CONCURRENCY_MAX}`)
)

const Disabled = Schema.Boolean.annotate({ message: "expected true or false" })
const Reason = Schema.NullOr(text(REASON_MAX_CHARS, "a reason")).annotate({ message: `expected a reason of at most ${REASON_MAX_CHARS} characters, or null` })

const Metadata = Schema.Record(Schema.String, text(METADATA_VALUE_MAX_CHARS, "a value"))
  .annotate({ message: "expected a JSON object of names and string values" })
  .check(Schema.makeFilter((m) => Object.keys(m).length <= METADATA_MAX || `expected at most ${METADATA_MAX} entries`))

const fields = {
  metadata: Schema.optionalKey(Metadata),
  description: Schema.optionalKey(text(DESCRIPTION_MAX_CHARS, "a description")),
  eventTypes: Schema.optionalKey(EventTypes),
  headers: Schema.optionalKey(Headers),
  secret: Schema.optionalKey(Secret),
  ratePerSec: Schema.optionalKey(Rate),
  concurrency: Schema.optionalKey(Concurrency),
  disabled: Schema.optionalKey(Disabled),
  disabledReason: Schema.optionalKey(Reason),
  ordered: Schema.optionalKey(Ordered.annotate({ message: `expected true, false or {"onDead": "skip" | "hold"}` }))
}

const OTHER_FIELDS = "metadata, description, eventTypes, headers, secret, ratePerSec, concurrency, disabled, disabledReason, ordered"

/** The stored form of an `ordered` field: absent when it does not order. */
const orderedField = (o: Ordered | undefined) => {
  const onDead = onDeadOf(o)
  return onDead === undefined ? {} : { ordered: { onDead } }
}

/** `POST /v1/tenants/:tenant/endpoints`: `url` and any of the rest. */
export const EndpointCreate = Schema.Struct({
  url: Url.annotateKey({ messageMissingKey: "required" }),
  ...fields
}).annotate({ identifier: "EndpointCreate", message: `expected a JSON object with url and any of ${OTHER_FIELDS}` })
export type EndpointCreate = typeof EndpointCreate.Type

/** `PATCH /v1/tenants/:tenant/endpoints/:id`: any field; the ones left out keep their value. */
export const EndpointPatch = Schema.Struct({ url: Schema.optionalKey(Url), ...fields }).annotate({
  identifier: "EndpointPatch",
  message: `expected a JSON object with any of url, ${OTHER_FIELDS}`
})
export type EndpointPatch = typeof EndpointPatch.Type

/** Strict decodes (an unknown field is an issue). */
export const decodeCreate = Schema.decodeUnknownResult(EndpointCreate, { onExcessProperty: "error" })
export const decodePatch = Schema.decodeUnknownResult(EndpointPatch, { onExcessProperty: "error" })

const normalTypes = (types: ReadonlyArray<string>): ReadonlyArray<string> => [...new Set(types)]

/** A new endpoint from a decoded body; `id`, `secret` (when the body has none) and `now` come from the caller. */
export const create = (input: EndpointCreate, made: { readonly id: number; readonly secret: string; readonly now: number }): Endpoint => {
  const disabled = input.disabled ?? false
  return {
    id: formatId(made.id),
    url: input.url,
    description: input.description ?? "",
    eventTypes: normalTypes(input.eventTypes ?? []),
    headers: { ...input.headers },
    secret: input.secret ?? made.secret,
    ratePerSec: input.ratePerSec ?? 0,
    concurrency: input.concurrency ?? CONCURRENCY_DEFAULT,
    disabled,
    disabledReason: disabled ? (input.disabledReason ?? null) : null,
    createdAt: made.now,
    updatedAt: made.now,
    ...(input.metadata === undefined ? {} : { metadata: { ...input.metadata } }),
    ...orderedField(input.ordered)
  }
}

/** The endpoint with a decoded patch laid over it. Enabling clears the reason. */
export const patch = (e: Endpoint, p: EndpointPatch, now: number): Endpoint => {
  const disabled = p.disabled ?? e.disabled
  const { ordered: _ordered, ...was } = e
  return {
    ...(p.ordered === undefined ? e : { ...was, ...orderedField(p.ordered) }),
    url: p.url ?? e.url,
    description: p.description ?? e.description,
    eventTypes: p.eventTypes === undefined ? e.eventTypes : normalTypes(p.eventTypes),
    headers: p.headers === undefined ? e.headers : { ...p.headers },
    secret: p.secret ?? e.secret,
    ratePerSec: p.ratePerSec ?? e.ratePerSec,
    concurrency: p.concurrency ?? e.concurrency,
    disabled,
    disabledReason: disabled ? (p.disabledReason !== undefined ? p.disabledReason : e.disabledReason) : null,
    updatedAt: now,
    ...(p.metadata === undefined ? {} : { metadata: { ...p.metadata } })
  }
}

// ---------------------------------------------------------------------------
// The stored value: <<1::8, JSON utf8>> of every field but the id (the key holds it).

const VERSION = 1

export const encode = (e: Endpoint): Uint8Array => {
  const { id: _id, ...rest } = e
  return Buffer.concat([Buffer.from([VERSION]), Buffer.from(JSON.stringify(rest), "utf8")])
}

const isStringRecord = (u: unknown): u is Record<string, string> =>
  typeof u === "object" && u !== null && !Array.isArray(u) && Object.values(u).every((v) => typeof v === "string")

/** undefined for bytes this build does not write (another version, bad JSON, a field of the wrong type). */
export const decode = (id: number, v: Uint8Array): Endpoint | undefined => {
  if (v.length < 2 || v[0] !== VERSION) return undefined
  let m: Record<string, unknown>
  try {
    m = JSON.parse(asBuffer(v).toString("utf8", 1)) as Record<string, unknown>
  } catch {
    return undefined
  }
  if (typeof m !== "object" || m === null) return undefined
  const ok =
    typeof m["url"] === "string" &&
    typeof m["description"] === "string" &&
    Array.isArray(m["eventTypes"]) && m["eventTypes"].every((t) => typeof t === "string") &&
    isStringRecord(m["headers"]) &&
    typeof m["secret"] === "string" &&
    typeof m["ratePerSec"] === "number" &&
    typeof m["concurrency"] === "number" &&
    typeof m["disabled"] === "boolean" &&
    (m["disabledReason"] === null || typeof m["disabledReason"] === "string") &&
    typeof m["createdAt"] === "number" &&
    typeof m["updatedAt"] === "number"
  if (!ok) return undefined
  const prev = m["previousSecret"] as { secret?: unknown; until?: unknown } | undefined
  const previousSecret =
    typeof prev === "object" && prev !== null && typeof prev.secret === "string" && typeof prev.until === "number"
      ? { previousSecret: { secret: prev.secret, until: prev.until } }
      : {}
  const metadata = isStringRecord(m["metadata"]) ? { metadata: m["metadata"] } : {}
  const onDead = (m["ordered"] as { onDead?: unknown } | null | undefined)?.onDead
  const ordered: Pick<Endpoint, "ordered"> = onDead === "skip" || onDead === "hold" ? { ordered: { onDead } } : {}
  return {
    ...previousSecret,
    ...metadata,
    ...ordered,
    id: formatId(id),
    url: m["url"] as string,
    description: m["description"] as string,
    eventTypes: m["eventTypes"] as ReadonlyArray<string>,
    headers: m["headers"] as Record<string, string>,
    secret: m["secret"] as string,
    ratePerSec: m["ratePerSec"] as number,
    concurrency: m["concurrency"] as number,
    disabled: m["disabled"] as boolean,
    disabledReason: m["disabledReason"] as string | null,
    createdAt: m["createdAt"] as number,
    updatedAt: m["updatedAt"] as number
  }
}

/** The endpoint as a list answer shows it: everything but the secrets. */
export const withoutSecret = (e: Endpoint): Omit<Endpoint, "secret" | "previousSecret"> => {
  const { secret: _secret, previousSecret: _previous, ...rest } = e
  return rest
}

/** A rotation (issue 28): `secret` signs from `now` on; the one it replaces signs beside it for `overlapMs`. */
export const rotate = (e: Endpoint, secret: string, now: number, overlapMs: number): Endpoint => ({
  ...e,
  secret,
  previousSecret: overlapMs > 0 ? { secret: e.secret, until: now + overlapMs } : undefined,
  updatedAt: now
})
