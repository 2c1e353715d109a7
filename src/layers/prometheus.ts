/**
 * Prometheus text exposition (format 0.0.4) of every Effect metric in the
 * process: `Metric.snapshot` rendered with tags as labels. Counters and gauges
 * as themselves, histograms as cumulative `_bucket{le}` plus `_sum`/`_count`,
 * summaries as `{quantile}` plus `_sum`/`_count`, frequencies as a counter
 * with a `key` label.
 */
import { Effect, Metric, MetricState, Option } from "effect"
import type { MetricPair } from "effect"
import * as TopTenants from "./top-tenants-metric.js"

export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

type Labels = ReadonlyArray<readonly [string, string]>

const metricName = (name: string): string => {
  const s = name.replace(/[^a-zA-Z0-9_:]/g, "_")
  return /^[a-zA-Z_:]/.test(s) ? s : `_${s}`
}
const labelName = (name: string): string => {
  const s = name.replace(/[^a-zA-Z0-9_]/g, "_")
  return /^[a-zA-Z_]/.test(s) ? s : `_${s}`
}
const escapeLabel = (v: string): string => v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')
const escapeHelp = (v: string): string => v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

export const formatValue = (n: number | bigint): string => {
  if (typeof n === "bigint") return n.toString()
  if (Number.isNaN(n)) return "NaN"
  if (n === Infinity) return "+Inf"
  if (n === -Infinity) return "-Inf"
  return String(n)
}

const labelText = (labels: Labels): string =>
  labels.length === 0 ? "" : `{${labels.map(([k, v]) => `${labelName(k)}="${escapeLabel(v)}"`).join(",")}}`

interface Family {
  type: "counter" | "gauge" | "histogram" | "summary"
  help: string | undefined
  lines: Array<string>
}

/** Gauge series kept outside Effect's registry (whose series can never be removed), rendered with the snapshot. */
export interface GaugeFamily {
  readonly name: string
  readonly help: string
  readonly series: ReadonlyArray<{ readonly labels: Labels; readonly value: number }>
}

/** Renders a metrics snapshot and extra gauge families; series of one name are grouped under one HELP/TYPE header. */
export const render = (pairs: ReadonlyArray<MetricPair.MetricPair.Untyped>, gauges: ReadonlyArray<GaugeFamily> = []): string => {
  const families = new Map<string, Family>()
  const family = (name: string, type: Family["type"], help: Option.Option<string>): Family => {
    let f = families.get(name)
    if (f === undefined) {
      f = { type, help: Option.getOrUndefined(help), lines: [] }
      families.set(name, f)
    }
    return f
  }
  const tagText = (p: MetricPair.MetricPair.Untyped) => p.metricKey.tags.map((t) => `${t.key}=${t.value}`).join(",")
  // Stable output: series in label order; a histogram's buckets keep their own (ascending) order.
  const sorted = [...pairs].sort((a, b) => (tagText(a) < tagText(b) ? -1 : tagText(a) > tagText(b) ? 1 : 0))
  for (const pair of sorted) {
    const key = pair.metricKey
    const name = metricName(key.name)
    const labels: Labels = key.tags.map((t) => [t.key, t.value] as const)
    const state = pair.metricState
    if (MetricState.isCounterState(state)) {
      family(name, "counter", key.description).lines.push(`${name}${labelText(labels)} ${formatValue(state.count)}`)
    } else if (MetricState.isGaugeState(state)) {
      family(name, "gauge", key.description).lines.push(`${name}${labelText(labels)} ${formatValue(state.value)}`)
    } else if (MetricState.isHistogramState(state)) {
      const f = family(name, "histogram", key.description)
      for (const [le, count] of state.buckets) {
        f.lines.push(`${name}_bucket${labelText([...labels, ["le", formatValue(le)]])} ${formatValue(count)}`)
      }
      // Effect's boundaries always end at +Inf, so the last bucket equals the count.
      f.lines.push(`${name}_sum${labelText(labels)} ${formatValue(state.sum)}`)
      f.lines.push(`${name}_count${labelText(labels)} ${formatValue(state.count)}`)
    } else if (MetricState.isSummaryState(state)) {
      const f = family(name, "summary", key.description)
      for (const [q, value] of state.quantiles) {
        f.lines.push(`${name}${labelText([...labels, ["quantile", String(q)]])} ${formatValue(Option.getOrElse(value, () => NaN))}`)
      }
      f.lines.push(`${name}_sum${labelText(labels)} ${formatValue(state.sum)}`)
      f.lines.push(`${name}_count${labelText(labels)} ${formatValue(state.count)}`)
    } else if (MetricState.isFrequencyState(state)) {
      const f = family(name, "counter", key.description)
      for (const [k, count] of state.occurrences) {
        f.lines.push(`${name}${labelText([...labels, ["key", k]])} ${formatValue(count)}`)
      }
    }
  }
  for (const g of gauges) {
    if (g.series.length === 0) continue
    const name = metricName(g.name)
    const f = family(name, "gauge", Option.some(g.help))
    for (const series of g.series) f.lines.push(`${name}${labelText(series.labels)} ${formatValue(series.value)}`)
  }
  const out: Array<string> = []
  for (const [name, f] of [...families.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (f.help !== undefined) out.push(`# HELP ${name} ${escapeHelp(f.help)}`)
    out.push(`# TYPE ${name} ${f.type}`)
    out.push(...f.lines)
  }
  return out.length === 0 ? "" : out.join("\n") + "\n"
}

/** The top tenants by pending (src/layers/top-tenants-metric.ts), as a gauge family. */
const topTenants = (): GaugeFamily => ({
  name: TopTenants.NAME,
  help: TopTenants.HELP,
  series: TopTenants.current().map((t) => ({ labels: [["tenant", t.tenant]] as const, value: t.pending }))
})

/** The text of `GET /metrics`. */
export const scrape: Effect.Effect<string> = Effect.map(Metric.snapshot, (pairs) => render(pairs, [topTenants()]))
