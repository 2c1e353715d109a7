/**
 * Logs of failed attempts (docs/delivery.md "Logs"): each retry is logged at `info` with its sink,
 * tenant, hook, status (or transport error), the answer's first bytes of body, attempt and next time, up to RETRY_LOG_BURST per sink
 * per RETRY_LOG_WINDOW_MS; past that a sink's retries are counted, and the count is logged as one
 * summary line with the next retry of that sink after the window. A failing sink under load writes
 * a bounded number of lines, not one per row.
 */
import { Effect } from "effect"

/** Retry lines per sink per window before they are summarised. */
export const RETRY_LOG_BURST = 20
/** The window of that bound. */
export const RETRY_LOG_WINDOW_MS = 10_000

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

export const makeRetryLog = () => {
  const windows = new Map<string, Window>()
  return (now: number, f: RetryFields): Effect.Effect<void> =>
    Effect.suspend(() => {
      let w = windows.get(f.sink)
      const logs: Array<Effect.Effect<void>> = []
      if (w === undefined || now - w.start >= RETRY_LOG_WINDOW_MS) {
        if (w !== undefined && w.suppressed > 0) {
          logs.push(Effect.logInfo("pipeline: retries not logged one by one", { sink: f.sink, retries: w.suppressed, windowMs: RETRY_LOG_WINDOW_MS }))
        }
        // Bounded by the configured sinks (and "unknown"): one entry each.
        windows.set(f.sink, w = { start: now, logged: 0, suppressed: 0 })
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
}
