/**
 * A delivery attempt's client span (docs/observability.md): a child of the hook's ingest span
 * (its envelope's `traceparent`), so every attempt, retry and replay joins the hook's trace, and
 * the `traceparent`/`tracestate` lines the call sends so that a receiver that traces joins it too.
 * A hook whose envelope keeps no context (a new trace not sampled, or tracing off at ingest) sends
 * `hookTraceId`'s trace, flag `00`, and records nothing.
 * Only built with tracing on (calls.ts checks first). The attributes name the call, never a
 * header value, the body or the URL's query or user info.
 */
import { Effect } from "effect"
import { tenantOf } from "../domain/envelope.js"
import { formatTraceparent, hookTraceId, parseTraceparent, type TraceContext } from "../domain/trace-context.js"
import { Spans } from "../observability/span-names.js"
import { newSpanId, TraceSpan } from "../observability/trace-span.js"
import type { TracingShape } from "../observability/tracing.js"
import type { QueueShape } from "../queue/queue.js"
import type { Job, Sink } from "./destination.js"
import type { Attempt } from "./sink-client.js"

export interface TracedCall {
  /** The header lines of the call's trace context. */
  readonly head: string
  /** A sampled call ended: its status, and the span's end (once its attempt number is known). Absent when unsampled. */
  readonly done?: ((a: Attempt) => void) | undefined
}

/** The header lines of a context: `traceparent`, and `tracestate` when it has one. */
const headOf = (c: TraceContext): string =>
  `traceparent: ${formatTraceparent(c)}\r\n${c.traceState === undefined ? "" : `tracestate: ${c.traceState}\r\n`}`

/** The URL as a span attribute: scheme, host, port and path; no query, no user info. */
export const urlAttribute = (url: string): { readonly full: string; readonly host: string; readonly port: number } => {
  const u = new URL(url)
  const port = u.port === "" ? (u.protocol === "https:" ? 443 : 80) : Number(u.port)
  return { full: `${u.protocol}//${u.host}${u.pathname}`, host: u.hostname, port }
}

export const makeCallTrace = (tracing: TracingShape, queue: QueueShape, run: (e: Effect.Effect<void>) => void) => {
  const urls = new WeakMap<Sink, ReturnType<typeof urlAttribute>>()
  const urlOf = (sink: Sink) => {
    let u = urls.get(sink)
    if (u === undefined) urls.set(sink, (u = urlAttribute(sink.options.url)))
    return u
  }

  const describe = (span: TraceSpan, sink: Sink, job: Job) => {
    const u = urlOf(sink)
    span.attribute("http.request.method", "POST")
    span.attribute("url.full", u.full)
    span.attribute("server.address", u.host)
    span.attribute("server.port", u.port)
    span.attribute("ankusa.destination", job.name)
    span.attribute("ankusa.tenant", tenantOf(job.env))
    span.attribute("ankusa.source", job.env.sourceId)
    span.attribute("ankusa.hook_id", job.env.id)
  }

  return (sink: Sink, job: Job): TracedCall => {
    const env = job.env
    const tp = env.traceparent
    const parent = tp === undefined ? undefined : parseTraceparent(tp, env.tracestate)
    // No context kept: the hook's own trace id, unsampled (no span, nothing recorded).
    if (parent === undefined) return { head: `traceparent: 00-${hookTraceId(env.id)}-${newSpanId()}-00\r\n` }
    const span = tracing.open(Spans.attempt, parent)!
    // Unsampled: only the header that carries the context on (no span, nothing recorded).
    if (!(span instanceof TraceSpan)) return { head: headOf(span) }
    job.span = span
    describe(span, sink, job)
    let waits = 1
    const ended = () => --waits === 0 && span.endNow()
    // The attempt number. A due row of kind 0 is a first attempt (ingest, a replay, an added sink:
    // attempts 0), so it is 1 with no read; a retry's (kind 1) is its delivery row's count so far,
    // read while the call runs. A row recovered at boot after a crash is due as kind 0 whatever
    // its count (deliveries.ts `recover`), so its attempt reads as 1.
    if (job.claimed.entry.value.kind === 0) span.attribute("ankusa.attempt", 1)
    else {
      waits++
      run(
        queue.deliveryRow(job.claimed.ref, job.claimed.entry.value.size).pipe(
          Effect.tap((row) => Effect.sync(() => span.attribute("ankusa.attempt", row.attempts + 1))),
          Effect.ignore,
          Effect.ensuring(Effect.sync(ended))
        )
      )
    }
    return {
      head: headOf(span),
      done: (a) => {
        if (a.status > 0) span.attribute("http.response.status_code", a.status)
        if (a.error !== undefined) span.attribute("error.type", a.error.split(":")[0]!)
        else if (a.status < 200 || a.status >= 300) span.attribute("error.type", String(a.status))
        if (a.status < 200 || a.status >= 300) span.error = true
        ended()
      }
    }
  }
}

/** A delivery's failure handling under its call's span: its log lines carry the trace and span ids. */
export const underSpan = <A, E, R>(job: Job, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  job.span === undefined ? effect : Effect.withParentSpan(effect, job.span)
