/**
 * `PUT /v1/tenants/:tenant/limits` (api.ts `LimitsApi`; docs/api.md): a
 * global token sets a tenant's limits override. The override and its audit
 * row commit in one synced batch (src/queue/limits.ts); the next dispatch
 * tick applies it. `GET /v1/tenants/:tenant` shows the same fields
 * (`limitsFields`, admin.ts).
 */
import { Effect, Result } from "effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { decodeOverrideInput } from "../domain/limits.js"
import { Audit } from "../lifecycle/audit.js"
import { Limits, type TenantLimitsView } from "../queue/limits.js"
import { Tenants } from "../queue/tenants.js"
import { Admin, Api, LIMITS_BODY_MAX_BYTES } from "./api.js"
import { type AdminError, issueMessage, toApi } from "./api-errors.js"
import { requireGlobal } from "./auth.js"
import { readJson } from "./body.js"
import { BadRequest } from "./errors.js"

/** The `limits` and `limits_override` fields of an answer. */
export const limitsFields = (v: TenantLimitsView) => ({ limits: v.effective, limits_override: v.override })

/** The body, read under its bound (413 past it) and decoded strictly: an unknown field or a value out of range is `bad_body`. */
const overrideBody = Effect.flatMap(readJson(LIMITS_BODY_MAX_BYTES, "body: expected a JSON object"), (doc) => {
  const decoded = decodeOverrideInput(doc)
  return Result.isSuccess(decoded)
    ? Effect.succeed(decoded.success)
    : Effect.fail(new BadRequest({ code: "bad_body", message: issueMessage(decoded.failure.issue, "body") }))
})

// Schema first (400), then the scope (403), then the tenant (404): the order docs/api.md gives.
const setLimits = (name: string) =>
  Effect.gen(function* () {
    const p = yield* Admin
    const override = yield* overrideBody
    yield* requireGlobal(p)
    const ord = yield* Effect.flatMap(Tenants, (t) => t.ord(name))
    const auditRow = yield* Effect.flatMap(Audit, (a) => a.stage({ actor: p.name, tenants: [name], action: "limits.set", params: { override } }))
    const limits = yield* Limits
    yield* limits.set(ord, override, auditRow, name)
    return { tenant: name, ...limitsFields(yield* limits.get(ord)) }
  })

const answer = <A, E extends AdminError, R>(effect: Effect.Effect<A, E, R>) => Effect.mapError(effect, toApi)

export const layer = HttpApiBuilder.group(Api, "limits", (handlers) =>
  // Raw: the body is read by body.ts under its bound, not buffered whole by the builder.
  handlers.handleRaw("set", ({ params }) => answer(setLimits(params.tenant)))
)
