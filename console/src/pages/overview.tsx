/**
 * Overview: the queue gauges of the last gauge tick and charts of the last hour (ingest and
 * delivery rates, the queue), from `GET /v1/stats/history` (a global token). A scoped token
 * sees the sum of its own tenants' counters instead: node-wide figures count other tenants.
 */
import { useEffect, useState } from "preact/hooks"
import { api, type Principal, type Sample } from "../api.js"
import { Chart } from "../components/chart.js"
import { Stats } from "../components/stats.js"
import { Loading, Problem } from "../components/status.js"
import * as F from "../format.js"
import { useLoad } from "../load.js"

const sum = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0)
const max = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => Math.max(a, b), 0)

const gauges = (s: Sample | undefined) => {
  const v = (n: number | undefined) => (s === undefined || n === undefined ? "–" : F.count(n))
  return [
    { key: "pending", label: "Pending", value: v(s?.pending), hint: "First attempts waiting" },
    { key: "scheduled", label: "Scheduled", value: v(s?.scheduled), hint: "Retries waiting" },
    { key: "inflight", label: "Inflight", value: v(s?.inflight), hint: "Claimed by the pipeline" },
    { key: "dead", label: "Dead", value: v(s?.dead), hint: "In the dead-letter queue" },
    { key: "bytes", label: "Bytes", value: s === undefined ? "–" : F.bytes(s.bytes), hint: "Of every delivery row" },
    { key: "archive_pending", label: "Archive pending", value: v(s?.archive_pending) },
    { key: "oldest_due_age", label: "Oldest due", value: s === undefined ? "–" : F.duration(s.oldest_due_age_seconds) },
    { key: "tenants", label: "Tenants", value: v(s?.tenants) }
  ]
}

const NodeOverview = () => {
  // Refreshed about once a sample (within 2 to 15 s).
  const [every, setEvery] = useState(5_000)
  const history = useLoad(api.history, [], every)
  const interval = history.data?.interval_ms
  useEffect(() => {
    if (interval !== undefined) setEvery(Math.min(15_000, Math.max(2_000, interval)))
  }, [interval])
  if (history.data === undefined) return history.error !== undefined ? <Problem error={history.error} /> : <Loading />
  const { samples, interval_ms, max_samples, config } = history.data
  const last = samples[samples.length - 1]
  const times = samples.map((s) => Date.parse(s.at) / 1000)
  const col = (f: (s: Sample) => number) => samples.map(f)
  const ingest = col((s) => s.ingest_per_second)
  const delivered = col((s) => s.delivered_per_second)
  const failed = col((s) => s.failed_per_second)
  return (
    <>
      <section aria-labelledby="gauges-title">
        <h2 id="gauges-title">Queue</h2>
        <Stats label="Queue gauges" stats={gauges(last)} />
        <p class="muted">
          {last === undefined
            ? `No sample yet: the first comes with the next gauge tick (every ${F.duration(interval_ms / 1000)}).`
            : `As of ${F.time(last.at)}; a sample every ${F.duration(interval_ms / 1000)}, at most ${F.count(max_samples)} (one hour) kept in the node's memory.`}
        </p>
      </section>
      <p class="muted" data-testid="config-generation">
        Configuration generation {F.count(config.generation)}, loaded {F.time(config.loaded_at)}{" "}
        {config.trigger === "boot" ? "at boot" : config.trigger === "signal" ? "by SIGHUP" : config.trigger === "api" ? "by POST /v1/config/reload" : "by the file watch"}.
      </p>
      <section aria-labelledby="charts-title" class="charts">
        <h2 id="charts-title">The last hour</h2>
        <Chart
          id="ingest"
          title="Ingest"
          unit="hooks/s"
          times={times}
          series={[{ label: "accepted/s", values: ingest, stroke: "#2563eb" }]}
          caption={`Last hour: ${F.count(sum(col((s) => s.ingested)))} hooks accepted; peak ${F.rate(max(ingest))}/s.`}
        />
        <Chart
          id="delivery"
          title="Deliveries"
          unit="calls/s"
          times={times}
          series={[
            { label: "delivered/s", values: delivered, stroke: "#16a34a" },
            { label: "failed/s", values: failed, stroke: "#dc2626" }
          ]}
          caption={`Last hour: ${F.count(sum(col((s) => s.delivered)))} delivered, ${F.count(sum(col((s) => s.failed)))} failed (retried or dead).`}
        />
        <Chart
          id="queue"
          title="Queue"
          unit="rows"
          times={times}
          series={[
            { label: "pending", values: col((s) => s.pending), stroke: "#2563eb" },
            { label: "scheduled", values: col((s) => s.scheduled), stroke: "#d97706" },
            { label: "inflight", values: col((s) => s.inflight), stroke: "#7c3aed" },
            { label: "dead", values: col((s) => s.dead), stroke: "#dc2626" }
          ]}
          caption={`Last hour: at most ${F.count(max(col((s) => s.pending + s.scheduled)))} rows waiting and ${F.count(max(col((s) => s.dead)))} dead.`}
        />
      </section>
    </>
  )
}

const ScopedOverview = ({ tenants }: { readonly tenants: ReadonlyArray<string> }) => {
  const counters = useLoad(
    () => api.tenants().then((l) => Promise.all(l.items.map((t) => api.tenant(t.tenant)))),
    [tenants.join("\u0000")],
    5_000
  )
  if (counters.data === undefined) return counters.error !== undefined ? <Problem error={counters.error} /> : <Loading />
  const all = counters.data
  const total = (f: "pending" | "scheduled" | "inflight" | "dead" | "bytes" | "archive_pending") => sum(all.map((c) => c[f]))
  return (
    <section aria-labelledby="gauges-title">
      <h2 id="gauges-title">Your tenants</h2>
      <Stats
        label="Counters of the token's tenants"
        stats={[
          { key: "pending", label: "Pending", value: F.count(total("pending")) },
          { key: "scheduled", label: "Scheduled", value: F.count(total("scheduled")) },
          { key: "inflight", label: "Inflight", value: F.count(total("inflight")) },
          { key: "dead", label: "Dead", value: F.count(total("dead")) },
          { key: "bytes", label: "Bytes", value: F.bytes(total("bytes")) },
          { key: "archive_pending", label: "Archive pending", value: F.count(total("archive_pending")) },
          { key: "tenants", label: "Tenants", value: F.count(all.length) }
        ]}
      />
      <p class="muted">
        The sum over this token's {all.length} tenant{all.length === 1 ? "" : "s"} seen on this node. Node-wide gauges and
        charts need a global token.
      </p>
    </section>
  )
}

export const Overview = ({ principal }: { readonly principal: Principal }) => (
  <>
    <h1>Overview</h1>
    {principal.tenants === null ? <NodeOverview /> : <ScopedOverview tenants={principal.tenants} />}
  </>
)
