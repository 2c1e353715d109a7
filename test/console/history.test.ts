/**
 * The console's history ring (src/observability/history.ts) and sink figures
 * (src/observability/sink-stats.ts): bounded to an hour of samples, rates from counter deltas,
 * quantiles as Prometheus estimates them. Runs on the TestClock and a registry of its own.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Metric } from "effect"
import { TestClock } from "effect/testing"
import * as History from "../../src/observability/history.js"
import { quantile } from "../../src/observability/sink-stats.js"

const pending = Metric.gauge("ankusa_queue_pending")
const accepted = Metric.counter("ankusa_ingest_requests_total", { incremental: true, attributes: { outcome: "accepted" } })

describe("console history", () => {
  it.effect("the history ring keeps one sample a tick and at most an hour of them", () =>
    Effect.gen(function* () {
      expect(History.capacityOf(15_000)).toBe(241)
      expect(History.capacityOf(1_000)).toBe(History.MAX_SAMPLES)
      expect(History.capacityOf(3_600_000)).toBe(2)
      const h = yield* History.make(15_000)
      // Nothing until the gauge tick has published.
      yield* h.sample
      expect(yield* h.samples).toEqual([])
      for (let i = 0; i < 400; i++) {
        yield* Metric.update(pending, i)
        yield* Metric.update(accepted, 30)
        yield* h.sample
        yield* TestClock.adjust("15 seconds")
      }
      const s = yield* h.samples
      // 400 ticks of 15 s: only the last hour's are kept, oldest first.
      expect(s.length).toBeLessThanOrEqual(241)
      expect(s.length).toBeGreaterThanOrEqual(239)
      expect(s.at(-1)!.pending).toBe(399)
      expect(s.map((x) => x.at)).toEqual([...s.map((x) => x.at)].sort((a, b) => a - b))
      const now = yield* Effect.clockWith((c) => c.currentTimeMillis)
      expect(s[0]!.at).toBeGreaterThan(now - History.HOUR_MS)
      // 30 accepted between samples 15 s apart: 2 a second.
      expect(s.at(-1)!.ingested).toBe(30)
      expect(s.at(-1)!.ingestPerSecond).toBeCloseTo(2, 6)
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it("sink latency quantiles are estimated within their bucket", () => {
    const state = { buckets: [[0.01, 0], [0.02, 50], [0.04, 99], [0.08, 100], [Infinity, 100]] as Array<[number, number]>, count: 100, min: 0.011, max: 0.07, sum: 2 }
    expect(quantile(state, 0.5)).toBeCloseTo(0.02, 6)
    expect(quantile(state, 0.99)).toBeCloseTo(0.04, 6)
    expect(quantile({ ...state, count: 0, buckets: [] }, 0.5)).toBeNull()
  })
})
