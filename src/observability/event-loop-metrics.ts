/**
 * Event-loop delay of this process as gauges (product.md "Operations"):
 * Node's `perf_hooks.monitorEventLoopDelay` histogram, read and reset every
 * `EVENT_LOOP_WINDOW_MS`, so `ankusa_event_loop_delay_seconds{quantile}`
 * always describes the last complete window. A stall of the loop is a stall
 * of every request, delivery and tick (TEN-1's "stall on a dirty scheduler"),
 * so this is the number to alert on, and what bench/ingest-bench.ts reads.
 */
import { Duration, Effect, Layer, Metric, Schedule } from "effect"
import { monitorEventLoopDelay } from "node:perf_hooks"

/** Length of one window; the gauges show the last complete one. */
export const EVENT_LOOP_WINDOW_MS = 5_000
/** Sampling period of Node's histogram (its native timer; no JavaScript runs per sample). */
export const EVENT_LOOP_RESOLUTION_MS = 5
/** Quantiles exported (1 is the window's maximum). */
export const EVENT_LOOP_QUANTILES = [0.5, 0.99, 1] as const

export const delay = Metric.gauge("ankusa_event_loop_delay_seconds", {
  description: `Event-loop delay over the last ${EVENT_LOOP_WINDOW_MS / 1000} s window, by quantile (1 = max)`
})

const delayOf = (q: number) => Metric.withAttributes(delay, { quantile: String(q) })

/** The monitor and its window fiber, for the layer's scope. */
export const layer: Layer.Layer<never> = Layer.effectDiscard(
  Effect.gen(function* () {
    const h = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const h = monitorEventLoopDelay({ resolution: EVENT_LOOP_RESOLUTION_MS })
        h.enable()
        return h
      }),
      (h) => Effect.sync(() => h.disable())
    )
    const publish = Effect.suspend(() => {
      // An empty window (no sample yet) reads NaN: publish nothing rather than 0.
      const values = h.count === 0 ? [] : EVENT_LOOP_QUANTILES.map((q) => [q, (q === 1 ? h.max : h.percentile(q * 100)) / 1e9] as const)
      h.reset()
      return Effect.forEach(values, ([q, seconds]) => Metric.update(delayOf(q), seconds), { discard: true })
    })
    // 0 until the first window ends, so the series is there from boot.
    yield* Effect.forEach(EVENT_LOOP_QUANTILES, (q) => Metric.update(delayOf(q), 0), { discard: true })
    yield* publish.pipe(Effect.repeat(Schedule.spaced(Duration.millis(EVENT_LOOP_WINDOW_MS))), Effect.delay(Duration.millis(EVENT_LOOP_WINDOW_MS)), Effect.forkScoped)
  })
)
