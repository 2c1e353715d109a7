/**
 * /metrics as an operator scrapes it: the text is what `effect/observability`'s
 * PrometheusMetrics renders for the process's metric registry, and a real node
 * (`bin/ankusa.js serve`, RocksDB, a real sink) exports every series the docs name,
 * with the documented type.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { configOf, startEdge } from "./edge-harness.js"

const ROOT = path.resolve(import.meta.dirname, "..")
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

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

const types = (text: string) => new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]))

const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", () => resolve())))

describe("metrics exposition", () => {
  it.effect("/metrics is Effect's Prometheus output with every documented series", () =>
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
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-metrics-"))
  const config = path.join(dir, "ankusa.json")
  fs.writeFileSync(
    config,
    JSON.stringify({
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
  )
  const child = spawn(process.execPath, ["bin/ankusa.js", "serve", "--config", config, "--data-dir", dir, "--port", "0"], {
    cwd: ROOT,
    env: { ...process.env, ANKUSA_CONFIG: "", ANKUSA_HTTP_PORT: "" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  child.stdout!.on("data", (c: Buffer) => (stdout += c.toString("utf8")))
  try {
    let url: string | undefined
    for (let i = 0; i < 600 && url === undefined; i++) {
      url = /"message":"ankusa serving".*?"address":"(http:\/\/[^"]+)"/.exec(stdout)?.[1]
      if (url === undefined) await sleep(100)
    }
    expect(url, stdout).toBeDefined()
    for (let i = 0; i < 5; i++) expect((await fetch(`${url}/v1/hooks/demo`, { method: "POST", body: "{}" })).status).toBe(202)
    const want = documented()
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
    child.kill("SIGTERM")
    await exited(child)
    for (const r of held) r.destroy()
    sink.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
