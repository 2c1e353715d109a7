/**
 * Operations endpoints (product.md "Operations"; docs/api.md): `/healthz`
 * (the process serves), `/readyz` (store open, migrations done, boot
 * recovery done, not stopping), `/metrics` (Prometheus text of every Effect
 * metric), and the built-in demo sink of the default configuration.
 */
import { Effect, Metric } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Config } from "../../domain/config.js"
import { DEMO_SINK_PATH } from "../../domain/config.js"
import * as Prometheus from "../prometheus.js"
import { Store } from "../store.js"
import { readBody } from "./body.js"
import { json } from "./errors.js"
import { Gate } from "./gate.js"

/** Largest body the demo sink reads: deliveries carry at most `ingest.maxBodyBytes`, whose ceiling is 64 MiB. */
export const DEMO_SINK_MAX_BODY_BYTES = 64 * 1024 * 1024

export const demoReceived = Metric.counter("ankusa_demo_sink_received_total", {
  description: "Requests the built-in demo sink (POST /_demo/sink) received",
  incremental: true
})

const healthz = Effect.succeed(json(200, { status: "ok" }))

const readyz = Effect.gen(function* () {
  const gate = yield* Gate
  const phase = yield* gate.phase
  if (phase !== "ready") return json(503, { ready: false, phase })
  // The store answers a read (a closed or failed store does not).
  const ok = yield* gate.services.pipe(
    Effect.flatMap((services) => Effect.provide(Effect.flatMap(Store, (s) => s.format), services)),
    Effect.as(true),
    Effect.catch(() => Effect.succeed(false))
  )
  return ok ? json(200, { ready: true, phase }) : json(503, { ready: false, phase: "store_unavailable" })
})

const metrics = Effect.map(Prometheus.scrape, (text) =>
  HttpServerResponse.text(text, { contentType: Prometheus.CONTENT_TYPE })
)

/** The routes (the server adds them to its router). */
export const router = (config: Config) => {
  const base = [
    HttpRouter.route("GET", "/healthz", healthz),
    HttpRouter.route("GET", "/readyz", readyz),
    HttpRouter.route("GET", "/metrics", metrics)
  ]
  if (!config.http.demoSink) return base
  // The default demo sink: answers 204 and logs what a real sink would receive.
  const demo = Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const body = yield* readBody(DEMO_SINK_MAX_BODY_BYTES)
    yield* Metric.update(demoReceived, 1)
    yield* Effect.logInfo("demo sink received a delivery").pipe(
      Effect.annotateLogs({
        webhookId: request.headers["webhook-id"] ?? null,
        contentType: request.headers["content-type"] ?? null,
        bytes: body.length
      })
    )
    return HttpServerResponse.empty({ status: 204 })
  })
  return [...base, HttpRouter.route("POST", DEMO_SINK_PATH, demo)]
}
