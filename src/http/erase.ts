/**
 * `DELETE /v1/tenants/:tenant?confirm=<tenant>`, `GET /v1/tenants/:tenant/erase`
 * and `DELETE /v1/tenants/:tenant/erase?confirm=<tenant>` (api.ts `EraseApi`;
 * docs/api.md "Erasing a tenant"): start a tenant's erase, read its progress,
 * lift its refusal. Global tokens only; the service is the node's `Erase`
 * (a server built without it answers 503).
 */
import { Effect, Option } from "effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import * as E from "../domain/erase.js"
import { Erase, type EraseNotFound, type EraseRunning } from "../lifecycle/erase.js"
import { Admin, Api } from "./api.js"
import { toApi } from "./api-errors.js"
import { requireGlobal } from "./auth.js"
import { EraseConflictError, UnknownEraseError } from "./erase-errors.js"
import { BadRequest, NotReady } from "./errors.js"

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

export const answerOf = (j: E.EraseJob) => ({
  id: j.id,
  tenant: j.tenant,
  step: Math.min(j.step, E.DONE),
  step_name: E.stepName(j.step),
  done: E.isDone(j),
  counts: j.counts,
  actor: j.actor,
  started_at: iso(j.startedAt)!,
  updated_at: iso(j.updatedAt)!,
  finished_at: iso(j.finishedAt)
})

export const service = Effect.flatMap(Effect.serviceOption(Erase), (o) =>
  Option.isNone(o) ? Effect.fail(new NotReady({ phase: "serving without the erase service" })) : Effect.succeed(o.value)
)

const confirmed = (tenant: string, confirm: string) =>
  confirm === tenant ? Effect.void : Effect.fail(new BadRequest({ code: "bad_query", message: "confirm: must repeat the tenant id exactly" }))

const notFound = (_: EraseNotFound) => new UnknownEraseError({ error: "unknown_erase", message: "no erase job for this tenant id" })

const eraseErrors = (e: EraseNotFound | EraseRunning) =>
  e._tag === "EraseNotFound"
    ? notFound(e)
    : new EraseConflictError({ error: "erase_running", message: `the erase is at step ${e.step} of 7; lift it once it is done` })

const global = Effect.flatMap(Admin, requireGlobal)

export const layer = HttpApiBuilder.group(Api, "erase", (handlers) =>
  handlers
    .handle("erase", ({ params, query }) =>
      Effect.gen(function* () {
        yield* global
        yield* confirmed(params.tenant, query.confirm)
        const erase = yield* service
        return answerOf(yield* erase.start(params.tenant, (yield* Admin).name))
      }).pipe(Effect.mapError(toApi))
    )
    .handle("status", ({ params }) =>
      Effect.gen(function* () {
        yield* global.pipe(Effect.mapError(toApi))
        const erase = yield* Effect.mapError(service, toApi)
        return answerOf(yield* erase.status(params.tenant).pipe(Effect.mapError((e) => (e._tag === "StoreError" ? toApi(e) : notFound(e)))))
      })
    )
    .handle("lift", ({ params, query }) =>
      Effect.gen(function* () {
        yield* Effect.mapError(Effect.andThen(global, confirmed(params.tenant, query.confirm)), toApi)
        const erase = yield* Effect.mapError(service, toApi)
        const name = (yield* Admin).name
        return answerOf(yield* erase.lift(params.tenant, name).pipe(Effect.mapError((e) => (e._tag === "StoreError" ? toApi(e) : eraseErrors(e)))))
      })
    )
)
