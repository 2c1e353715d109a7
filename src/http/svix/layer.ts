/**
 * The Svix-compatible adapter's handlers (docs/svix-compat.md): its four groups, provided to the
 * API builder beside the `/v1/` groups (routes.ts).
 */
import { Effect, Layer } from "effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { currentOf } from "../../config/live.js"
import type { Config } from "../../domain/config.js"
import { Api } from "../api.js"
import { answer, limitOf, SvixNotFound } from "./answers.js"
import * as Apps from "./apps.js"
import { byEndpoint, byMessage } from "./attempts.js"
import * as Endpoints from "./endpoints.js"
import { create, envelopeOf, messageOut } from "./messages.js"
import { answerOnce } from "./once.js"
import { portalAccess } from "./portal.js"

const messages = (boot: Config) =>
  HttpApiBuilder.group(Api, "svixMessages", (handlers) =>
    handlers
      .handleRaw("create", ({ params }) => answer(202, Effect.flatMap(Endpoints.existing(params.app_id), (t) => create(boot, t))))
      .handle("get", ({ params }) =>
        answer(200, Effect.gen(function* () {
          const env = yield* envelopeOf(yield* Endpoints.existing(params.app_id), params.msg_id)
          return env === undefined ? yield* new SvixNotFound({ message: "no such message of this application" }) : messageOut(env)
        })))
      .handle("byMessage", ({ params, query }) =>
        answer(200, Effect.gen(function* () {
          const limit = yield* limitOf(query.limit)
          return yield* byMessage(yield* Endpoints.existing(params.app_id), params.msg_id, limit, query.iterator)
        })))
      .handle("byEndpoint", ({ params, query }) =>
        answer(200, Effect.gen(function* () {
          const limit = yield* limitOf(query.limit)
          return yield* byEndpoint(yield* Endpoints.existing(params.app_id), params.endpoint_id, limit, query.iterator)
        })))
  )

const auth = (boot: Config) =>
  HttpApiBuilder.group(Api, "svixAuth", (handlers) =>
    Effect.map(currentOf(boot), (current) =>
      handlers.handleRaw("portalAccess", ({ params }) => answerOnce(boot, Endpoints.existing(params.app_id), 200, () => portalAccess(current, params.app_id)))
    )
  )

export const layer = (boot: Config) => Layer.mergeAll(Apps.layer(boot), Endpoints.layer(boot), messages(boot), auth(boot))
