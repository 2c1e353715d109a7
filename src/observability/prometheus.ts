/**
 * Prometheus text exposition (format 0.0.4) of every Effect metric in the
 * process, by `effect/observability`'s PrometheusMetrics: attributes as
 * labels, counters and gauges as themselves, histograms as cumulative
 * `_bucket{le}` plus `_sum`/`_count`, summaries as `{quantile}` plus
 * `_sum`/`_count`, frequencies as a counter with a `key` label.
 */
import { Context, Effect, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"

export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

const ignore = () => {}

/** Renders a metrics snapshot (`Metric.snapshot`) as Effect's formatter renders the registry. */
export const render = (snapshot: ReadonlyArray<Metric.Metric.Snapshot>): string => {
  const registry: Metric.MetricRegistry = new Map(
    snapshot.map((s, i) => [
      String(i),
      { id: s.id, type: s.type, description: s.description, attributes: s.attributes, hooks: { get: () => s.state, update: ignore, modify: ignore } }
    ])
  )
  return PrometheusMetrics.formatUnsafe(Context.make(Metric.MetricRegistry, registry))
}

/** The text of `GET /metrics`: the metric registry of the current context. */
export const scrape: Effect.Effect<string> = PrometheusMetrics.format()
