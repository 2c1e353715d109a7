/**
 * Svix's endpoint bodies to the tenant endpoint's inputs and back (docs/svix-compat.md
 * "Endpoints"). A field Ankusa cannot honour is refused, never dropped; the inputs are then
 * decoded by the domain's own schemas (src/domain/endpoints.ts), so every rule is the `/v1/`
 * routes' rule. Pure.
 */
import { Effect, Result } from "effect"
import * as E from "../../domain/endpoints.js"
import { issueMessage } from "../api-errors.js"
import { SvixInvalid } from "./answers.js"

type Doc = Readonly<Record<string, unknown>>

/** Svix's endpoint fields this adapter knows; any other is refused by name. */
const KNOWN = ["url", "description", "eventTypes", "filterTypes", "throttleRate", "rateLimit", "disabled", "metadata", "headers", "secret", "uid", "channels", "version"]

const given = (doc: Doc, key: string): boolean => doc[key] !== undefined && doc[key] !== null

const refuse = (field: string, message: string) => Effect.fail(new SvixInvalid({ field, message }))

/** Refusals common to create, replace and patch: unknown fields and the ones Ankusa has no place for. */
const unsupported = (doc: Doc): Effect.Effect<void, SvixInvalid> => {
  const unknown = Object.keys(doc).find((k) => !KNOWN.includes(k))
  if (unknown !== undefined) return refuse(unknown.slice(0, 64), `not a field Ankusa honours; expected one of ${KNOWN.join(", ")}`)
  if (given(doc, "uid")) return refuse("uid", "Ankusa endpoints have no uid: use the endpoint's id")
  if (Array.isArray(doc["channels"]) ? doc["channels"].length > 0 : given(doc, "channels")) {
    return refuse("channels", "Ankusa routes by event type only; channels cannot be honoured")
  }
  if (given(doc, "version") && doc["version"] !== 1) return refuse("version", "expected 1")
  return Effect.void
}

/** One of two names for one field (`eventTypes`/`filterTypes`, `throttleRate`/`rateLimit`): equal when both are given. */
const either = (doc: Doc, a: string, b: string): Effect.Effect<unknown, SvixInvalid> => {
  if (given(doc, a) && given(doc, b) && JSON.stringify(doc[a]) !== JSON.stringify(doc[b])) return refuse(b, `differs from ${a}; give one`)
  return Effect.succeed(given(doc, a) ? doc[a] : doc[b])
}

/** The Ankusa fields a Svix body names; `full`: a replace, where a field left out takes its default. */
const fieldsOf = (doc: Doc, full: boolean) =>
  Effect.gen(function* () {
    yield* unsupported(doc)
    const types = yield* either(doc, "eventTypes", "filterTypes")
    const rate = yield* either(doc, "throttleRate", "rateLimit")
    const out: Record<string, unknown> = {}
    const set = (key: string, value: unknown, fallback: unknown) => {
      if (value !== undefined && value !== null) out[key] = value
      else if (full || value === null) out[key] = fallback
    }
    if (doc["url"] !== undefined) out["url"] = doc["url"]
    set("description", doc["description"], "")
    set("eventTypes", types, [])
    set("ratePerSec", rate, 0)
    set("disabled", doc["disabled"], false)
    set("metadata", doc["metadata"], {})
    if (given(doc, "headers")) out["headers"] = doc["headers"]
    if (given(doc, "secret")) out["secret"] = doc["secret"]
    return out
  })

const decoded = <A>(r: Result.Result<A, { readonly issue: Parameters<typeof issueMessage>[0] }>) =>
  Result.isSuccess(r) ? Effect.succeed(r.success) : Effect.fail(new E.InvalidEndpoint({ message: issueMessage(r.failure.issue, "body") }))

const objectOf = (u: unknown): Effect.Effect<Doc, SvixInvalid> =>
  typeof u === "object" && u !== null && !Array.isArray(u) ? Effect.succeed(u as Doc) : refuse("", "expected a JSON object")

/** `POST …/endpoint`. */
export const createInput = (u: unknown) =>
  Effect.flatMap(objectOf(u), (doc) => Effect.flatMap(fieldsOf(doc, false), (f) => decoded(E.decodeCreate(f))))

/** `PUT …/endpoint/:id` (every field; the secret is not among Svix's) and `PATCH` (the fields given; null clears). */
export const patchInput = (u: unknown, full: boolean) =>
  Effect.flatMap(objectOf(u), (doc) =>
    full && given(doc, "secret")
      ? refuse("secret", "a replace keeps the secret: rotate it with …/secret/rotate")
      : full && !given(doc, "url")
      ? refuse("url", "required")
      : Effect.flatMap(fieldsOf(doc, full), (f) => decoded(E.decodePatch(f)))
  )

/** A tenant endpoint as the `/v1/` operations answer it (endpoints.ts `view`). */
export type EndpointView = Pick<E.Endpoint, "id" | "url" | "description" | "eventTypes" | "ratePerSec" | "disabled" | "metadata"> & {
  readonly createdAt: string
  readonly updatedAt: string
}

/** The tenant endpoint in Svix's answer form: both names of the renamed fields, never its secret. */
export const endpointOut = (e: EndpointView) => {
  const types = e.eventTypes.length === 0 ? null : e.eventTypes
  const rate = e.ratePerSec === 0 ? null : e.ratePerSec
  return {
    id: e.id,
    url: e.url,
    description: e.description,
    eventTypes: types,
    filterTypes: types,
    throttleRate: rate,
    rateLimit: rate,
    uid: null,
    channels: null,
    disabled: e.disabled,
    metadata: e.metadata ?? {},
    version: 1,
    createdAt: e.createdAt,
    updatedAt: e.updatedAt
  }
}
