/**
 * Structured logs: one JSON object per line on stdout (Effect's `jsonLogger`),
 * filtered at the level of `log.level`.
 */
import { Layer, Logger, LogLevel } from "effect"
import type { LogLevel as Level } from "../domain/config.js"

const LEVELS: Record<Level, LogLevel.LogLevel> = {
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warning: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  none: LogLevel.None
}

export const toLogLevel = (level: Level): LogLevel.LogLevel => LEVELS[level]

export const layer = (level: Level): Layer.Layer<never> =>
  Layer.merge(Logger.replace(Logger.defaultLogger, Logger.jsonLogger), Logger.minimumLogLevel(toLogLevel(level)))
