/**
 * The ingest request's server span (docs/observability.md), kept on the response object between
 * the request's arrival and its answer. Only called with tracing on (ingest.ts checks first).
 * Its attributes name the request, never a header value or the body.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { parseTraceparent, type TraceContext } from "../domain/trace-context.js"
import { Spans } from "../observability/span-names.js"
import { TraceSpan } from "../observability/trace-span.js"
import type { TracingShape } from "../observability/tracing.js"

const SPAN = Symbol("ankusa.ingest.span")

/**
 * A sampled request's span, or under an unsampled parent its context only (no span object: nothing
 * to record). A new trace not sampled keeps nothing: the hook's attempts send `hookTraceId`'s.
 */
type Traced = ServerResponse & { [SPAN]?: TraceSpan | TraceContext | undefined }

/** Start the request's span, continuing the sender's `traceparent` (and `tracestate`) when it sent a valid one. */
export const startIngest = (tracing: TracingShape, req: IncomingMessage, res: ServerResponse, source: string): void => {
  const h = req.headers
  const tp = h.traceparent
  const parent = tp === undefined ? undefined : parseTraceparent(tp as string, h.tracestate as string | undefined)
  const span = tracing.open(Spans.ingest, parent)
  if (span === undefined) return
  ;(res as Traced)[SPAN] = span
  if (!(span instanceof TraceSpan)) return
  span.attribute("http.request.method", "POST")
  span.attribute("http.route", "/v1/hooks/:source")
  span.attribute("url.path", `/v1/hooks/${encodeURIComponent(source)}`)
  span.attribute("url.scheme", "http")
  span.attribute("ankusa.source", source)
}

/** The context the hook keeps (its envelope) and the Writer's commit span links to. */
export const contextOf = (res: ServerResponse, tenant: string): TraceContext | undefined => {
  const span = (res as Traced)[SPAN]
  if (!(span instanceof TraceSpan)) return span
  span.attribute("ankusa.tenant", tenant)
  return span.context()
}

/** End the request's span with its answer; `hookId` when the hook was accepted (or a duplicate). */
export const endIngest = (res: ServerResponse, status: number, hookId?: string): void => {
  const span = (res as Traced)[SPAN]
  if (span === undefined) return
  ;(res as Traced)[SPAN] = undefined
  if (!(span instanceof TraceSpan)) return
  span.attribute("http.response.status_code", status)
  if (hookId !== undefined) span.attribute("ankusa.hook_id", hookId)
  span.endNow(status >= 500)
}
