/**
 * One sink call (product.md "Delivery"; docs/delivery.md "Signatures"): a POST
 * of the hook's original body with its content type, the sink's headers and,
 * when the sink has a secret, Standard Webhooks signature headers; bounded by
 * the sink's timeout. On the pipeline's own HTTP/1.1 client (src/delivery/http1.ts)
 * with one keep-alive pool per sink (`transport`), one callback chain per call
 * (`start`) and no effect: the platform `HttpClient` cost about ten times the
 * CPU per call, `node:http`'s Agent about four times (docs/testing.md).
 */
import type { Envelope } from "../domain/envelope.js"
import type { RetrySchedule } from "../domain/retry-schedule.js"
import * as Signature from "../domain/signature.js"
import * as Http1 from "./http1.js"

export interface SinkOptions {
  readonly name: string
  /** An http(s) URL, already resolved (the edge replaces `{self}`). */
  readonly url: string
  /** Whole call: connect, request, and the answer's head (a non-2xx's, with its excerpt). */
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
  /** A tenant endpoint's SSRF guard on each resolved address (http1.ts `Origin.guard`); shared sinks have none. */
  readonly guard?: ((address: string) => string | undefined) | undefined
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
  /** A non-2xx answer's first `EXCERPT_BYTES` of body (UTF-8), for the retry log. */
  readonly body?: string | undefined
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

/** Names the client sets itself, whatever a sink's headers say (its `host` and `user-agent` do win). */
const OURS = new Set(["host", "content-type", "content-length", "webhook-id", "webhook-timestamp", "webhook-signature"])

/**
 * What every call to a sink sends alike, worked out once: the request line, and the sink's
 * headers (lower-cased, checked) after `host`. `invalid` when the sink's own headers hold
 * something HTTP forbids: every call then fails as a transport error, as before it is sent.
 */
interface Fixed {
  readonly line: string
  readonly host: string
  /** `user-agent` and the sink's headers, as header lines. */
  readonly lines: string
  /** Lower-cased names an envelope's kept header may not repeat (the sink's, `user-agent`). */
  readonly taken: ReadonlySet<string>
  readonly invalid: boolean
}

const fixedOf = (sink: SinkOptions, path: string, urlHost: string): Fixed => {
  const own = new Map<string, string>([["user-agent", USER_AGENT]])
  let host = urlHost
  for (const [k, v] of Object.entries(sink.headers)) {
    const name = k.toLowerCase()
    if (name === "host") host = v
    else if (!OURS.has(name)) own.set(name, v)
  }
  let lines = ""
  let invalid = !Http1.validValue(host)
  for (const [name, value] of own) {
    if (!Http1.validName(name) || !Http1.validValue(value)) invalid = true
    lines += `${name}: ${value}\r\n`
  }
  return { line: `POST ${path} HTTP/1.1\r\nhost: ${host}\r\n`, host, lines, taken: new Set(own.keys()), invalid }
}

/** The signing key, or the keys of a rotation's overlap (the new first), or none. */
export type Key = Uint8Array | ReadonlyArray<Uint8Array> | undefined

/** One attempt's request head; undefined when a kept header's name or value is one HTTP forbids. */
const headOf = (f: Fixed, key: Key, env: Envelope, now: number, traceHead: string): string | undefined => {
  let head = f.line
  for (const k in env.headers) {
    const name = k.toLowerCase()
    if (NOT_FORWARDED.has(name) || f.taken.has(name)) continue
    const value = env.headers[k]!
    if (!Http1.validName(name) || !Http1.validValue(value)) return undefined
    head += `${name}: ${value}\r\n`
  }
  const ts = Math.floor(now / 1000)
  // webhook-id always: receivers dedupe redeliveries (at-least-once) by it.
  head += `${f.lines}${traceHead}webhook-id: ${env.id}\r\nwebhook-timestamp: ${ts}\r\n`
  // Several keys (a rotation's overlap): one `v1,` signature each, space-separated, as Standard Webhooks allows.
  if (key instanceof Uint8Array) head += `webhook-signature: v1,${Signature.sign(key, env.id, ts, env.body)}\r\n`
  else if (key !== undefined && key.length > 0) head += `webhook-signature: ${key.map((k) => `v1,${Signature.sign(k, env.id, ts, env.body)}`).join(" ")}\r\n`
  if (!Http1.validValue(env.contentType) || !Http1.validValue(env.id)) return undefined
  return `${head}content-type: ${env.contentType}\r\ncontent-length: ${env.body.byteLength}\r\n\r\n`
}

/**
 * An idle keep-alive connection is closed after this long (a sink's `Keep-Alive: timeout=N` hint,
 * when it sends one, wins: the client closes a second before it, as Node's Agent does).
 */
export const IDLE_SOCKET_MS = 4_000

/** A sink's connections (src/delivery/http1.ts: keep-alive, `concurrency` at most) and its request target. */
export interface Transport {
  readonly pool: Http1.Pool
  /** The request line and the sink's own headers, worked out once. */
  readonly fixed: Fixed
}

/** The sink's connection pool (keep-alive, `concurrency` connections at most); `close` it at shutdown. */
export const transport = (sink: SinkOptions): Transport => {
  const u = new URL(sink.url)
  const secure = u.protocol === "https:"
  return {
    pool: Http1.pool({
      secure,
      // `new URL` keeps an IPv6 host in brackets; the socket wants it bare.
      hostname: u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname,
      port: u.port === "" ? (secure ? 443 : 80) : Number(u.port),
      maxSockets: sink.concurrency,
      idleMs: IDLE_SOCKET_MS,
      guard: sink.guard
    }),
    // `host`: `new URL`'s host (the port only when not the default) unless the sink sets its own.
    fixed: fixedOf(sink, `${u.pathname}${u.search}`, u.host)
  }
}

/** Close the sink's connections (shutdown). */
export const close = (t: Transport): void => t.pool.close()

/**
 * POST the hook to the sink and call `done` once with the attempt (never synchronously), unless
 * the call is cut first: the returned function cuts it (destroys its connection; `done` is not
 * called). One callback chain per call, no effect inside: the pipeline calls it from its sink
 * queue and keeps the cut for its shutdown (src/delivery/calls.ts). `traceHead` is the attempt's
 * `traceparent` (and `tracestate`) header lines when tracing is on (call-trace.ts).
 */
export const start = (
  t: Transport,
  sink: SinkOptions,
  key: Key,
  env: Envelope,
  now: () => number,
  done: (a: Attempt) => void,
  traceHead = ""
): (() => void) => {
  const started = now()
  let settled = false
  let timer: ReturnType<typeof setTimeout> | undefined
  const end = (status: number, retryAfter: string | undefined, error: string | undefined, body?: string) => {
    if (settled) return
    settled = true
    clearTimeout(timer)
    const endedAt = now()
    done({ status, retryAfter, error, body, durationMs: endedAt - started, endedAt })
  }
  const head = t.fixed.invalid ? undefined : headOf(t.fixed, key, env, started, traceHead)
  if (head === undefined) {
    // A header HTTP forbids (a control character in a value): the request cannot be sent.
    process.nextTick(() => end(0, undefined, "transport"))
    return () => {
      settled = true
    }
  }
  // The call (connect, request, the answer's head: a 2xx is told at its head, its body drained
  // after) within the sink's timeout; a non-2xx whose excerpt is still coming ends with its status.
  const cut = t.pool.send(head, env.body, (e) =>
    e._tag === "Answer"
      ? end(e.status, e.retryAfter, undefined, e.body)
      : end(0, undefined, e.reason.startsWith("unsafe address") ? `unsafe_address: ${e.reason}` : "transport")
  )
  timer = setTimeout(() => {
    const partial = cut()
    if (partial !== undefined && partial._tag === "Answer") end(partial.status, partial.retryAfter, undefined, partial.body)
    else end(0, undefined, "timeout")
  }, sink.timeoutMs)
  return () => {
    settled = true
    clearTimeout(timer)
    cut()
  }
}
