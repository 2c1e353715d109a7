/**
 * /metrics as an operator scrapes it: the text is what `effect/observability`'s
 * PrometheusMetrics renders for the process's metric registry, and a real node
 * (`bin/ankusa.js serve`, RocksDB, a real sink) exports every series the docs name,
 * with the documented type.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { PrometheusMetrics } from "effect/observability"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { configOf, startEdge } from "./edge-harness.js"
import { ROOT, sleep } from "./support/node-child.js"
import { type ServeChild, startServeChild } from "./support/serve-child.js"

/** Every `ankusa_*` series the docs name, with the type the docs give (a metric table) or its name implies. */
const documented = (): ReadonlyMap<string, string | undefined> => {
  const out = new Map<string, string | undefined>()
  for (const doc of ["api.md", "delivery.md", "storage.md", "architecture.md"]) {
    const text = fs.readFileSync(path.join(ROOT, "docs", doc), "utf8")
    for (const m of text.matchAll(/^\| `(ankusa_[a-z_]+)(?:\{[^}]*\})?` \| (counter|gauge|histogram) \|/gm)) out.set(m[1]!, m[2])
    for (const m of text.matchAll(/`(ankusa_[a-z_]*[a-z])(?:\{[^}`]*\})?`/g)) {
      if (!out.has(m[1]!)) out.set(m[1]!, m[1]!.endsWith("_total") ? "counter" : undefined)
    }
    // `ankusa_queue_{pending,scheduled,...}`: one gauge per state.
    for (const m of text.matchAll(/`ankusa_queue_\{([a-z_,]+)\}`/g)) for (const s of m[1]!.split(",")) out.set(`ankusa_queue_${s}`, "gauge")
  }
  return out
}

/** The prefix of the series only a store in a database server (PostgreSQL) reports. */
const DATABASE_SERIES = "ankusa_store_database_"

const types = (text: string) => new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]))

describe("metrics exposition", () => {
  // Live: the edge's Writer lingers (writer.lingerMs), which a TestClock would never end.
  it.live("/metrics is Effect's Prometheus output with every documented series", () =>
    Effect.gen(function* () {
      // In process: the endpoint's body is the formatter's text of the same registry.
      const edge = yield* startEdge(configOf({}))
      yield* Effect.promise(() => edge.fetch("/v1/hooks/demo", { method: "POST", body: "{}" }))
      const served = yield* Effect.promise(() => edge.fetch("/metrics").then((r) => r.text()))
      const formatted = yield* PrometheusMetrics.format().pipe(Effect.provide(edge.context))
      expect(served).toContain('ankusa_ingest_requests_total{outcome="accepted"} 1\n')
      expect(served).toBe(formatted)

      // A real node: every documented series, with its type.
      yield* Effect.promise(() => everyDocumentedSeries())
    }),
    { timeout: 120_000 }
  )
})

/** Boot a node whose second sink holds its calls, so rows stay pending and the top tenants show. */
const everyDocumentedSeries = async () => {
  const held: Array<http.ServerResponse> = []
  const sink = http.createServer((_req, res) => void held.push(res))
  await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r))
  let node: ServeChild | undefined
  try {
    // startServeChild fails (with the child's output) when no start line comes within a minute.
    node = await startServeChild({
      gauges: { intervalMs: 1000 },
      // Fewer inflight slots than rows: the held sink keeps the rest pending.
      pipeline: { maxInflight: 2 },
      // A tenant cap of one row inflight: the held call holds it, so the tenant shows as throttled.
      tenants: { limits: { maxInflight: 1 } },
      sinks: [
        { name: "demo", url: "{self}/_demo/sink" },
        { name: "held", url: `http://127.0.0.1:${(sink.address() as AddressInfo).port}/in`, concurrency: 1, timeoutMs: 60_000 }
      ],
      sources: [{ id: "demo", routes: ["demo", "held"] }]
    })
    const url = node.url
    expect(url, node.stdout()).toBeDefined()
    for (let i = 0; i < 5; i++) expect((await fetch(`${url}/v1/hooks/demo`, { method: "POST", body: "{}" })).status).toBe(202)
    // A RocksDB node: the database series are PostgreSQL's (test/serve-postgres.test.ts checks them there).
    const want = new Map([...documented()].filter(([n]) => !n.startsWith(DATABASE_SERIES)))
    let found = new Map<string, string>()
    // The event-loop gauge waits for its first 5 s window, the top tenants for a gauge tick.
    for (let i = 0; i < 150; i++) {
      found = types(await fetch(`${url}/metrics`).then((r) => r.text()))
      if ([...want.keys()].every((n) => found.has(n))) break
      await sleep(100)
    }
    expect([...want.keys()].filter((n) => !found.has(n))).toEqual([])
    for (const [name, type] of want) if (type !== undefined) expect(`${name} ${found.get(name)}`).toBe(`${name} ${type}`)
    // The parse found the tables of every part: edge, pipeline and gauges, lifecycle, store, process.
    for (const n of ["ankusa_ingest_requests_total", "ankusa_queue_pending", "ankusa_tenant_pending", "ankusa_audit_pruned_total", "ankusa_store_disk_bytes", "ankusa_event_loop_delay_seconds"]) {
      expect(want.get(n), n).toBeDefined()
    }
  } finally {
    try {
      await node?.stop()
    } finally {
      for (const r of held) r.destroy()
      sink.close()
    }
  }
}
