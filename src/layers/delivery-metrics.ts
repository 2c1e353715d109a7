/**
 * Metrics of the dispatch pipeline and the gauge tick (TEN-1 §4–§5; product.md
 * "Operations"). Effect metrics, exported by the edge's Prometheus endpoint.
 */
import { Metric, MetricBoundaries, MetricLabel } from "effect"

export const activeTenants = Metric.gauge("ankusa_dispatch_active_tenants", {
  description: "Distinct tenants the last dispatch tick visited"
})

export type Outcome = "delivered" | "retried" | "dead" | "dropped"

/** sink: the sink name ("unknown" for an orphan whose envelope is gone); outcome: `Outcome`. */
export const outcomes = Metric.counter("ankusa_delivery_outcomes_total", {
  description: "Delivery attempts by sink and outcome (delivered, retried, dead, dropped)",
  incremental: true
})

export const outcome = (sink: string, o: Outcome) => Metric.tagged(Metric.tagged(outcomes, "sink", sink), "outcome", o)

/** 5 ms to about 41 s, doubling. */
export const latency = Metric.histogram(
  "ankusa_delivery_duration_seconds",
  MetricBoundaries.exponential({ start: 0.005, factor: 2, count: 14 }),
  "Sink call duration (request to end of response, or to the failure), by sink"
)

export const latencyOf = (sink: string) => Metric.tagged(latency, "sink", sink)

/**
 * Record one call's duration (seconds) in `latencyOf(sink)`, for the per-delivery path. A tagged
 * metric builds a new label array on every update, which misses Effect's per-array hook cache and
 * looks the series up in the metric registry (hashing its key) each time; this passes one array
 * built here, so the lookup happens once. Ignores fiber metric labels (the pipeline sets none).
 */
export const latencyRecorder = (sink: string): ((seconds: number) => void) => {
  const labels = [MetricLabel.make("sink", sink)]
  return (seconds) => latency.unsafeUpdate(seconds, labels)
}

/** Add `n` to `outcome(sink, o)` the same way: one label array per recorder. */
export const outcomeRecorder = (sink: string, o: Outcome): ((n: number) => void) => {
  const labels = [MetricLabel.make("sink", sink), MetricLabel.make("outcome", o)]
  return (n) => outcomes.unsafeUpdate(n, labels)
}

// ---------------------------------------------------------------------------
// The gauge tick (src/layers/gauges.ts)

/** The six counters of ord 0, one gauge each (TEN-1 §4). */
export const queue = {
  pending: Metric.gauge("ankusa_queue_pending", { description: "First-attempt rows waiting (due, kind 0)" }),
  scheduled: Metric.gauge("ankusa_queue_scheduled", { description: "Retry rows waiting (due, kind 1)" }),
  inflight: Metric.gauge("ankusa_queue_inflight", { description: "Rows claimed by the pipeline" }),
  dead: Metric.gauge("ankusa_queue_dead", { description: "Rows in the dead-letter queue" }),
  bytes: Metric.gauge("ankusa_queue_bytes", { description: "Bytes of every delivery row that exists (due, inflight, dead)" }),
  archive_pending: Metric.gauge("ankusa_queue_archive_pending", { description: "Archive obligations not yet settled" })
} as const

export const oldestDueAge = Metric.gauge("ankusa_queue_oldest_due_age_seconds", {
  description: "Age of the oldest due row (0 when nothing is due), exact to a second"
})

export const tenants = Metric.gauge("ankusa_tenants", { description: "Tenant ordinals ever allocated (m:next_ord - 1)" })

// `ankusa_tenant_pending{tenant}` is not an Effect metric: see src/layers/top-tenants-metric.ts.
