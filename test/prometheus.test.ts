/** Prometheus text of Effect metrics: types, labels from tags, histogram buckets, escaping. */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Metric } from "effect"
import { render, scrape } from "../src/observability/prometheus.js"

describe("prometheus", () => {
  it.effect("counters, gauges and histograms render with their tags as labels", () =>
    Effect.gen(function* () {
      const c = Metric.counter("test_prom_requests_total", { description: "Requests\nby kind", incremental: true })
      yield* Metric.update(Metric.withAttributes(c, { kind: 'a"b\\c' }), 3)
      yield* Metric.update(Metric.gauge("test_prom_depth"), 7)
      const h = Metric.histogram("test_prom_seconds", { boundaries: Metric.boundariesFromIterable([0.1, 1]) })
      for (const v of [0.05, 0.5, 5]) yield* Metric.update(Metric.withAttributes(h, { sink: "s" }), v)
      const text = yield* scrape
      expect(text).toContain("# HELP test_prom_requests_total Requests\\nby kind\n# TYPE test_prom_requests_total counter\n")
      expect(text).toContain('test_prom_requests_total{kind="a\\"b\\\\c"} 3\n')
      expect(text).toContain("# TYPE test_prom_depth gauge\ntest_prom_depth 7\n")
      expect(text).toContain(
        [
          "# TYPE test_prom_seconds histogram",
          'test_prom_seconds_bucket{sink="s",le="0.1"} 1',
          'test_prom_seconds_bucket{sink="s",le="1"} 2',
          'test_prom_seconds_bucket{sink="s",le="+Inf"} 3',
          'test_prom_seconds_sum{sink="s"} 5.55',
          'test_prom_seconds_count{sink="s"} 3'
        ].join("\n")
      )
    })
  )

  it("an empty snapshot renders as empty text", () => {
    expect(render([])).toBe("")
  })
})
