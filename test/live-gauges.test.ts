/**
 * The gauges an operator reads from boot (docs/api.md "Metrics"): every documented gauge is in the
 * first scrape after the start line, and `ankusa_tenants` follows the Writer's commits rather
 * than the gauge tick.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { type ServeChild, startServeChild } from "./support/serve-child.js"

const ROOT = path.resolve(import.meta.dirname, "..")

/** The gauges of docs/api.md's metric tables: name, and whether the row names labels. */
const documentedGauges = (): Array<{ readonly name: string; readonly labels: string }> =>
  [...fs.readFileSync(path.join(ROOT, "docs/api.md"), "utf8").matchAll(/^\| `(ankusa_[a-z_]+)` \| gauge \|([^|]*)\|/gm)].map((m) => ({
    name: m[1]!,
    labels: m[2]!.trim()
  }))

const valueOf = (text: string, series: string): number | undefined => {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

describe("live gauges", () => {
  let node: ServeChild
  // A gauge tick far longer than the test: whatever the test sees did not come from a tick.
  beforeAll(async () => {
    node = await startServeChild({
      gauges: { intervalMs: 600_000 },
      sinks: [{ name: "demo", url: "{self}/_demo/sink" }],
      sources: [{ id: "demo", routes: ["demo"], tenant: { header: "x-tenant-id" } }]
    })
  }, 90_000)
  afterAll(async () => {
    await node?.stop()
  })

  it("every documented gauge is present from boot", async () => {
    const text = await fetch(`${node.url}/metrics`).then((r) => r.text())
    const gauges = documentedGauges()
    expect(gauges.length).toBeGreaterThan(20)
    // Gauges by tenant name only the tenants they rank: an empty store has none, so no series.
    const byTenant = gauges.filter((g) => g.labels.includes("`tenant`")).map((g) => g.name)
    expect(byTenant.sort()).toEqual(["ankusa_tenant_inflight", "ankusa_tenant_pending", "ankusa_tenant_throttled"])
    // A RocksDB node: the database gauges are PostgreSQL's (test/serve-postgres.test.ts checks them there).
    const missing = gauges.filter((g) => !byTenant.includes(g.name) && !g.name.startsWith("ankusa_store_database_") && !new RegExp(`^${g.name}(\\{[^}]*\\})? `, "m").test(text)).map((g) => g.name)
    expect(missing).toEqual([])
    expect(valueOf(text, "ankusa_tenants")).toBe(0)
    expect(valueOf(text, "ankusa_dispatch_active_tenants")).toBe(0)
  })

  it("ankusa_tenants counts a new tenant before the next gauge tick", async () => {
    const before = valueOf(await fetch(`${node.url}/metrics`).then((r) => r.text()), "ankusa_tenants")
    expect(before).toBe(0)
    for (const tenant of ["acme", "globex", "acme"]) {
      const r = await fetch(`${node.url}/v1/hooks/demo`, { method: "POST", headers: { "x-tenant-id": tenant }, body: "{}" })
      expect(r.status).toBe(202)
    }
    expect(valueOf(await fetch(`${node.url}/metrics`).then((r) => r.text()), "ankusa_tenants")).toBe(2)
  })
})
