/**
 * The HTTP server: Node's http server with one request listener that sends
 * `POST /v1/hooks/:source` to the ingest listener (ingest.ts, no fiber per
 * request) and everything else (admin, operations) to the router.
 * Every expected error is answered by `errors.ts`; a defect is logged and
 * answered 500. Bounded (docs/configuration.md): `http.maxConnections`, and
 * the headers and request timeouts (408, then the connection closes).
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Cause, Effect, Layer } from "effect"
import { HttpMiddleware, HttpRouter, type HttpServer, type HttpServerError } from "effect/http"
import { NetAddress } from "effect/net"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { Config } from "../domain/config.js"
import { type EdgeError, internal, NotFound, respond } from "./errors.js"
import type { Gate } from "./gate.js"
import * as Ingest from "./ingest.js"
import * as Metrics from "./metrics.js"
import * as Routes from "./routes.js"

/** How often Node looks for requests past `http.headersTimeoutMs` or `http.requestTimeoutMs`. */
export const CONNECTIONS_CHECK_MS = 1_000

/** Every route but ingest (routes.ts: the admin and operations API, its OpenAPI document, the demo sink). */
export const router = (config: Config) => Routes.layer(config)

/** An edge refusal answered by errors.ts; an unmatched route is `not_found`; anything else fails on. */
const refuse = (e: EdgeError | HttpServerError.HttpServerError) =>
  e._tag !== "HttpServerError"
    ? Effect.succeed(respond(e))
    : e.reason._tag === "RouteNotFound"
      ? Effect.succeed(respond(new NotFound()))
      : Effect.fail(e)

/** The router's request handler, built in the caller's scope. */
export const app = (config: Config) =>
  Effect.map(HttpRouter.toHttpEffect(router(config)), (routed) =>
    routed.pipe(
      Effect.catch(refuse),
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause) : Effect.as(Effect.logError("request failed", cause), internal())
      )
    )
  )

/** The server on `http.host:http.port` (port 0: a free one; read it from `HttpServer.HttpServer`'s address). */
export const layer = (config: Config): Layer.Layer<HttpServer.HttpServer, HttpServerError.ServeError, Gate> =>
  Layer.suspend(() => {
    // Bound by the platform's layer (listen, address, close); the platform never serves on it:
    // the one request listener below does.
    const server = createServer({
      headersTimeout: config.http.headersTimeoutMs,
      requestTimeout: config.http.requestTimeoutMs,
      // Node checks both timeouts on this period (30 s by default): a timeout is late by at most this.
      connectionsCheckingInterval: CONNECTIONS_CHECK_MS
    })
    server.maxConnections = config.http.maxConnections
    const listen = Layer.effectDiscard(
      Effect.gen(function* () {
        yield* Metrics.register
        const ingest = yield* Ingest.listener(config)
        const scope = yield* Effect.scope
        // Nothing here exports spans: the per-request server span (URL parse, attributes) is pure cost.
        const routed = yield* Effect.flatMap(app(config), (httpApp) => NodeHttpServer.makeHandler(httpApp, { scope })).pipe(
          Effect.provideService(HttpMiddleware.TracerDisabledWhen, () => true)
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
    return Layer.provideMerge(listen, NodeHttpServer.layerServer(() => server, { host: config.http.host, port: config.http.port }))
  })

/** `http://host:port` of a bound server (the `{self}` of sink URLs). */
export const originOf = (address: NetAddress.SocketAddress): string =>
  address._tag === "UnixPathAddress" ? "http://localhost" : `http://${NetAddress.formatUrlHost(address.address)}:${address.port}`
