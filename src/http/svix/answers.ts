/**
 * Svix's answer shapes (docs/svix-compat.md "Errors"): a refusal is `{code, detail}` with the
 * status errors.ts gives the same refusal on the `/v1/` routes, Svix's code where Svix has one
 * (`not_found`, `conflict`) and Ankusa's otherwise; a 422 is `{detail: [{loc, msg, type}]}`.
 * Lists are `{data, iterator, prevIterator, done}`. The one place the adapter maps errors.
 */
import { Data, Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { type EdgeError, refusalOf } from "../errors.js"

/** A field the adapter refuses (one Ankusa cannot honour, or a value out of its rule): 422. */
export class SvixInvalid extends Data.TaggedError("SvixInvalid")<{ readonly field: string; readonly message: string }> {}

/** What Svix answers 409: an application uid taken, an `eventId` already sent. */
export class SvixConflict extends Data.TaggedError("SvixConflict")<{ readonly message: string }> {}

/** A message this application does not have. */
export class SvixNotFound extends Data.TaggedError("SvixNotFound")<{ readonly message: string }> {}

export type SvixError = EdgeError | SvixInvalid | SvixConflict | SvixNotFound

const CODES: Readonly<Record<number, string>> = { 404: "not_found", 409: "conflict" }

export const json = (status: number, body: unknown, headers: Readonly<Record<string, string>> = {}) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers })

/** `query.limit` is a query's; any other field the body's. */
const invalid = (field: string, msg: string) => {
  const parts = field.split(".").filter((p) => p !== "")
  return json(422, { detail: [{ loc: parts[0] === "query" ? parts : ["body", ...parts], msg, type: "value_error" }] })
}

/** `field: why` (the domain's messages) split into its field and its why. */
const fieldOf = (message: string): readonly [string, string] => {
  const at = message.indexOf(": ")
  return at < 0 ? ["", message] : [message.slice(0, at), message.slice(at + 2)]
}

/** Ankusa's names for Svix's fields, in the messages the domain writes. */
const SVIX_NAMES: Readonly<Record<string, string>> = { ratePerSec: "throttleRate", body: "" }

export const refusal = (e: SvixError): HttpServerResponse.HttpServerResponse => {
  switch (e._tag) {
    case "SvixInvalid":
      return invalid(e.field, e.message)
    case "SvixConflict":
      return json(409, { code: "conflict", detail: e.message })
    case "SvixNotFound":
      return json(404, { code: "not_found", detail: e.message })
    case "InvalidEndpoint":
    case "UnsafeUrl": {
      const [field, why] = fieldOf(e.message)
      const head = field.split(".")[0]!
      return invalid(head in SVIX_NAMES ? SVIX_NAMES[head]! + field.slice(head.length) : field, why)
    }
    default: {
      const r = refusalOf(e)
      return json(r.status, { code: CODES[r.status] ?? r.body.error, detail: r.body.message }, r.headers)
    }
  }
}

/** The handler's answer: `status` with the value, or the refusal in Svix's shape. */
export const answer = <A, R>(status: number, effect: Effect.Effect<A, SvixError, R>) =>
  Effect.match(effect, { onFailure: refusal, onSuccess: (a) => (status === 204 ? HttpServerResponse.empty({ status }) : json(status, a)) })

/** Largest body of a rotate, recover or portal access request (they carry a few small fields). */
export const SMALL_BODY_MAX_BYTES = 4 * 1024
/** Largest body of an application create or replace. */
export const APP_BODY_MAX_BYTES = 16 * 1024

/** Largest `limit` of a list. */
export const LIST_LIMIT_MAX = 250
export const LIST_LIMIT_DEFAULT = 50

/** `limit`: 1..250, default 50. */
export const limitOf = (raw: string | undefined): Effect.Effect<number, SvixInvalid> => {
  if (raw === undefined) return Effect.succeed(LIST_LIMIT_DEFAULT)
  const n = Number(raw)
  return Number.isInteger(n) && n >= 1 && n <= LIST_LIMIT_MAX
    ? Effect.succeed(n)
    : Effect.fail(new SvixInvalid({ field: "query.limit", message: `expected an integer from 1 to ${LIST_LIMIT_MAX}` }))
}

/** One page: `iterator` resumes after it; null with `done` on the last. */
export const page = <A>(data: ReadonlyArray<A>, iterator: string | null, prevIterator: string | null = null) => ({
  data,
  iterator,
  prevIterator,
  done: iterator === null
})
