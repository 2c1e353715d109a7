/**
 * Shards behind nginx (issue 41; deploy/nginx-shards.conf, docs/deployment.md "Running shards"):
 * two shards, each a PostgreSQL store (two databases of one throwaway cluster) with an active
 * node and a standby, behind Debian's nginx running the example with loopback addresses. The
 * active node of one tenant's shard is killed under load; the tenant stays on its shard, and
 * keeps its endpoint, its idempotency keys and its counters.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { checkStore } from "../../src/queue/format/check.js"
import { layerPostgres } from "../../src/store/postgres.js"
import { Store } from "../../src/store/store.js"
import { type HaNode, HA, killNode, readyz, startNode } from "../ha/ha-world.js"
import { type PgCluster, startCluster } from "../support/pg-cluster.js"
import { ADMIN_TOKEN, createEndpoint, eventually, freePort, ingest, SOURCE, startSink, type Sink, TENANT_HEADER } from "./fleet-world.js"
import { loopbackOnly, type Proxy, replaceOnce, startProxy } from "./proxy.js"

const SHARDS_EXAMPLE = path.resolve(import.meta.dirname, "..", "..", "deploy", "nginx-shards.conf")
const TENANTS = Array.from({ length: 12 }, (_, i) => `shard-tenant-${i}`)

const nodeConfig = (db: string, sinkUrl: string) => ({
  http: { host: "127.0.0.1", demoSink: false },
  sources: [{ id: SOURCE, tenant: { header: TENANT_HEADER }, routes: ["orders", "tenant-endpoints"] }],
  sinks: [{ name: "orders", url: `${sinkUrl}/orders`, retry: { delaysMs: [200, 400, 800], jitter: 0 } }],
  endpoints: { allowNetworks: ["127.0.0.0/8"] },
  adminTokens: [{ name: "ops", token: ADMIN_TOKEN, tenants: "*" }],
  pipeline: { tickMs: 20, graceMs: 1_000 },
  store: { kind: "postgres", postgres: { url: db, connectTimeoutMs: 2_000 } },
  ha: HA,
  log: { level: "info" }
})

/** deploy/nginx-shards.conf with loopback addresses: its listen port, the shards' local ports, the nodes'. */
const site = (port: number, shardPorts: readonly [number, number], nodes: ReadonlyArray<number>): string => {
  const file = "deploy/nginx-shards.conf"
  let text = replaceOnce(fs.readFileSync(SHARDS_EXAMPLE, "utf8"), "listen 80;", `listen 127.0.0.1:${port};`, file)
  text = text.replaceAll("127.0.0.1:8101", `127.0.0.1:${shardPorts[0]}`).replaceAll("127.0.0.1:8102", `127.0.0.1:${shardPorts[1]}`)
  // The example's node addresses are text to replace: nginx is started only on what loopbackOnly passes.
  ;["10.0.1.11:8080", "10.0.1.12:8080", "10.0.2.11:8080", "10.0.2.12:8080"].forEach((a, i) => (text = replaceOnce(text, a, `127.0.0.1:${nodes[i]}`, file)))
  return loopbackOnly(text)
}

