/**
 * One sink call (product.md "Delivery"; docs/delivery.md "Signatures"): a POST
 * of the hook's original body with its content type, the sink's headers and,
 * when the sink has a secret, Standard Webhooks signature headers; bounded by
 * the sink's timeout. On `node:http(s)` with one keep-alive Agent per sink
 * (`transport`), one callback chain per call (`start`) and no effect: the
 * platform `HttpClient` cost about ten times the CPU per call (docs/testing.md
 * "Targets missed").
 */
import * as http from "node:http"
import * as https from "node:https"
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
  /** Calls started a second at most, across tenants (token bucket, one second of burst); 0 or absent: unlimited. */
  readonly ratePerSec?: number | undefined
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

/**
 * An idle keep-alive connection is closed after this long (a sink's `Keep-Alive: timeout=N` hint,
 * when it sends one, wins: Node's Agent closes a little before it).
 */
export const IDLE_SOCKET_MS = 4_000

/** A sink's connections: a keep-alive Agent with at most `concurrency` sockets, and its parsed URL. */
export interface Transport {
  readonly agent: http.Agent
  readonly request: typeof http.request
  readonly protocol: string
  readonly hostname: string
  readonly port: string
  readonly path: string
  /** The `host` header Node would send (`new URL`'s host: the port only when not the default). */
  readonly host: string
}

/** The sink's Agent (keep-alive, `concurrency` sockets at most, kept idle up to `concurrency`); `close` it at shutdown. */
export const transport = (sink: SinkOptions): Transport => {
  const u = new URL(sink.url)
  const secure = u.protocol === "https:"
  const o = { keepAlive: true, maxSockets: sink.concurrency, maxFreeSockets: sink.concurrency, timeout: IDLE_SOCKET_MS }
  return {
    agent: secure ? new https.Agent(o) : new http.Agent(o),
    request: secure ? https.request : http.request,
    protocol: u.protocol,
    // `new URL` keeps an IPv6 host in brackets; the socket wants it bare.
    hostname: u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname,
    port: u.port,
    path: `${u.pathname}${u.search}`,
    host: u.host
  }
}

/** Close the sink's sockets (shutdown). */
export const close = (t: Transport): void => t.agent.destroy()

/**
 * POST the hook to the sink and call `done` once with the attempt (never synchronously), unless
 * the call is cut first: the returned function cuts it (destroys the request; `done` is not
 * called). One callback chain per call, no effect inside: the pipeline runs it in a fiber of
 * its own through `Effect.callback`, whose interruption cuts it (src/delivery/calls.ts).
 */
export const start = (
  t: Transport,
  sink: SinkOptions,
  key: Uint8Array | undefined,
  env: Envelope,
  now: () => number,
  done: (a: Attempt) => void
): (() => void) => {
  const started = now()
  let settled = false
  let timer: ReturnType<typeof setTimeout> | undefined
  const end = (status: number, retryAfter: string | undefined, error: string | undefined) => {
    if (settled) return
    settled = true
    clearTimeout(timer)
    const endedAt = now()
    done({ status, retryAfter, error, durationMs: endedAt - started, endedAt })
  }
  let req: http.ClientRequest
  try {
    // A flat [name, value, ...] array: Node writes (and validates) it as it is, without a
    // setHeader per header; it then adds no `host` of its own, so it is the first pair here.
    const headers = ["host", t.host]
    for (const [k, v] of Object.entries(requestHeaders(sink, key, env, started))) {
      // A sink's own `host` wins, as it would with setHeader; its content type and length never do.
      if (k === "host") headers[1] = v
      else if (k !== "content-type" && k !== "content-length") headers.push(k, v)
    }
    headers.push("content-type", env.contentType, "content-length", String(env.body.byteLength))
    req = t.request({ agent: t.agent, method: "POST", protocol: t.protocol, hostname: t.hostname, port: t.port, path: t.path, headers })
  } catch {
    // A header value Node refuses (a control character): the request cannot be sent.
    process.nextTick(() => end(0, undefined, "transport"))
    return () => {
      settled = true
    }
  }
  // The whole call (connect, request, the answer read to its end) within the sink's timeout.
  timer = setTimeout(() => {
    end(0, undefined, "timeout")
    req.destroy()
  }, sink.timeoutMs)
  req.on("error", () => end(0, undefined, "transport"))
  req.on("response", (res) => {
    // Read the answer to its end, discarding it chunk by chunk (nothing is buffered), so the
    // connection goes back to the Agent; an answer closed before its end is a transport error.
    const retryAfter = res.headers["retry-after"]
    const status = res.statusCode ?? 0
    res.on("end", () => end(status, retryAfter, undefined))
    res.on("error", () => end(0, undefined, "transport"))
    res.on("close", () => end(0, undefined, "transport"))
    res.resume()
  })
  req.end(env.body)
  return () => {
    settled = true
    clearTimeout(timer)
    req.destroy()
  }
}
