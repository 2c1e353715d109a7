/**
 * Tracing (docs/observability.md): the `Tracing` service, present only when
 * `telemetry.otlp.endpoint` is set. The plain-callback hot paths (the ingest listener, the sink
 * calls) look it up once when they are built and start a span only through `start`, behind a
 * check of `undefined`: with tracing off they cost that one comparison. Effect code uses
 * `tracer` (an Effect `Tracer`) for spans its fibers carry. Sampling is parent-based: a span
 * with a parent follows the parent's sampled flag; a new trace is sampled at `samplingRatio`, and
 * one that is not keeps no context (its hook's attempts send `hookTraceId`'s, flag `00`).
 */
import { Context, Effect, Layer, Option, Tracer } from "effect"
import { sampledByRatio, type TraceContext } from "../domain/trace-context.js"
import type { Telemetry } from "../domain/config-telemetry.js"
import { makeExporter } from "./otlp-export.js"
import { MAX_LINKS, type SpanName } from "./span-names.js"
import { newSpanId, newTraceId, nowNanos, TraceSpan } from "./trace-span.js"

export interface TracingShape {
  /** A span of `s`: a child of `parent` when one is given, else the root of a new trace. */
  readonly start: (s: SpanName, parent: TraceContext | undefined) => TraceSpan
  /**
   * The hot paths' start: the span of `s` when its trace is sampled. Unsampled under a parent, only
   * the context such a span would have (a new span id, flag `00`): no span object, nothing recorded.
   * A new trace not sampled: undefined, no context kept (what it sends later is `hookTraceId`'s).
   */
  readonly open: (s: SpanName, parent: TraceContext | undefined) => TraceSpan | TraceContext | undefined
  /** The same spans for `Effect.withSpan` and `Effect.withParentSpan` (provide it with `Effect.withTracer`). */
  readonly tracer: Tracer.Tracer
  /** Export what is queued now (tests, shutdown). */
  readonly flush: () => Promise<void>
}

export class Tracing extends Context.Service<Tracing, TracingShape>()("ankusa/Tracing") {}

/** The service when tracing is on, else undefined: what a hot path keeps and checks. */
export const tracingOf: Effect.Effect<TracingShape | undefined> = Effect.map(Effect.serviceOption(Tracing), Option.getOrUndefined)

/** Shutdown: what is queued is sent for at most this long. */
export const SHUTDOWN_FLUSH_MS = 3_000

export const make = (t: Telemetry, serviceVersion: string) =>
  Effect.gen(function* () {
    const context = yield* Effect.context<never>()
    const o = t.otlp
    const exporter = yield* Effect.acquireRelease(
      Effect.sync(() =>
        makeExporter({
          url: o.endpoint,
          headers: o.headers,
          batchSize: o.batchSize,
          intervalMs: o.batchIntervalMs,
          maxQueueSpans: o.maxQueueSpans,
          timeoutMs: o.exportTimeoutMs,
          serviceName: t.serviceName,
          serviceVersion
        }, context)
      ),
      (e) =>
        Effect.promise(() => e.flush()).pipe(
          Effect.timeoutOption(Math.min(SHUTDOWN_FLUSH_MS, o.exportTimeoutMs)),
          Effect.ensuring(Effect.sync(e.close))
        )
    )
    const ratio = o.samplingRatio
    const sink = exporter.push

    const spanOf = (name: string, kind: Tracer.SpanKind, parent: { readonly traceId: string; readonly spanId: string; readonly sampled: boolean } | undefined, traceState: string | undefined, startTime: bigint) => {
      if (parent !== undefined) return new TraceSpan(name, kind, parent.traceId, newSpanId(), parent.spanId, parent.sampled, traceState, startTime, sink)
      const traceId = newTraceId()
      return new TraceSpan(name, kind, traceId, newSpanId(), undefined, sampledByRatio(traceId, ratio), undefined, startTime, sink)
    }

    const start = (s: SpanName, parent: TraceContext | undefined): TraceSpan => spanOf(s.name, s.kind, parent, parent?.traceState, nowNanos())

    const open = (s: SpanName, parent: TraceContext | undefined): TraceSpan | TraceContext | undefined => {
      if (parent !== undefined) {
        if (parent.sampled) return new TraceSpan(s.name, s.kind, parent.traceId, newSpanId(), parent.spanId, true, parent.traceState, nowNanos(), sink)
        return { traceId: parent.traceId, spanId: newSpanId(), sampled: false, traceState: parent.traceState }
      }
      const traceId = newTraceId()
      return sampledByRatio(traceId, ratio) ? new TraceSpan(s.name, s.kind, traceId, newSpanId(), undefined, true, undefined, nowNanos(), sink) : undefined
    }

    const tracer = Tracer.make({
      span: (options) => {
        const parent = Option.getOrUndefined(options.parent)
        const span = spanOf(options.name, options.kind, parent, parent instanceof TraceSpan ? parent.traceState : undefined, options.startTime > 0n ? options.startTime : nowNanos())
        if (options.links.length > 0) span.addLinks(options.links)
        return span
      }
    })

    return { start, open, tracer, flush: exporter.flush } satisfies TracingShape
  })

/** The service when `telemetry.otlp.endpoint` is set; nothing otherwise (tracing off). */
export const layer = (t: Telemetry, serviceVersion: string): Layer.Layer<never> =>
  t.otlp.endpoint === "" ? Layer.empty : (Layer.effect(Tracing, make(t, serviceVersion)) as Layer.Layer<never>)

/**
 * A batch's span (a Writer commit, a claim, an outcome commit): in the trace of the first sampled
 * member, linked to the others', at most MAX_LINKS links. None when no member is sampled: such a
 * span would never be exported and its context goes nowhere, so it is not made at all.
 */
export const batchSpan = (tracing: TracingShape, s: SpanName, members: ReadonlyArray<TraceContext | undefined>, startTime?: bigint): TraceSpan | undefined => {
  let parent: TraceContext | undefined
  for (const m of members) if (m !== undefined && m.sampled) {
    parent = m
    break
  }
  if (parent === undefined) return undefined
  const span = tracing.start(s, parent)
  if (startTime !== undefined) span.status = { _tag: "Started", startTime }
  let dropped = 0
  for (const m of members) {
    if (m === undefined || m === parent) continue
    if (span.linked.length < MAX_LINKS) span.link({ traceId: m.traceId, spanId: m.spanId })
    else dropped++
  }
  span.attribute("ankusa.batch.size", members.length)
  if (dropped > 0) span.attribute("ankusa.links_dropped", dropped)
  return span
}
