/**
 * The HTTP server: ingest, admin and operations routes on the platform
 * router, served by Node's http server (NodeHttpServer). Every expected error
 * is answered by `errors.ts`; a defect is logged and answered 500.
 */
import { HttpMiddleware, HttpRouter, HttpServer } from "@effect/platform"
import type { ServeError } from "@effect/platform/HttpServerError"
import { NodeHttpServer } from "@effect/platform-node"
import { Cause, Effect, Layer } from "effect"
import { createServer } from "node:http"
import type { Config } from "../../domain/config.js"
import * as Admin from "./admin.js"
import { type EdgeError, internal, NotFound, respond } from "./errors.js"
import type { Gate } from "./gate.js"
import * as Ingest from "./ingest.js"
import * as Metrics from "./metrics.js"
import * as Ops from "./ops.js"

export const router = (config: Config) =>
  Ops.router(config).pipe(
    HttpRouter.post("/v1/hooks/:source", Ingest.handler(config)),
    HttpRouter.concat(Admin.router(config))
  )

export const app = (config: Config) =>
  router(config).pipe(
    Effect.catchTag("RouteNotFound", () => Effect.fail(new NotFound())),
    Effect.catchAll((e) => Effect.succeed(respond(e as EdgeError))),
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.failCause(cause)
        : Effect.as(Effect.logError("request failed", cause), internal())
    )
  )

/** The server on `http.host:http.port` (port 0: a free one; read it from `HttpServer.HttpServer`'s address). */
export const layer = (config: Config): Layer.Layer<HttpServer.HttpServer, ServeError, Gate> =>
  HttpServer.serve(app(config)).pipe(
    // Nothing here exports spans: the platform's per-request server span (URL parse, one attribute per
    // header) was pure cost on the ingest path.
    HttpMiddleware.withTracerDisabledWhen(() => true),
    Layer.provideMerge(
      Layer.effectDiscard(Metrics.register).pipe(
        Layer.provideMerge(NodeHttpServer.layer(createServer, { host: config.http.host, port: config.http.port }))
      )
    )
  )

/** `http://host:port` of a bound server (the `{self}` of sink URLs). */
export const originOf = (address: HttpServer.Address): string =>
  address._tag === "TcpAddress"
    ? `http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}`
    : `http://localhost`
