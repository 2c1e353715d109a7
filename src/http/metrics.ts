/** Ingest metrics of the HTTP edge (product.md "Operations"; docs/api.md "Metrics"). */
import { type Context, Effect, Metric } from "effect"
import { type Outcome, OUTCOMES } from "./errors.js"

const REQUESTS = "ankusa_ingest_requests_total"
const REQUESTS_HELP =
  "Ingest requests by outcome (accepted, duplicate, quarantined, rejected, too_large, too_slow, tenant_limit, unavailable, unknown_source, bad_request, tenant_rate, tenant_quota, disk_reserve, busy)"

export const requests = Metric.counter(REQUESTS, { description: REQUESTS_HELP, incremental: true })

/**
 * One metric per outcome with the attribute set at construction: its series key is computed
 * once, where `Metric.withAttributes` wrappers of one base metric re-key on every switch.
 */
const byOutcome = <M>(make: (o: Outcome) => M): Readonly<Record<Outcome, M>> =>
  Object.fromEntries(OUTCOMES.map((o) => [o, make(o)])) as Record<Outcome, M>

const requestsBy = byOutcome((o) =>
  Metric.counter(REQUESTS, { description: REQUESTS_HELP, incremental: true, attributes: { outcome: o } })
)

export const outcome = (o: Outcome) => requestsBy[o]

const LATENCY = "ankusa_ingest_duration_seconds"
const LATENCY_HELP = "Ingest request duration, arrival to answer (includes the synced commit), by outcome"
/** 1 ms to about 16 s, doubling: from the request's arrival to its answer (the synced commit included). */
const LATENCY_BOUNDARIES = Metric.exponentialBoundaries({ start: 0.001, factor: 2, count: 15 })

export const latency = Metric.histogram(LATENCY, { description: LATENCY_HELP, boundaries: LATENCY_BOUNDARIES })

const latencyBy = byOutcome((o) =>
  Metric.histogram(LATENCY, { description: LATENCY_HELP, boundaries: LATENCY_BOUNDARIES, attributes: { outcome: o } })
)

export const latencyOf = (o: Outcome) => latencyBy[o]

/** Every outcome shows in /metrics from the start (at 0), so rates and alerts need no first event. */
export const register: Effect.Effect<void> = Effect.forEach(OUTCOMES, (o) => Metric.update(outcome(o), 0), { discard: true })

/**
 * Counts one answer and its latency synchronously, for the ingest listener (which runs outside
 * any fiber), in the metric registry of the context it was built in.
 */
export const recorder: Effect.Effect<(o: Outcome, seconds: number) => void> = Effect.map(
  Effect.context<never>(),
  (context: Context.Context<never>) => (o, seconds) => {
    requestsBy[o].updateUnsafe(1, context)
    latencyBy[o].updateUnsafe(seconds, context)
  }
)
