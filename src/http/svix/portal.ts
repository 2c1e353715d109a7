/**
 * `POST /api/v1/auth/app-portal-access/:app` (docs/svix-compat.md "Consumer portal"): a portal
 * token of ../portal.ts `issue` (global tokens only, audited, `portal.secret`), answered as Svix's
 * `{url, token}`: the URL opens the console's Endpoints page for that tenant alone.
 */
import { Effect } from "effect"
import type { Generation } from "../../config/live.js"
import { readJson } from "../body.js"
import { issue } from "../portal.js"
import { SvixInvalid, SMALL_BODY_MAX_BYTES } from "./answers.js"
import { existing } from "./endpoints.js"

const ttlOf = Effect.flatMap(Effect.orElseSucceed(readJson(SMALL_BODY_MAX_BYTES, "body: expected a JSON object"), () => ({})), (u) => {
  const doc = (typeof u === "object" && u !== null ? u : {}) as Record<string, unknown>
  const refused = Object.keys(doc).find((k) => k !== "expiry" && doc[k] !== null && doc[k] !== undefined && !(k === "readOnly" && doc[k] === false))
  if (refused !== undefined) {
    return Effect.fail(new SvixInvalid({ field: refused.slice(0, 64), message: "Ankusa's portal token has one scope (the tenant's endpoints and dead letters); this cannot be honoured" }))
  }
  const expiry = doc["expiry"]
  if (expiry === undefined || expiry === null) return Effect.succeed(undefined)
  return typeof expiry === "number" && Number.isInteger(expiry) && expiry >= 1
    ? Effect.succeed(expiry)
    : Effect.fail(new SvixInvalid({ field: "expiry", message: "expected a whole number of seconds, at least 1" }))
})

export const portalAccess = (current: () => Generation, segment: string) =>
  Effect.gen(function* () {
    const ttl = yield* ttlOf
    const tenant = yield* existing(segment)
    const t = yield* issue(current, tenant, ttl)
    return { url: t.url, token: t.token }
  })
