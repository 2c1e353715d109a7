/**
 * `POST /v1/hooks/:source` (product.md "Ingest"; docs/api.md): the body as
 * bytes under the size limit, the tenant from the source (fixed or a header),
 * Standard Webhooks verification (failures quarantined and answered 401),
 * the idempotency key, and the Writer's synced commit before `202 {id, seq}`.
 * Every answer is counted by outcome with its latency.
 */
import { HttpRouter, HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import { Cause, Clock, Effect, Exit, Option } from "effect"
import type { Config, Source } from "../../domain/config.js"
import * as Dedupe from "../../domain/dedupe.js"
import * as Signature from "../../domain/signature.js"
import { validTenantId } from "../../domain/tenants.js"
import { Quarantine } from "../quarantine.js"
import { Writer } from "../writer.js"
import { readBody } from "./body.js"
import { BadRequest, type EdgeError, internal, json, type Outcome, refusalOf, UnknownSource, VerificationFailed } from "./errors.js"
import { Gate } from "./gate.js"
import * as Metrics from "./metrics.js"

/** Header names that look like credentials meant for the gateway: never kept, never forwarded. */
const CREDENTIAL = /auth|token|secret|passw|api-?key|cookie|session/

/** Request headers kept with the hook and forwarded on delivery: event metadata, not transport or credentials. */
export const keptHeaders = (headers: Readonly<Record<string, string>>, tenantHeader: string | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    const n = name.toLowerCase()
    if (n === tenantHeader || CREDENTIAL.test(n)) continue
    // Custom event headers (X-GitHub-Event, X-Shopify-Topic, …) and the sender's user agent;
    // proxy headers describe our network, not the event.
    if ((n.startsWith("x-") && !n.startsWith("x-forwarded-") && n !== "x-real-ip") || n === "user-agent") out[n] = value
  }
  return out
}

/** Headers a quarantined request is kept with: everything but credentials. */
const quarantineHeaders = (headers: Readonly<Record<string, string>>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    const n = name.toLowerCase()
    if (n !== "authorization" && n !== "proxy-authorization" && n !== "cookie") out[n] = value
  }
  return out
}

const tenantOf = (source: Source, headers: Readonly<Record<string, string>>): Effect.Effect<string, BadRequest> => {
  if (typeof source.tenant === "string") return Effect.succeed(source.tenant)
  const name = source.tenant.header
  const raw = headers[name]
  if (raw === undefined || raw.trim() === "") {
    return Effect.fail(new BadRequest({ code: "missing_tenant", message: `source ${source.id} takes the tenant from header ${name}` }))
  }
  const tenant = raw.trim()
  return validTenantId(tenant)
    ? Effect.succeed(tenant)
    : Effect.fail(new BadRequest({ code: "invalid_tenant", message: `header ${name}: expected 1 to 256 UTF-8 bytes without NUL` }))
}

const idempotencyKeyOf = (headers: Readonly<Record<string, string>>): Effect.Effect<string | null, BadRequest> => {
  const key = headers["webhook-id"] ?? headers["idempotency-key"]
  if (key === undefined) return Effect.succeed(null)
  return Dedupe.validKey(key)
    ? Effect.succeed(key)
    : Effect.fail(new BadRequest({ code: "invalid_idempotency_key", message: `expected 1 to ${Dedupe.MAX_KEY_BYTES} bytes` }))
}

export const handler = (config: Config) => {
  const sources = new Map(config.sources.map((s) => [s.id, s]))
  const keys = new Map(
    config.sources.flatMap((s) =>
      s.verification === "none" ? [] : [[s.id, Signature.parseSecret(s.verification.secret)!] as const]
    )
  )

  const accept = Effect.gen(function* () {
    const params = yield* HttpRouter.params
    const sourceId = params["source"] ?? ""
    const source = sources.get(sourceId)
    if (source === undefined) return yield* Effect.fail(new UnknownSource({ source: sourceId }))
    const services = yield* Effect.flatMap(Gate, (g) => g.services)
    const request = yield* HttpServerRequest.HttpServerRequest
    const headers = request.headers
    const body = yield* readBody(config.ingest.maxBodyBytes)
    const tenant = yield* tenantOf(source, headers)

    if (source.verification !== "none") {
      const now = yield* Clock.currentTimeMillis
      const v = Signature.verify({
        header: (name) => headers[name],
        body,
        keys: [keys.get(source.id)!],
        now,
        toleranceSeconds: source.verification.toleranceSeconds
      })
      if (v._tag === "Invalid") {
        // Kept for an operator to inspect, never delivered, no tenant ordinal (TEN-1 §2).
        const kept = yield* Effect.flatMap(Quarantine, (q) =>
          q.put({ tenant, source: source.id, reason: v.reason, headers: quarantineHeaders(headers), body })
        ).pipe(
          Effect.provide(services),
          Effect.map((r) => r !== undefined),
          Effect.catchAll((e) => Effect.as(Effect.logWarning("quarantine write failed", e), false))
        )
        return yield* Effect.fail(new VerificationFailed({ reason: v.reason, quarantined: kept }))
      }
    }

    const idempotencyKey = yield* idempotencyKeyOf(headers)
    const result = yield* Effect.flatMap(Writer, (w) =>
      w.submit({
        tenantId: tenant,
        sourceId: source.id,
        sinks: source.routes,
        body,
        contentType: headers["content-type"] ?? "application/octet-stream",
        headers: keptHeaders(headers, typeof source.tenant === "string" ? undefined : source.tenant.header),
        idempotencyKey,
        archive: config.archive.enabled
      })
    ).pipe(Effect.provide(services))
    return result
  })

  return Effect.gen(function* () {
    const started = performance.now()
    const exit = yield* Effect.exit(accept)
    let outcome: Outcome
    let response: HttpServerResponse.HttpServerResponse
    if (Exit.isSuccess(exit)) {
      const r = exit.value
      outcome = r.duplicate ? "duplicate" : "accepted"
      response = r.duplicate ? json(200, { id: r.id, seq: r.seq, duplicate: true }) : json(202, { id: r.id, seq: r.seq })
    } else {
      const failure = Cause.failureOption(exit.cause)
      if (Option.isSome(failure)) {
        const refusal = refusalOf(failure.value as EdgeError)
        outcome = refusal.outcome
        response = json(refusal.status, refusal.body, refusal.headers)
        if (failure.value._tag === "StoreError") yield* Effect.logWarning("ingest refused: the store failed the write", failure.value)
      } else if (Cause.isInterruptedOnly(exit.cause)) {
        return yield* Effect.interrupt
      } else {
        // A defect: nothing was acknowledged; the client retries.
        yield* Effect.logError("ingest failed", exit.cause)
        outcome = "unavailable"
        response = internal()
      }
    }
    yield* Metrics.record(outcome, (performance.now() - started) / 1000)
    return response
  })
}
