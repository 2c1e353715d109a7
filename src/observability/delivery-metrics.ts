/**
 * Metrics of the dispatch pipeline and the gauge tick (TEN-1 §4–§5; product.md
 * "Operations"). Effect metrics, exported by the edge's Prometheus endpoint.
 */
import { type Context, Metric } from "effect"

export const activeTenants = Metric.gauge("ankusa_dispatch_active_tenants", {
  description: "Distinct tenants the last dispatch tick visited"
})

export type Outcome = "delivered" | "retried" | "dead" | "dropped"

const outcomesName = "ankusa_delivery_outcomes_total"
const outcomesOptions = {
  description: "Delivery attempts by sink and outcome (delivered, retried, dead, dropped)",
  incremental: true
} as const

/** sink: the sink name ("unknown" for an orphan whose envelope is gone); outcome: `Outcome`. */
export const outcomes = Metric.counter(outcomesName, outcomesOptions)

export const outcome = (sink: string, o: Outcome) => Metric.withAttributes(outcomes, { sink, outcome: o })

const latencyName = "ankusa_delivery_duration_seconds"
const latencyOptions = {
  description: "Sink call duration (request to end of response, or to the failure), by sink",
  /** 5 ms to about 41 s, doubling. */
  boundaries: Metric.exponentialBoundaries({ start: 0.005, factor: 2, count: 14 })
} as const

export const latency = Metric.histogram(latencyName, latencyOptions)

export const latencyOf = (sink: string) => Metric.withAttributes(latency, { sink })

/**
 * Record one call's duration (seconds) in `latencyOf(sink)`, for the per-delivery path, in the
 * metric registry of `context` (the pipeline's). A metric of its own with the attributes fixed,
 * rather than `latencyOf`: a metric caches its series key for one attribute set, so one shared
 * metric updated for several sinks in turn would rebuild the key on every update. Same series.
 */
export const latencyRecorder = (sink: string, context: Context.Context<never>): ((seconds: number) => void) => {
  const series = Metric.histogram(latencyName, { ...latencyOptions, attributes: { sink } })
  return (seconds) => series.updateUnsafe(seconds, context)
}

/** Add `n` to `outcome(sink, o)` the same way: one metric per recorder. */
export const outcomeRecorder = (sink: string, o: Outcome, context: Context.Context<never>): ((n: number) => void) => {
  const series = Metric.counter(outcomesName, { ...outcomesOptions, attributes: { sink, outcome: o } })
  return (n) => series.updateUnsafe(n, context)
}

// ---------------------------------------------------------------------------
// Fair dispatch (TEN-3, docs/delivery.md "Fair dispatch")

const delayName = "ankusa_dispatch_delay_seconds"
const delayOptions = {
  description: "Delay from a row's due time to the start of its attempt",
  /** 1 ms to about 9 h, quadrupling. */
  boundaries: Metric.exponentialBoundaries({ start: 0.001, factor: 4, count: 13 })
} as const

/** Record the dispatch delay (seconds) of one attempt in the registry of `context`. */
export const delayRecorder = (context: Context.Context<never>): ((seconds: number) => void) => {
  const series = Metric.histogram(delayName, delayOptions)
  return (seconds) => series.updateUnsafe(seconds, context)
}

/** Breaker trips of every destination (sinks and tenant endpoints), present from boot at 0. */
export const breakerTripsRecorder = (context: Context.Context<never>): (() => void) => {
  const series = Metric.counter("ankusa_breaker_trips_total", { description: "Times a destination's circuit breaker opened (a failed probe included)", incremental: true })
  series.updateUnsafe(0, context)
  return () => series.updateUnsafe(1, context)
}

export const BREAKER_STATE = "ankusa_breaker_state"
export const BREAKER_STATE_HELP =
  "A destination's circuit breaker, 0 closed, 1 open, 2 half-open: every shared sink, and the top tenant endpoints by failed calls since their last success"

