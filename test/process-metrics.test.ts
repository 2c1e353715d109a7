/** The process memory gauges: read from `process.memoryUsage()`, rendered in the Prometheus text, on a schedule. */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Metric } from "effect"
import { TestClock } from "effect/testing"
import * as ProcessMetrics from "../src/observability/process-metrics.js"
import { scrape } from "../src/observability/prometheus.js"

const gauge = (m: Metric.Gauge<number>) => Metric.value(m).pipe(Effect.map((s) => s.value))

describe("process metrics", () => {
  it.effect("the memory gauges are process.memoryUsage() and render in the Prometheus text", () =>
    Effect.gen(function* () {
      const m = yield* ProcessMetrics.publish
      expect(m.rss).toBeGreaterThan(0)
      expect(m.heapUsed).toBeGreaterThan(0)
      expect(m.heapUsed).toBeLessThanOrEqual(m.heapTotal)
      expect(yield* gauge(ProcessMetrics.residentMemory)).toBe(m.rss)
      const text = yield* scrape
      expect(text).toContain(`# TYPE ankusa_process_resident_memory_bytes gauge\nankusa_process_resident_memory_bytes ${m.rss}\n`)
      expect(text).toContain(`ankusa_process_heap_bytes{kind="used"} ${m.heapUsed}\n`)
      expect(text).toContain(`ankusa_process_heap_bytes{kind="total"} ${m.heapTotal}\n`)
      expect(text).toContain(`ankusa_process_external_memory_bytes ${m.external}\n`)
    }))

  it.effect("the layer reads at once and again every interval", () =>
    Effect.gen(function* () {
      const intervalMs = 1_000
      yield* Metric.update(ProcessMetrics.residentMemory, -1)
      yield* Layer.build(ProcessMetrics.layer(intervalMs))
      yield* TestClock.adjust(0)
      expect(yield* gauge(ProcessMetrics.residentMemory)).toBeGreaterThan(0)
      yield* Metric.update(ProcessMetrics.residentMemory, -1)
      yield* TestClock.adjust(intervalMs - 1)
      expect(yield* gauge(ProcessMetrics.residentMemory)).toBe(-1)
      yield* TestClock.adjust(1)
      expect(yield* gauge(ProcessMetrics.residentMemory)).toBeGreaterThan(0)
    }))
})
