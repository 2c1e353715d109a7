/**
 * Every route of the router (server.ts sends it all but ingest): the admin
 * and operations API (api.ts) with its handlers and middleware, the Svix-compatible routes (svix/), its OpenAPI
 * document at `GET /v1/openapi.json`, the demo sink, and the operator console's files (console.ts).
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Layer } from "effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import type { Config } from "../domain/config.js"
import * as Admin from "./admin.js"
import { Api, OPENAPI_PATH } from "./api.js"
import * as Middleware from "./api-middleware.js"
import * as Auth from "./auth.js"
import * as Console from "./console.js"
import * as ConsoleApi from "./console-api.js"
import * as EndpointOps from "./endpoint-ops.js"
import * as Endpoints from "./endpoints.js"
import * as Erase from "./erase.js"
import * as Limits from "./limits.js"
import * as Ops from "./ops.js"
import * as Portal from "./portal.js"
import * as StoreCheck from "./store-check.js"
import * as Svix from "./svix/layer.js"

export const layer = (config: Config) =>
  Layer.mergeAll(
    HttpApiBuilder.layer(Api, { openapiPath: OPENAPI_PATH }).pipe(
      Layer.provide([
        Admin.layer(config),
        ConsoleApi.layer(config),
        Limits.layer,
        Endpoints.layer(config),
        EndpointOps.layer,
        Portal.layer(config),
        Ops.layer,
        StoreCheck.layer,
        Erase.layer,
        Svix.layer(config)
      ]),
      Layer.provide([Auth.layer(config), Middleware.layerServices, Middleware.layerRequestErrors]),
      // The builder asks for the platform's file and ETag services; no endpoint serves a file.
      Layer.provide(NodeHttpServer.layerHttpServices)
    ),
    Ops.demoSink(config),
    Console.layer(config)
  )
