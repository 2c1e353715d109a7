/**
 * The HTTP server: Node's http server with one request listener that sends
 * `POST /v1/hooks/:source` to the ingest listener (ingest.ts, no fiber per
 * request) and everything else (admin, operations) to the platform router.
 * Every expected error is answered by `errors.ts`; a defect is logged and
 * answered 500.
 */
import { HttpMiddleware, HttpRouter, type HttpServer } from "@effect/platform"
import type { ServeError } from "@effect/platform/HttpServerError"
import { NodeHttpServer } from "@effect/platform-node"
import { Cause, Effect, Layer } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { Config } from "../../domain/config.js"
import * as Admin from "./admin.js"
import { type EdgeError, internal, NotFound, respond } from "./errors.js"
import { Gate } from "./gate.js"
import * as Ingest from "./ingest.js"
import * as Metrics from "./metrics.js"
import * as Ops from "./ops.js"

/** Every route but ingest. */
export const router = (config: Config) => Ops.router(config).pipe(HttpRouter.concat(Admin.router(config)))

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
  Layer.suspend(() => {
    // Bound by the platform's layer (listen, address, close); the platform never serves on it:
    // the one request listener below does.
    const server = createServer()
    const listen = Layer.scopedDiscard(
      Effect.gen(function* () {
        yield* Metrics.register
        const ingest = yield* Ingest.listener(config)
        // Nothing here exports spans: the platform's per-request server span (URL parse, one attribute
        // per header) is pure cost.
        const routed = yield* NodeHttpServer.makeHandler(app(config)).pipe(
          HttpMiddleware.withTracerDisabledWhenEffect(() => true)
        )
        const onRequest = (req: IncomingMessage, res: ServerResponse) => {
          const source = Ingest.sourceOf(req.method, req.url)
          if (source === undefined) routed(req, res)
          else ingest(req, res, source)
        }
        server.on("request", onRequest)
        yield* Effect.addFinalizer(() => Effect.sync(() => server.off("request", onRequest)))
      })
    )
    return Layer.provideMerge(listen, NodeHttpServer.layer(() => server, { host: config.http.host, port: config.http.port }))
  })

/** `http://host:port` of a bound server (the `{self}` of sink URLs). */
export const originOf = (address: HttpServer.Address): string =>
  address._tag === "TcpAddress"
    ? `http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}`
    : `http://localhost`
