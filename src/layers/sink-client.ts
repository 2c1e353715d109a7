/**
 * One sink call (product.md "Delivery"; docs/delivery.md "Signatures"): a POST
 * of the hook's original body with its content type, the sink's headers and,
 * when the sink has a secret, Standard Webhooks signature headers; bounded by
 * the sink's timeout. Uses the platform `HttpClient` (undici in production).
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Clock, Effect, Stream } from "effect"
import type { Envelope } from "../domain/envelope.js"
import type { RetrySchedule } from "../domain/retry-schedule.js"
import * as Signature from "../domain/signature.js"

export interface SinkOptions {
  readonly name: string
  /** An http(s) URL, already resolved (the edge replaces `{self}`). */
  readonly url: string
  /** Whole call: connect, request, and the response read to its end. */
  readonly timeoutMs: number
  /** Sent on every delivery; they override the hook's kept headers. */
  readonly headers: Readonly<Record<string, string>>
  /** `whsec_<base64>`: sign deliveries when present. */
  readonly secret?: string | undefined
  /** Calls to this sink in flight at once. */
  readonly concurrency: number
  readonly retry: RetrySchedule
}

export const DEFAULT_SINK_TIMEOUT_MS = 10_000
export const DEFAULT_SINK_CONCURRENCY = 16
export const USER_AGENT = "ankusa/0.1"

export interface Attempt {
  /** HTTP status; 0 for a timeout or a transport error. */
  readonly status: number
  readonly retryAfter: string | undefined
  /** "timeout" | "transport" for status 0. */
  readonly error: string | undefined
  readonly durationMs: number
  /** When the call ended (ms since the epoch). */
  readonly endedAt: number
}

// Kept ingest headers that would be wrong on the outgoing request: framing, our own
// content type and signature (a sink must never see the ingest side's signature).
const NOT_FORWARDED = new Set([
  "host",
  "connection",
  "content-length",
  "content-type",
  "transfer-encoding",
  "keep-alive",
  "upgrade",
  "expect",
  "te",
  "trailer",
  "webhook-id",
  "webhook-timestamp",
  "webhook-signature"
])

/** The request headers of one delivery attempt at `now` (ms). */
export const requestHeaders = (
  sink: SinkOptions,
  key: Uint8Array | undefined,
  env: Envelope,
  now: number
): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(env.headers)) if (!NOT_FORWARDED.has(k.toLowerCase())) out[k.toLowerCase()] = v
  out["user-agent"] = USER_AGENT
  for (const [k, v] of Object.entries(sink.headers)) out[k.toLowerCase()] = v
  const ts = Math.floor(now / 1000)
  // webhook-id always: receivers dedupe redeliveries (at-least-once) by it.
  out["webhook-id"] = env.id
  out["webhook-timestamp"] = String(ts)
  if (key !== undefined) out["webhook-signature"] = Signature.headers(key, env.id, ts, env.body)["webhook-signature"]
  else delete out["webhook-signature"]
  return out
}

/** A sink answer up to this size (by its `content-length`) is read in one buffer; larger or unsized ones are streamed. */
export const MAX_BUFFERED_ANSWER_BYTES = 64 * 1024

/** True when the answer has no body (204, 304) or declares one of at most MAX_BUFFERED_ANSWER_BYTES. */
export const answerIsSmall = (status: number, contentLength: string | undefined): boolean => {
  if (status === 204 || status === 304) return true
  if (contentLength === undefined || !/^\d{1,15}$/.test(contentLength)) return false
  return Number(contentLength) <= MAX_BUFFERED_ANSWER_BYTES
}

/** POST the hook to the sink. Never fails: every failure is an `Attempt` with status 0 or the sink's status. */
export const call = (
  client: HttpClient.HttpClient,
  sink: SinkOptions,
  key: Uint8Array | undefined,
  env: Envelope
): Effect.Effect<Attempt> =>
  Effect.gen(function* () {
    const start = yield* Clock.currentTimeMillis
    const request = HttpClientRequest.post(sink.url).pipe(
      HttpClientRequest.setHeaders(requestHeaders(sink, key, env, start)),
      HttpClientRequest.bodyUint8Array(env.body, env.contentType)
    )
    const result = yield* client.execute(request).pipe(
      // Read the response to its end (discarding it) so the connection is reused: a body known to
      // be empty or small is taken whole (about half the cost of streaming it), any other streamed.
      Effect.tap((res) => (answerIsSmall(res.status, res.headers["content-length"]) ? res.arrayBuffer : Stream.runDrain(res.stream))),
      Effect.map((res) => ({ status: res.status, retryAfter: res.headers["retry-after"], error: undefined })),
      Effect.timeoutFail({ duration: sink.timeoutMs, onTimeout: () => "timeout" as const }),
      Effect.catchAll((e) =>
        Effect.succeed({ status: 0, retryAfter: undefined, error: e === "timeout" ? "timeout" : "transport" })
      )
    )
    const endedAt = yield* Clock.currentTimeMillis
    return { ...result, durationMs: endedAt - start, endedAt }
  })
