/**
 * The node's recent history for the operator console (docs/console.md): a ring of samples in
 * memory, one a gauge tick (`gauges.intervalMs`), at most an hour of them. A sample reads what
 * the gauge tick published (the `ankusa_queue_*` and `ankusa_tenants` gauges, gauges.ts) and the
 * ingest and delivery counters, from the process's metric registry: it never reads the store, so
 * its cost is one registry snapshot a tick whatever the backlog.
 */
import { Clock, Context, Duration, Effect, Layer, Metric, Schedule } from "effect"

export const HOUR_MS = 3_600_000
/** Samples kept at most: one hour at the shortest gauge interval (1 s), both ends included. */
export const MAX_SAMPLES = 3_601

export interface Sample {
  /** When the sample was taken (ms since the epoch). */
  readonly at: number
  readonly pending: number
  readonly scheduled: number
  readonly inflight: number
  readonly dead: number
  readonly bytes: number
  readonly archivePending: number
  readonly oldestDueAgeSeconds: number
  readonly tenants: number
  /** Hooks accepted, sink calls delivered (2xx), and failed (retried or dead) since the previous sample. */
  readonly ingested: number
  readonly delivered: number
  readonly failed: number
  /** The same per second of the time since the previous sample (0 for the first). */
  readonly ingestPerSecond: number
  readonly deliveredPerSecond: number
  readonly failedPerSecond: number
}

const GAUGES = {
  pending: "ankusa_queue_pending",
  scheduled: "ankusa_queue_scheduled",
  inflight: "ankusa_queue_inflight",
  dead: "ankusa_queue_dead",
  bytes: "ankusa_queue_bytes",
  archivePending: "ankusa_queue_archive_pending",
  oldestDueAgeSeconds: "ankusa_queue_oldest_due_age_seconds",
  tenants: "ankusa_tenants"
} as const
type GaugeField = keyof typeof GAUGES

const INGEST = "ankusa_ingest_requests_total"
const OUTCOMES = "ankusa_delivery_outcomes_total"

interface Totals {
  readonly ingested: number
  readonly delivered: number
  readonly failed: number
}

/** Gauge values and counter totals of a registry snapshot; no gauges until the gauge tick has published once. */
export const readSnapshot = (
  snapshot: ReadonlyArray<Metric.Metric.Snapshot>
): { readonly gauges: Record<GaugeField, number> | undefined; readonly totals: Totals } => {
  const byName = new Map<string, number>()
  let ingested = 0
  let delivered = 0
  let failed = 0
  for (const s of snapshot) {
    if (s.type === "Gauge" && s.attributes === undefined) byName.set(s.id, Number(s.state.value))
    else if (s.type === "Counter" && s.attributes !== undefined) {
      const n = Number(s.state.count)
      const outcome = s.attributes["outcome"]
      if (s.id === INGEST && outcome === "accepted") ingested += n
      else if (s.id === OUTCOMES && outcome === "delivered") delivered += n
      else if (s.id === OUTCOMES && (outcome === "retried" || outcome === "dead")) failed += n
    }
  }
  if (!byName.has(GAUGES.pending)) return { gauges: undefined, totals: { ingested, delivered, failed } }
  const gauges = {} as Record<GaugeField, number>
  for (const [field, name] of Object.entries(GAUGES) as Array<[GaugeField, string]>) gauges[field] = byName.get(name) ?? 0
  return { gauges, totals: { ingested, delivered, failed } }
}

/** Samples one hour holds at `intervalMs` between them, within `MAX_SAMPLES`. */
export const capacityOf = (intervalMs: number): number => Math.min(MAX_SAMPLES, Math.floor(HOUR_MS / intervalMs) + 1)

export interface HistoryShape {
  readonly intervalMs: number
  /** Samples kept at most. */
  readonly capacity: number
  /** The samples of the last hour, oldest first. */
  readonly samples: Effect.Effect<ReadonlyArray<Sample>>
  /** Take one sample now (the scheduled fiber's step). */
  readonly sample: Effect.Effect<void>
}

export class History extends Context.Service<History, HistoryShape>()("ankusa/History") {}

export const make = (intervalMs: number): Effect.Effect<HistoryShape> =>
  Effect.sync(() => {
    const capacity = capacityOf(intervalMs)
    // A fixed array written round-robin: memory is `capacity` samples whatever the uptime.
    const ring: Array<Sample | undefined> = new Array(capacity).fill(undefined)
    let next = 0
    let previous: { readonly at: number; readonly totals: Totals } | undefined

    const sample = Effect.gen(function* () {
      const at = yield* Clock.currentTimeMillis
      const { gauges, totals } = readSnapshot(yield* Metric.snapshot)
      const prev = previous
      previous = { at, totals }
      if (gauges === undefined) return
      const seconds = prev === undefined ? 0 : Math.max(0.001, (at - prev.at) / 1000)
      const since = (f: keyof Totals) => (prev === undefined ? 0 : Math.max(0, totals[f] - prev.totals[f]))
      const rate = (n: number) => (seconds === 0 ? 0 : n / seconds)
      const ingested = since("ingested")
      const delivered = since("delivered")
      const failed = since("failed")
      ring[next] = {
        at,
        ...gauges,
        ingested,
        delivered,
        failed,
        ingestPerSecond: rate(ingested),
        deliveredPerSecond: rate(delivered),
        failedPerSecond: rate(failed)
      }
      next = (next + 1) % capacity
    })

    const samples = Effect.map(Clock.currentTimeMillis, (now) => {
      const out: Array<Sample> = []
      for (let i = 0; i < capacity; i++) {
        const s = ring[(next + i) % capacity]
        if (s !== undefined && s.at > now - HOUR_MS) out.push(s)
      }
      return out
    })

    return { intervalMs, capacity, samples, sample } satisfies HistoryShape
  })

/** The service and its sampling fiber, every `intervalMs` (a failed sample is logged; the next runs on time). */
export const layer = (options: { readonly intervalMs: number }): Layer.Layer<History> =>
  Layer.effect(
    History,
    Effect.gen(function* () {
      const { intervalMs } = options
      if (!Number.isInteger(intervalMs) || intervalMs < 1) return yield* Effect.die(new Error(`history interval ${intervalMs} must be >= 1`))
      const history = yield* make(intervalMs)
      yield* history.sample.pipe(
        Effect.catchCause((cause) => Effect.logWarning("history: sample failed", cause)),
        Effect.repeat(Schedule.spaced(Duration.millis(intervalMs))),
        Effect.forkScoped
      )
      return history
    })
  )
