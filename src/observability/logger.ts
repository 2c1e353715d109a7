/**
 * Structured logs: one JSON object per line on stdout, filtered at the level
 * of `log.level`.
 */
import { Context, Formatter, Layer, Logger, type LogLevel, References, Tracer } from "effect"
import type { LogLevel as Level } from "../domain/config.js"
import { TraceSpan } from "./trace-span.js"

const LEVELS: Record<Level, LogLevel.LogLevel> = {
  trace: "Trace",
  debug: "Debug",
  info: "Info",
  warning: "Warn",
  error: "Error",
  fatal: "Fatal",
  none: "None"
}

export const toLogLevel = (level: Level): LogLevel.LogLevel => LEVELS[level]

/**
 * One JSON object per line on stdout, with the fields operators already parse
 * (`message`, `logLevel`, `timestamp`, `cause`, `annotations`, `spans`, `fiberId`), and
 * `traceId` and `spanId` when the line is written under a traced span (docs/observability.md).
 */
export const jsonLines = Logger.withConsoleLog(
  Logger.make((options) => {
    const s = Logger.formatStructured.log(options)
    const { message, fields } = splitMessage(s.message)
    const span = Context.getOrUndefined(options.fiber.context, Tracer.ParentSpan)
    return Formatter.formatJson({
      message,
      logLevel: s.level,
      timestamp: s.timestamp,
      cause: s.cause,
      annotations: { ...fields, ...s.annotations },
      spans: s.spans,
      fiberId: s.fiberId,
      ...(span instanceof TraceSpan ? { traceId: span.traceId, spanId: span.spanId } : {})
    })
  })
)

/**
 * `Effect.log("text", { key: value })` as a string message with structured fields: the
 * text parts joined, the object parts merged into the annotations (the line's own
 * annotations win on a clash), so that no log line's message is an array.
 */
export const splitMessage = (message: unknown): { readonly message: string; readonly fields: Record<string, unknown> } => {
  const parts = Array.isArray(message) ? message : [message]
  const text: Array<string> = []
  const fields: Record<string, unknown> = {}
  for (const p of parts) {
    if (typeof p === "object" && p !== null && !Array.isArray(p)) Object.assign(fields, p)
    else text.push(typeof p === "string" ? p : JSON.stringify(p))
  }
  return { message: text.join(" "), fields }
}

/** The only loggers: JSON lines at `level` (in place of the default logger), and span events for tracing. */
export const layer = (level: Level): Layer.Layer<never> =>
  Layer.mergeAll(
    Logger.layer([jsonLines, Logger.tracerLogger]),
    Layer.succeed(References.MinimumLogLevel, toLogLevel(level))
  )

const FROM_EFFECT: Record<LogLevel.LogLevel, Level> = {
  All: "trace",
  Trace: "trace",
  Debug: "debug",
  Info: "info",
  Warn: "warning",
  Error: "error",
  Fatal: "fatal",
  None: "none"
}

/** The configuration's level for one of Effect's (`--log-level`); below trace nothing logs, so All is trace. */
export const fromLogLevel = (level: LogLevel.LogLevel): Level => FROM_EFFECT[level]
