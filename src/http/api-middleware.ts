/**
 * The API's middleware besides the token (auth.ts): `Services` runs an admin
 * request with the services behind the gate, `RequestErrors` answers a
 * request that fails its schemas as errors.ts answers a malformed one.
 */
import { Effect, Layer } from "effect"
import * as HttpApiMiddleware from "effect/http-api/HttpApiMiddleware"
import { RequestErrors, Services } from "./api.js"
import { issueMessage, toApi } from "./api-errors.js"
import { BadRequest } from "./errors.js"
import { Gate } from "./gate.js"

export const layerServices: Layer.Layer<Services, never, Gate> = Layer.effect(
  Services,
  Effect.map(Gate, (gate) => (httpEffect) =>
    Effect.flatMap(Effect.mapError(gate.services, toApi), (services) => Effect.provide(httpEffect, services))
  )
)

export const layerRequestErrors: Layer.Layer<RequestErrors> = HttpApiMiddleware.layerSchemaErrorTransform(
  RequestErrors,
  (e) => {
    switch (e.kind) {
      case "Payload":
        return Effect.fail(toApi(new BadRequest({ code: "bad_body", message: issueMessage(e.cause.issue, "body") })))
      case "Params":
      case "Query":
      case "Headers":
        return Effect.fail(toApi(new BadRequest({ code: "bad_query", message: issueMessage(e.cause.issue, "query", 1) })))
      default:
        // An answer that fails its own schema is a bug: the builder answers 500.
        return Effect.fail(e)
    }
  }
)
