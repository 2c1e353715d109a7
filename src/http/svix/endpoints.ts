/**
 * `/api/v1/app/:app/endpoint…` (docs/svix-compat.md "Endpoints"): Svix's endpoint routes on the
 * tenant endpoints, through the same operations as `/v1/tenants/:tenant/endpoints`
 * (../endpoints.ts `operations`, ../endpoint-ops.ts `rotate`): the scope, the SSRF guard, the
 * bound, the audit rows and the rotation overlap are theirs.
 */
import { Effect } from "effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { currentOf } from "../../config/live.js"
import type { Config } from "../../domain/config.js"
import { Tenants } from "../../queue/tenants.js"
import { Admin, Api } from "../api.js"
import { requireTenant } from "../auth.js"
import { readJson } from "../body.js"
import { rotate } from "../endpoint-ops.js"
import { ENDPOINT_BODY_MAX_BYTES } from "../endpoints-api.js"
import { operations } from "../endpoints.js"
import { answer, limitOf, page, SvixInvalid, SMALL_BODY_MAX_BYTES } from "./answers.js"
import { answerOnce } from "./once.js"
import { tenantOfSegment } from "./ids.js"
import { recover } from "./recover.js"
import { createInput, endpointOut, patchInput } from "./translate.js"

const body = readJson(ENDPOINT_BODY_MAX_BYTES, "body: expected a JSON object")

/**
 * The application, in the token's scope (403 before anything tells whether it exists), and
 * existing (Svix answers 404 for an unknown one, where `/v1/` would create the tenant).
 */
export const existing = (segment: string) =>
  Effect.gen(function* () {
    const tenant = tenantOfSegment(segment)
    yield* requireTenant(yield* Admin, tenant)
    yield* Effect.flatMap(Tenants, (t) => t.ord(tenant))
    return tenant
  })

/** A rotation takes no key and no grace period of its own: the node's `endpoints.rotationOverlapMs` applies. */
const rotateBody = Effect.flatMap(Effect.orElseSucceed(readJson(SMALL_BODY_MAX_BYTES, "body: expected a JSON object"), () => ({})), (doc) => {
  const d = (typeof doc === "object" && doc !== null ? doc : {}) as Record<string, unknown>
  const field = ["key", "gracePeriodSeconds"].find((k) => d[k] !== undefined && d[k] !== null)
  return field === undefined
    ? Effect.void
    : Effect.fail(new SvixInvalid({ field, message: field === "key" ? "Ankusa generates the new secret" : "the overlap is endpoints.rotationOverlapMs" }))
})

export const layer = (boot: Config) =>
  HttpApiBuilder.group(Api, "svixEndpoints", (handlers) =>
    Effect.gen(function* () {
      const ops = operations(yield* currentOf(boot))
      return handlers
        .handle("list", ({ params, query }) =>
          answer(200, Effect.gen(function* () {
            const limit = yield* limitOf(query.limit)
            const all = (yield* ops.list(yield* existing(params.app_id))).items
            const after = query.iterator === undefined ? all : all.filter((e) => e.id > query.iterator!)
            const data = after.slice(0, limit)
            return page(data.map(endpointOut), after.length > limit ? data[data.length - 1]!.id : null)
          })))
        .handleRaw("create", ({ params }) =>
          answerOnce(boot, existing(params.app_id), 201, (tenant) =>
            Effect.gen(function* () {
              return endpointOut(yield* ops.create(tenant, yield* createInput(yield* body)))
            })))
        .handle("get", ({ params }) =>
          answer(200, Effect.flatMap(existing(params.app_id), (t) => Effect.map(ops.get(t, params.endpoint_id), endpointOut))))
        .handleRaw("update", ({ params }) =>
          answer(200, Effect.gen(function* () {
            const tenant = yield* existing(params.app_id)
            return endpointOut(yield* ops.update(tenant, params.endpoint_id, yield* patchInput(yield* body, true)))
          })))
        .handleRaw("patch", ({ params }) =>
          answer(200, Effect.gen(function* () {
            const tenant = yield* existing(params.app_id)
            return endpointOut(yield* ops.update(tenant, params.endpoint_id, yield* patchInput(yield* body, false)))
          })))
        .handle("remove", ({ params }) => answer(204, Effect.flatMap(existing(params.app_id), (t) => ops.remove(t, params.endpoint_id))))
        .handle("secret", ({ params }) =>
          answer(200, Effect.flatMap(existing(params.app_id), (t) => Effect.map(ops.secret(t, params.endpoint_id), (s) => ({ key: s.secret })))))
        .handleRaw("rotate", ({ params }) =>
          answerOnce(boot, existing(params.app_id), 204, (tenant) => Effect.andThen(rotateBody, rotate(tenant, params.endpoint_id))))
        .handleRaw("recover", ({ params }) => answerOnce(boot, existing(params.app_id), 202, (t) => recover(boot, t, params.endpoint_id)))
    })
  )