/** The gauge's value of a breaker state. */
export const breakerStateValue = (state: string): number => (state === "closed" ? 0 : state === "open" ? 1 : 2)

/**
 * `ankusa_breaker_state{destination}` of a shared sink, set as it changes. Tenant endpoints' series
 * are the gauge tick's top (src/observability/gauges.ts), under the tenant gauges' cardinality rule.
 */
export const breakerStateRecorder = (context: Context.Context<never>) => {
  const gauges = new Map<string, Metric.Gauge<number>>()
  return (sink: { readonly options: { readonly name: string }; readonly breaker: { readonly state: string } }) => {
    const name = sink.options.name
    if (name.includes(":")) return
    let g = gauges.get(name)
    if (g === undefined) {
      g = Metric.gauge(BREAKER_STATE, { description: BREAKER_STATE_HELP, attributes: { destination: name } })
      gauges.set(name, g)
    }
    g.updateUnsafe(breakerStateValue(sink.breaker.state), context)
  }
}

/** Tenant endpoint connection pools open now (at most `endpoints.maxPools`), present from boot at 0. */
export const endpointPoolsRecorder = (context: Context.Context<never>): ((n: number) => void) => {
  const series = Metric.gauge("ankusa_endpoint_pools", { description: "Tenant endpoint connection pools open now (at most endpoints.maxPools)" })
  series.updateUnsafe(0, context)
  return (n) => series.updateUnsafe(n, context)
}

/** Tenant endpoint calls the SSRF guard refused (src/domain/ssrf.ts), present from boot at 0. */
export const ssrfRefusedRecorder = (context: Context.Context<never>): (() => void) => {
  const series = Metric.counter("ankusa_endpoint_unsafe_refused_total", {
    description: "Tenant endpoint calls refused by the SSRF guard: the URL or a resolved address is internal",
    incremental: true
  })
  series.updateUnsafe(0, context)
  return () => series.updateUnsafe(1, context)
}

const sinkThrottledName = "ankusa_sink_throttled_total"
const sinkThrottledOptions = {
  description: "Calls a sink's pace held back: by its rate limit, or by the pause a 429 with Retry-After asked for",
  incremental: true
} as const

export const sinkThrottledRecorder = (sink: string, reason: "rate" | "retry_after", context: Context.Context<never>): (() => void) => {
  const series = Metric.counter(sinkThrottledName, { ...sinkThrottledOptions, attributes: { sink, reason } })
  // Present from boot, at 0.
  series.updateUnsafe(0, context)
  return () => series.updateUnsafe(1, context)
}

// ---------------------------------------------------------------------------
// The gauge tick (src/observability/gauges.ts)

/** The six counters of ord 0, one gauge each (TEN-1 §4). */
export const queue = {
  pending: Metric.gauge("ankusa_queue_pending", { description: "First-attempt rows waiting (due, kind 0)" }),
  scheduled: Metric.gauge("ankusa_queue_scheduled", { description: "Retry rows waiting (due, kind 1)" }),
  inflight: Metric.gauge("ankusa_queue_inflight", { description: "Rows claimed by the pipeline" }),
  dead: Metric.gauge("ankusa_queue_dead", { description: "Rows in the dead-letter queue" }),
  bytes: Metric.gauge("ankusa_queue_bytes", { description: "Bytes of every delivery row that exists (due, inflight, dead)" }),
  archive_pending: Metric.gauge("ankusa_queue_archive_pending", { description: "Archive obligations not yet settled" }),
  waiting: Metric.gauge("ankusa_queue_waiting", { description: "Rows of ordered lanes waiting behind their key's head (not yet due)" })
} as const

export const oldestDueAge = Metric.gauge("ankusa_queue_oldest_due_age_seconds", {
  description: "Age of the oldest due row (0 when nothing is due), exact to a second"
})

export const tenants = Metric.gauge("ankusa_tenants", { description: "Tenant ordinals ever allocated (m:next_ord - 1)" })

// `ankusa_tenant_pending{tenant}` (the top tenants only): src/observability/top-tenants-metric.ts.