describe("shards", () => {
  let cluster: PgCluster
  let sink: Sink
  let proxy: Proxy
  let dbs: [string, string]
  const nodes: Array<HaNode> = []
  const ports: Array<number> = []
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-shards-"))

  beforeAll(async () => {
    cluster = await startCluster()
    sink = await startSink()
    dbs = [await cluster.createDatabase(), await cluster.createDatabase()]
    for (let i = 0; i < 4; i++) ports.push(await freePort())
    // a1 and b1 first, so each shard's first node is its active one.
    for (const i of [0, 2, 1, 3]) {
      const n = await startNode(dir, `n${i}`, nodeConfig(dbs[i < 2 ? 0 : 1], sink.url), ports[i]!)
      nodes[i] = n
      if (i === 0 || i === 2) await eventually(`${n.name} active`, 30_000, async () => (await readyz(n)).status === 200)
    }
    const proxyPort = await freePort()
    proxy = await startProxy(path.join(dir, "nginx"), proxyPort, [0, 0], site(proxyPort, [await freePort(), await freePort()], ports))
  }, 180_000)

  afterAll(async () => {
    await proxy?.stop()
    for (const n of nodes) if (n !== undefined) await killNode(n)
    await sink?.close()
    await cluster?.stop()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it.live("a tenant stays on its shard through a node failure with its endpoints, idempotency and counters whole", () =>
    Effect.gen(function* () {
      const shardOf = (port: number) => (ports.indexOf(port) < 2 ? 0 : 1)
      // Every tenant's endpoint through the proxy: created on its shard's active node.
      const home = new Map<string, number>()
      for (const t of TENANTS) {
        const made = yield* Effect.promise(() => createEndpoint(proxy.url, t, `${sink.url}/endpoints/${t}`))
        expect(made.status, JSON.stringify(made)).toBe(201)
        home.set(t, shardOf(made.port))
      }
      expect(new Set(home.values()).size).toBe(2)
      // A hook each with an idempotency key, acknowledged on the tenant's shard.
      const first = new Map<string, string>()
      for (const t of TENANTS) {
        const a = yield* Effect.promise(() => ingest(proxy.url, t, { "idempotency-key": `key-${t}` }))
        expect(a.status).toBe(202)
        expect(shardOf(a.port), t).toBe(home.get(t))
        first.set(t, String(a.body["id"]))
      }
      // The active node of shard 0 dies; hooks go on through the proxy for every tenant.
      const killedAt = Date.now()
      yield* Effect.promise(() => killNode(nodes[0]!))
      const answers: Array<{ tenant: string; status: number; port: number; at: number; id: string }> = []
      while (Date.now() - killedAt < 5_000) {
        for (const t of TENANTS) {
          const a = yield* Effect.promise(() => ingest(proxy.url, t))
          answers.push({ tenant: t, status: a.status, port: a.port, at: Date.now(), id: String(a.body["id"] ?? "") })
        }
      }
      // Never a 202 from another shard's node; during the takeover a 503 or 502, never a lost tenant.
      for (const a of answers) {
        if (a.status === 202) expect(shardOf(a.port), a.tenant).toBe(home.get(a.tenant))
        else expect([502, 503], `${a.tenant} ${a.status}`).toContain(a.status)
      }
      const moved = TENANTS.filter((t) => home.get(t) === 0)
      const firstAfter = answers.find((a) => a.status === 202 && home.get(a.tenant) === 0 && a.port === ports[1])
      expect(firstAfter, "a 202 from shard 0's standby").toBeDefined()
      console.log(`shards: shard 0's standby answered 202 ${firstAfter!.at - killedAt} ms after its active node was killed`)
      // Idempotency: the first key answers its first id, from the standby now serving.
      for (const t of moved) {
        const again = yield* Effect.promise(() => ingest(proxy.url, t, { "idempotency-key": `key-${t}` }))
        expect(again.status, t).toBe(200)
        expect(again.body["id"], t).toBe(first.get(t))
        expect(again.port).toBe(ports[1])
      }
      // Endpoints: each tenant's endpoint receives its hooks acknowledged after the kill.
      const accepted = answers.filter((a) => a.status === 202)
      const received = (t: string, id: string) => sink.receipts.some((r) => (r.sink as string) === `endpoints/${t}` && r.id === id && r.status < 300)
      yield* Effect.promise(() => eventually("every endpoint's hooks", 60_000, () => accepted.every((a) => received(a.tenant, a.id))))
      // Counters: each shard's store equals a fold of its rows.
      for (const db of dbs) {
        const report = yield* Effect.scoped(Effect.flatMap(Effect.map(Layer.build(layerPostgres({ url: db })), Context.get(Store)), checkStore))
        expect(report.differences, db).toEqual([])
      }
    }), 120_000)
})
