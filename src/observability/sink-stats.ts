/**
 * Per-sink figures for the operator console (docs/console.md "Sinks"), from the metrics the
 * pipeline already keeps since the process started: `ankusa_delivery_outcomes_total{sink,outcome}`
 * and the `ankusa_delivery_duration_seconds{sink}` histogram, whose p50 and p99 are estimated as
 * Prometheus' `histogram_quantile` does (linear within the bucket).
 */
import { Effect, Metric } from "effect"

const OUTCOMES = "ankusa_delivery_outcomes_total"
const LATENCY = "ankusa_delivery_duration_seconds"

export interface SinkStats {
  readonly sink: string
  readonly delivered: number
  readonly retried: number
  readonly dead: number
  readonly dropped: number
  /** Calls timed (the histogram's count). */
  readonly calls: number
  /** null before the first call. */
  readonly p50Seconds: number | null
  readonly p99Seconds: number | null
  readonly meanSeconds: number | null
}

/** The `q` quantile of a histogram of cumulative `[upper bound, count]` buckets; null when empty. */
export const quantile = (state: Metric.HistogramState, q: number): number | null => {
  if (state.count === 0) return null
  const rank = q * state.count
  let lower = 0
  let below = 0
  for (const [bound, cumulative] of state.buckets) {
    if (cumulative >= rank && Number.isFinite(bound)) {
      const within = cumulative - below
      const estimate = within === 0 ? bound : lower + ((bound - lower) * (rank - below)) / within
      return Math.min(Math.max(estimate, state.min), state.max)
    }
    lower = bound
    below = cumulative
  }
  // Past the last finite bound: the largest observation is the best estimate.
  return state.max
}

type Outcome = "delivered" | "retried" | "dead" | "dropped"
const isOutcome = (o: string | undefined): o is Outcome => o === "delivered" || o === "retried" || o === "dead" || o === "dropped"

/** Every configured sink (in `sinks` order, zeros until it is called) and any other the metrics name. */
export const fromSnapshot = (snapshot: ReadonlyArray<Metric.Metric.Snapshot>, sinks: ReadonlyArray<string>): Array<SinkStats> => {
  const outcomes = new Map<string, Record<Outcome, number>>()
  const latency = new Map<string, Metric.HistogramState>()
  const named = (sink: string) => {
    let o = outcomes.get(sink)
    if (o === undefined) outcomes.set(sink, (o = { delivered: 0, retried: 0, dead: 0, dropped: 0 }))
    return o
  }
  for (const s of sinks) named(s)
  for (const s of snapshot) {
    const sink = s.attributes?.["sink"]
    if (sink === undefined) continue
    if (s.type === "Counter" && s.id === OUTCOMES) {
      const outcome = s.attributes?.["outcome"]
      if (isOutcome(outcome)) named(sink)[outcome] += Number(s.state.count)
    } else if (s.type === "Histogram" && s.id === LATENCY) {
      named(sink)
      latency.set(sink, s.state)
    }
  }
  return [...outcomes].map(([sink, o]) => {
    const h = latency.get(sink)
    const calls = h?.count ?? 0
    return {
      sink,
      ...o,
      calls,
      p50Seconds: h === undefined ? null : quantile(h, 0.5),
      p99Seconds: h === undefined ? null : quantile(h, 0.99),
      meanSeconds: h === undefined || calls === 0 ? null : h.sum / calls
    }
  })
}

/** The figures of the current metric registry. */
export const sinkStats = (sinks: ReadonlyArray<string>): Effect.Effect<Array<SinkStats>> =>
  Effect.map(Metric.snapshot, (snapshot) => fromSnapshot(snapshot, sinks))
