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

/** One JSON object per line on stdout. */
export const jsonLines = Logger.withConsoleLog(Logger.jsonLogger)

/** The only logger: JSON lines at `level` (also in place of the pretty logger `NodeRuntime.runMain` installs). */
export const layer = (level: Level): Layer.Layer<never> =>
  Layer.mergeAll(
    Logger.replace(Logger.defaultLogger, jsonLines),
    Logger.remove(Logger.prettyLoggerDefault),
    Logger.minimumLogLevel(toLogLevel(level))
  )
