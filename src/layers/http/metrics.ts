/** Ingest metrics of the HTTP edge (product.md "Operations"; docs/api.md "Metrics"). */
import { Effect, Metric, MetricBoundaries } from "effect"
import { type Outcome, OUTCOMES } from "./errors.js"

export const requests = Metric.counter("ankusa_ingest_requests_total", {
  description: "Ingest requests by outcome (accepted, duplicate, quarantined, rejected, too_large, tenant_limit, unavailable, unknown_source, bad_request)",
  incremental: true
})

/** Tagged once per outcome: `Metric.tagged` builds and hashes a new key on each call. */
const byOutcome = <M>(make: (o: Outcome) => M): Readonly<Record<Outcome, M>> =>
  Object.fromEntries(OUTCOMES.map((o) => [o, make(o)])) as Record<Outcome, M>

const requestsBy = byOutcome((o) => Metric.tagged(requests, "outcome", o))

export const outcome = (o: Outcome) => requestsBy[o]

/** 1 ms to about 16 s, doubling: from the request's arrival to its answer (the synced commit included). */
export const latency = Metric.histogram(
  "ankusa_ingest_duration_seconds",
  MetricBoundaries.exponential({ start: 0.001, factor: 2, count: 15 }),
  "Ingest request duration, arrival to answer (includes the synced commit), by outcome"
)

const latencyBy = byOutcome((o) => Metric.tagged(latency, "outcome", o))

export const latencyOf = (o: Outcome) => latencyBy[o]

/** Every outcome shows in /metrics from the start (at 0), so rates and alerts need no first event. */
export const register: Effect.Effect<void> = Effect.forEach(OUTCOMES, (o) => Metric.incrementBy(outcome(o), 0), { discard: true })

/** Counts one answer and its latency; synchronous, for the ingest listener (no fiber labels apply). */
export const unsafeRecord = (o: Outcome, seconds: number): void => {
  requestsBy[o].unsafeUpdate(1, [])
  latencyBy[o].unsafeUpdate(seconds, [])
}
