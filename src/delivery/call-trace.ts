/**
 * A delivery attempt's client span (docs/observability.md): a child of the hook's ingest span
 * (its envelope's `traceparent`), so every attempt, retry and replay joins the hook's trace, and
 * the `traceparent`/`tracestate` lines the call sends so that a receiver that traces joins it too.
 * Only built with tracing on (calls.ts checks first). The attributes name the call, never a
 * header value, the body or the URL's query or user info.
 */
import { Effect } from "effect"
import { tenantOf } from "../domain/envelope.js"
import { formatTraceparent, parseTraceparent } from "../domain/trace-context.js"
import { Spans } from "../observability/span-names.js"
import type { TraceSpan } from "../observability/trace-span.js"
import type { TracingShape } from "../observability/tracing.js"
import type { QueueShape } from "../queue/queue.js"
import type { Job, Sink } from "./destination.js"
import type { Attempt } from "./sink-client.js"

export interface TracedCall {
  /** The header lines of the call's trace context. */
  readonly head: string
  /** The call ended: its status, and the span's end (once its attempt number is known). */
  readonly done: (a: Attempt) => void
}

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
    const span = tracing.start(Spans.attempt, parseTraceparent(env.traceparent, env.tracestate))
    job.span = span
    if (span.sampled) describe(span, sink, job)
    // The attempt number is the delivery row's count so far, read while the call runs (sampled spans only).
    let waits = 1
    const ended = () => --waits === 0 && span.endNow()
    if (span.sampled) {
      waits++
      run(
        queue.deliveryRow(job.claimed.ref, job.claimed.entry.value.size).pipe(
          Effect.tap((row) => Effect.sync(() => span.attribute("ankusa.attempt", row.attempts + 1))),
          Effect.ignore,
          Effect.ensuring(Effect.sync(ended))
        )
      )
    }
    const c = span.context()
    return {
      head: `traceparent: ${formatTraceparent(c)}\r\n${c.traceState === undefined ? "" : `tracestate: ${c.traceState}\r\n`}`,
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
