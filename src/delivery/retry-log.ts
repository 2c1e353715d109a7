/**
 * Logs of failed attempts (docs/delivery.md "Logs"): each retry is logged at `info` with its sink,
 * tenant, hook, status (or transport error), the answer's first bytes of body, attempt and next time, up to RETRY_LOG_BURST per sink
 * per RETRY_LOG_WINDOW_MS; past that a sink's retries are counted, and the count is logged as one
 * summary line with the next retry of that sink after the window. A failing sink under load writes
 * a bounded number of lines, not one per row. The windows, one a destination that failed lately
 * (every tenant endpoint is one), are bounded in bytes (RETRY_LOG_MAX_BYTES): at the bound the
 * windows that have ended go (their summaries logged), then the oldest, so a deleted endpoint's
 * window is dropped once it ends and the bound is reached.
 */
import { Effect } from "effect"

/** Retry lines per sink per window before they are summarised. */
export const RETRY_LOG_BURST = 20
/** The window of that bound. */
export const RETRY_LOG_WINDOW_MS = 10_000
/** Bytes the windows hold at most, each counted as `windowBytes`. */
export const RETRY_LOG_MAX_BYTES = 1024 * 1024
/** A window's own fields and its slot, besides its name. */
export const WINDOW_OVERHEAD_BYTES = 64

/** What a window of destination `name` holds: its name at two bytes a character, and its overhead. */
export const windowBytes = (name: string): number => WINDOW_OVERHEAD_BYTES + 2 * name.length

export interface RetryFields {
  readonly sink: string
  readonly tenant: string
  readonly hookId: string
  readonly status: number
  readonly error: string | undefined
  /** A non-2xx answer's first bytes of body (src/delivery/http1.ts `EXCERPT_BYTES`). */
  readonly body?: string | undefined
  readonly attempt: number
  readonly nextAt: number
}

interface Window {
  start: number
  logged: number
  suppressed: number
}

const summary = (sink: string, w: Window) =>
  Effect.logInfo("pipeline: retries not logged one by one", { sink, retries: w.suppressed, windowMs: RETRY_LOG_WINDOW_MS })

export const makeRetryLog = (maxBytes = RETRY_LOG_MAX_BYTES) => {
  // In the order their windows began (a new window moves its destination to the end).
  const windows = new Map<string, Window>()
  let bytes = 0
  const drop = (name: string, w: Window, logs: Array<Effect.Effect<void>>) => {
    if (w.suppressed > 0) logs.push(summary(name, w))
    windows.delete(name)
    bytes -= windowBytes(name)
  }
  /** Room for `size` more bytes: the ended windows go first, then the oldest. */
  const makeRoom = (now: number, size: number, logs: Array<Effect.Effect<void>>) => {
    if (bytes + size <= maxBytes) return
    for (const [name, w] of windows) if (now - w.start >= RETRY_LOG_WINDOW_MS) drop(name, w, logs)
    for (const [name, w] of windows) {
      if (bytes + size <= maxBytes) break
      drop(name, w, logs)
    }
  }
  const log = (now: number, f: RetryFields): Effect.Effect<void> =>
    Effect.suspend(() => {
      let w = windows.get(f.sink)
      const logs: Array<Effect.Effect<void>> = []
      if (w === undefined || now - w.start >= RETRY_LOG_WINDOW_MS) {
        if (w !== undefined) drop(f.sink, w, logs)
        makeRoom(now, windowBytes(f.sink), logs)
        windows.set(f.sink, w = { start: now, logged: 0, suppressed: 0 })
        bytes += windowBytes(f.sink)
      }
      if (w.logged < RETRY_LOG_BURST) {
        w.logged += 1
        logs.push(Effect.logInfo("pipeline: attempt failed; retry scheduled", {
          sink: f.sink,
          tenant: f.tenant,
          hookId: f.hookId,
          ...(f.status === 0 ? { error: f.error ?? "transport" } : { status: f.status }),
          ...(f.body === undefined ? {} : { body: f.body }),
          attempt: f.attempt,
          nextAt: new Date(f.nextAt).toISOString()
        }))
      } else {
        w.suppressed += 1
      }
      return logs.length === 0 ? Effect.void : Effect.all(logs, { discard: true })
    })
  return Object.assign(log, { bytes: () => bytes, windows: () => windows.size })
}
