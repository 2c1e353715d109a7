/**
 * Operations endpoints (product.md "Operations"; docs/api.md): `/healthz`
 * (the process serves), `/readyz` (store open, migrations done, boot
 * recovery done, not stopping, free space above the disk reserve), `/metrics` (Prometheus text of every Effect
 * metric), and the built-in demo sink of the default configuration, a plain
 * route outside the API.
 */
import { Context, Duration, Effect, Layer, Metric, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import type { Config } from "../domain/config.js"
import { DEMO_SINK_PATH, demoSinkServed } from "../domain/config.js"
import * as Prometheus from "../observability/prometheus.js"
import { DiskReserve } from "../lifecycle/disk-reserve.js"
import { Tenants } from "../queue/tenants.js"
import { Writer } from "../queue/writer.js"
import { Api, NotReadyYet } from "./api.js"
import { readBody } from "./body.js"
import { Gate } from "./gate.js"

/** `/readyz` answers 503 `store_unavailable` when its read and write probe take longer than this. */
export const READYZ_PROBE_TIMEOUT_S = 2

/** Largest body the demo sink reads: deliveries carry at most `ingest.maxBodyBytes`, whose ceiling is 64 MiB. */
export const DEMO_SINK_MAX_BODY_BYTES = 64 * 1024 * 1024

export const demoReceived = Metric.counter("ankusa_demo_sink_received_total", {
  description: "Requests the built-in demo sink (POST /_demo/sink) received",
  incremental: true
})

export const layer = HttpApiBuilder.group(Api, "ops", (handlers) =>
  Effect.gen(function* () {
    const gate = yield* Gate
    const readyz = Effect.gen(function* () {
      const phase = yield* gate.phase
      if (phase !== "ready") return yield* new NotReadyYet({ ready: false, phase })
      // The store answers a read (a closed or failed store does not): the tenant count, one point read.
      // ...and takes the Writer's writes (a full disk does not; Writer.writable).
      const ok = yield* gate.services.pipe(
        Effect.flatMap((services) =>
          Effect.provide(Effect.andThen(Effect.flatMap(Tenants, (t) => t.count), Effect.flatMap(Writer, (w) => w.writable)), services)
        ),
        // A store that hangs is not ready either.
        Effect.timeout(Duration.seconds(READYZ_PROBE_TIMEOUT_S)),
        Effect.catch(() => Effect.succeed(false))
      )
      if (!ok) return yield* new NotReadyYet({ ready: false, phase: "store_unavailable" })
      // Under the disk reserve ingest is refused (503 disk_reserve): not ready for hooks.
      const services = yield* Effect.option(gate.services)
      const disk = Option.flatMap(services, (s) => Context.getOption(s, DiskReserve))
      if (Option.isSome(disk) && disk.value.refusal() !== undefined) return yield* new NotReadyYet({ ready: false, phase: "disk_reserve" })
      return { ready: true as const, phase }
    })
    return handlers
      .handle("healthz", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () => readyz)
      .handle("metrics", () => Prometheus.scrape)
  })
)

/** The default demo sink: answers 204 and logs what a real sink would receive. */
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

/** The demo sink's route when the configuration asks for it (`http.demoSink`, `demoSinkServed`). */
export const demoSink = (config: Config) =>
  demoSinkServed(config) ? HttpRouter.add("POST", DEMO_SINK_PATH, demo) : Layer.empty
