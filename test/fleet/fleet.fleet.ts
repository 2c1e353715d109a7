/**
 * Issue 18: a fleet behind an existing proxy. Debian's nginx running
 * deploy/nginx.conf (test/fleet/proxy.ts) in front of two real nodes with
 * their own data directories, a shared source taking its tenant from
 * X-Tenant, and a real sink; what docs/deployment.md "Running a fleet" says
 * the proxy does, shown: a tenant's hooks land on one node, stay there across
 * a reload, go to the next node on the ring while theirs is down (the down
 * node's backlog waiting on its disk until it comes back), and each hook is
 * delivered once per sink by the node that accepted it. Issue 27: a tenant's
 * endpoint, created through the proxy, lives on the tenant's node and gets
 * the tenant's hooks from it.
 *
 * `npm run test:fleet` (not `npm test`: vitest.fleet.config.ts) builds first,
 * since the nodes run dist/.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { metricValue } from "../../bench/lib/serve-child.js"
import {
  ADMIN_TOKEN,
  allDelivered,
  type Answer,
  createEndpoint,
  endpointsOf,
  eventually,
  freePort,
  ingest,
  mapLimit,
  metricsOf,
  type Node,
  nodeConfig,
  nodePart,
  rowsOf,
  type Sink,
  SINKS,
  startNode,
  startSink,
  tenantStats
} from "./fleet-world.js"
import { type Proxy, startProxy } from "./proxy.js"

const TENANTS = Array.from({ length: 100 }, (_, i) => `tenant-${String(i).padStart(3, "0")}`)
/** Requests in flight at once through the proxy. */
const CONCURRENCY = 16
const DELIVERY_MS = 60_000

let root = ""
let sink: Sink
let proxy: Proxy
const nodes: Array<Node> = []

const nodeAt = (port: number): Node => {
  const n = nodes.find((x) => x.port === port)
  if (n === undefined) throw new Error(`no node at port ${port}`)
  return n
}

/** One hook per tenant through the proxy, whatever the answer. */
const eachOnce = (tenants: ReadonlyArray<string>): Promise<Array<Answer & { readonly tenant: string }>> =>
  mapLimit(tenants, CONCURRENCY, async (t) => ({ ...(await ingest(proxy.url, t)), tenant: t }))

/** One hook per tenant through the proxy; every answer 202. */
const oneEach = async (tenants: ReadonlyArray<string>): Promise<Array<Answer & { readonly tenant: string }>> => {
  const answers = await eachOnce(tenants)
  for (const a of answers) expect(a.status, JSON.stringify(a)).toBe(202)
  return answers
}

const awaitDelivered = (ids: ReadonlyArray<string>) =>
  eventually(`${ids.length} hooks delivered to ${SINKS.join(" and ")}`, DELIVERY_MS, () => allDelivered(sink, ids))

const delivered = async (node: Node, s: string) =>
  metricValue(await metricsOf(node), `ankusa_delivery_outcomes_total{sink="${s}",outcome="delivered"}`) ?? 0

/** Every node's delivered counter per sink, once three reads 500 ms apart agree. */
const steadyCounters = async (): Promise<Map<string, number>> => {
  const read = async () => {
    const m = new Map<string, number>()
    for (const n of nodes) for (const s of SINKS) m.set(`${n.name} ${s}`, await delivered(n, s))
    return m
  }
  let last = await read()
  let same = 0
  await eventually("the delivered counters to hold still", DELIVERY_MS, async () => {
    await new Promise((r) => setTimeout(r, 500))
    const now = await read()
    same = [...now].every(([k, v]) => last.get(k) === v) ? same + 1 : 0
    last = now
    return same >= 2
  })
  return last
}

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-fleet-"))
  sink = await startSink()
  for (const name of ["a", "b"]) {
    const port = await freePort()
    const node: Node = { name, port, dataDir: path.join(root, `node-${name}`), url: `http://127.0.0.1:${port}`, child: undefined }
    fs.mkdirSync(node.dataDir)
    nodes.push(node)
  }
  await Promise.all(nodes.map((n) => startNode(n, sink.url)))
  proxy = await startProxy(path.join(root, "nginx"), await freePort(), [nodes[0]!.port, nodes[1]!.port])
}, 180_000)

afterAll(async () => {
  await proxy?.stop()
  for (const n of nodes) {
    if (n.child === undefined) continue
    const code = await Promise.race([n.child.stop(), new Promise((r) => setTimeout(() => r("timeout"), 30_000))])
    if (code === "timeout") await n.child.kill()
  }
  await sink?.close()
  if (root !== "") fs.rmSync(root, { recursive: true, force: true })
}, 120_000)

describe("fleet", () => {
  it("each tenant's hooks land on one node", { timeout: 180_000 }, async () => {
    // The sink fails meanwhile, so every row stays queued and the counters hold all of it.
    sink.mode = "fail"
    const hooks = TENANTS.flatMap((t) => [t, t, t])
    const answers = await oneEach(hooks)
    const home = new Map<string, number>()
    const idsOfNode = new Map<number, Set<string>>()
    for (const a of answers) {
      expect(home.get(a.tenant) ?? a.port).toBe(a.port)
      home.set(a.tenant, a.port)
      idsOfNode.set(a.port, (idsOfNode.get(a.port) ?? new Set()).add(nodePart(a.body["id"])))
    }
    // Both nodes hold tenants, and each node's hook ids carry its own node id.
    expect([...idsOfNode.keys()].sort()).toEqual(nodes.map((n) => n.port).sort())
    for (const parts of idsOfNode.values()) expect(parts.size).toBe(1)
    expect(new Set([...idsOfNode.values()].flatMap((s) => [...s])).size).toBe(2)

    // Each node's own stats: the tenant is on exactly one node, with every row sent for it.
    let rows = 0
    for (const t of TENANTS) {
      const per = await Promise.all(nodes.map((n) => tenantStats(n.url, t)))
      const holders = per.flatMap((a, i) => (a.status === 200 ? [nodes[i]!] : []))
      expect(holders.map((n) => n.port), t).toEqual([home.get(t)])
      for (const a of per) if (a.status !== 200) expect(a).toMatchObject({ status: 404, body: { error: "unknown_tenant" } })
      const held = per.find((a) => a.status === 200)!
      expect(rowsOf(held.body), t).toBe(3 * SINKS.length)
      rows += rowsOf(held.body)
      // The proxy's per-tenant route reaches the same node (how an operator finds it).
      const viaProxy = await tenantStats(proxy.url, t)
      expect(viaProxy.status).toBe(200)
      expect(viaProxy.port).toBe(home.get(t))
    }
    expect(rows).toBe(hooks.length * SINKS.length)
    // And each node's /metrics: what it accepted is 3 hooks for each tenant it holds; together, all.
    let accepted = 0
    for (const n of nodes) {
      const mine = TENANTS.filter((t) => home.get(t) === n.port).length
      const count = metricValue(await metricsOf(n), `ankusa_ingest_requests_total{outcome="accepted"}`)
      expect(count, n.name).toBe(3 * mine)
      accepted += count ?? 0
    }
    expect(accepted).toBe(hooks.length)

    sink.mode = "ok"
    await awaitDelivered(answers.map((a) => String(a.body["id"])))
  })

  it("a node's tenants keep their node across a proxy reload", { timeout: 180_000 }, async () => {
    const before = await oneEach(TENANTS)
    const home = new Map(before.map((a) => [a.tenant, a.port]))
    const ids = before.map((a) => String(a.body["id"]))
    // The same file reloaded, then the two server lines swapped: the ring is the same.
    for (const swap of [false, true]) {
      await proxy.reload({ swap })
      const after = await oneEach(TENANTS)
      for (const a of after) expect(a.port, `${a.tenant} after a reload${swap ? " with the servers swapped" : ""}`).toBe(home.get(a.tenant))
      ids.push(...after.map((a) => String(a.body["id"])))
    }
    await proxy.reload({ swap: false })
    await awaitDelivered(ids)
  })

  it("a reload on every node keeps routing by tenant", { timeout: 180_000 }, async () => {
    sink.mode = "ok"
    const before = await oneEach(TENANTS)
    const home = new Map(before.map((a) => [a.tenant, a.port]))
    // The same new file pushed to every node (a header on each sink), then SIGHUP to each.
    for (const n of nodes) {
      fs.writeFileSync(path.join(n.dataDir, "serve-config.json"), JSON.stringify(nodeConfig(n.name, sink.url, { "x-fleet-generation": "2" })))
      process.kill(n.child!.pid, "SIGHUP")
    }
    await eventually("generation 2 on both nodes", 30_000, async () => {
      const gens = await Promise.all(nodes.map(async (n) => metricValue(await metricsOf(n), "ankusa_config_generation")))
      return gens.every((g) => g === 2)
    })
    const after = await oneEach(TENANTS)
    for (const a of after) expect(a.port, `${a.tenant} after the nodes reloaded`).toBe(home.get(a.tenant))
    const ids = after.map((a) => String(a.body["id"]))
    await awaitDelivered(ids)
    // Each hook after the reload went out with the new configuration, from its tenant's node.
    const byId = new Map(after.map((a) => [String(a.body["id"]), a.port]))
    for (const r of sink.receipts.filter((r) => byId.has(r.id) && r.status < 300)) {
      expect(r.generation).toBe("2")
      expect(nodes.find((n) => n.name === r.node)!.port).toBe(byId.get(r.id))
    }
    for (const n of nodes) expect(n.child!.child.exitCode).toBe(null)
  })

  it("a node-local fleet never acknowledges a hook of a tenant whose endpoints live on another node", { timeout: 240_000 }, async () => {
    const down = nodes[0]!
    const other = nodes[1]!
    // A backlog on the node that goes down: accepted (202, synced), not delivered (the sink fails).
    sink.mode = "fail"
    const first = await oneEach(TENANTS)
    const theirs = first.filter((a) => a.port === down.port)
    expect(theirs.length).toBeGreaterThan(0)
    const tenants = theirs.map((a) => a.tenant)
    const backlog = theirs.map((a) => String(a.body["id"]))
    // One of its tenants has an endpoint: it lives on that node alone.
    const withEndpoint = tenants[0]!
    const endpoint = await createEndpoint(proxy.url, withEndpoint, `${sink.url}/endpoints/down-${withEndpoint}`)
    expect(endpoint).toMatchObject({ status: 201, port: down.port })

    // Down without a drain.
    await down.child!.kill()
    down.child = undefined
    sink.mode = "ok"

    // Its tenants' hooks are refused by the proxy (502), never acknowledged by the other node; the other node's tenants go on.
    const downAt = Date.now()
    const meanwhile = await eachOnce([...tenants, ...tenants])
    for (const a of meanwhile) {
      expect(a.status, a.tenant).toBe(502)
      expect(a.tried, a.tenant).toEqual([`127.0.0.1:${down.port}`])
    }
    const others = first.filter((a) => a.port === other.port).map((a) => a.tenant)
    const fine = await oneEach(others)
    for (const a of fine) expect(a, a.tenant).toMatchObject({ status: 202, port: other.port })
    // The other node never saw the down node's tenants.
    for (const t of tenants) expect((await tenantStats(other.url, t)).status, t).toBe(404)
    // The backlog waits on the stopped node's disk: nothing of it was delivered by anyone.
    for (const id of backlog) for (const s of SINKS) expect(sink.delivered(s, id), id).toEqual([])

    // Back at the same address on the same data: every hook it acknowledged is delivered, by it, and its tenants' new hooks reach their endpoint.
    await startNode(down, sink.url)
    console.log(`fleet: a down node's tenants were refused for ${Date.now() - downAt} ms (${meanwhile.length} of their hooks answered 502; the other node's ${fine.length} all 202)`)
    await awaitDelivered(backlog)
    for (const id of backlog) for (const s of SINKS) expect(sink.delivered(s, id).every((r) => r.node === down.name)).toBe(true)
    const back = await oneEach(tenants)
    for (const a of back) expect(a, a.tenant).toMatchObject({ status: 202, port: down.port })
    const backOf = back.find((a) => a.tenant === withEndpoint)!
    await eventually("the endpoint's hook", DELIVERY_MS, () =>
      sink.receipts.some((r) => r.sink === (`endpoints/down-${withEndpoint}` as never) && r.id === String(backOf.body["id"]) && r.status < 300)
    )
    await awaitDelivered(back.map((a) => String(a.body["id"])))
  })

  it("a hook is delivered once per sink across the fleet", { timeout: 180_000 }, async () => {
    sink.mode = "ok"
    // A node counts a delivery when its outcome commits, after the sink has answered: the earlier
    // tests' last deliveries may be counted late, so the counters are read once they hold still.
    const start = await steadyCounters()
    const answers = await oneEach(TENANTS.flatMap((t) => [t, t]))
    const ids = answers.map((a) => String(a.body["id"]))
    const acceptedBy = new Map(answers.map((a) => [String(a.body["id"]), nodeAt(a.port)]))
    await awaitDelivered(ids)
    // Each node's delivered count grows by exactly the hooks it accepted, per sink: no node
    // delivers another node's rows, and nothing is delivered twice.
    const expected = (n: Node) => answers.filter((a) => a.port === n.port).length
    await eventually("the delivered counters", DELIVERY_MS, async () => {
      for (const n of nodes) for (const s of SINKS) if ((await delivered(n, s)) - start.get(`${n.name} ${s}`)! < expected(n)) return false
      return true
    })
    // Time for a second delivery to show, were there one.
    await new Promise((r) => setTimeout(r, 2_000))
    for (const id of ids) {
      for (const s of SINKS) {
        const got = sink.delivered(s, id)
        expect(got.length, `${s} ${id}`).toBe(1)
        expect(got[0]!.node).toBe(acceptedBy.get(id)!.name)
      }
    }
    for (const n of nodes) for (const s of SINKS) expect((await delivered(n, s)) - start.get(`${n.name} ${s}`)!, `${n.name} ${s}`).toBe(expected(n))
  })

  it("an endpoint created through the proxy receives its tenant's hooks", { timeout: 180_000 }, async () => {
    sink.mode = "ok"
    const tenants = Array.from({ length: 8 }, (_, i) => `endpoint-tenant-${i}`)
    // Half of them send a hook first (to the sinks only: no endpoint yet); the others have sent none.
    const seen = tenants.slice(0, 4)
    const first = await oneEach(seen)
    const home = new Map(first.map((a) => [a.tenant, a.port]))
    await awaitDelivered(first.map((a) => String(a.body["id"])))
    const pathOf = (t: string) => `endpoints/${t}`

    // Each endpoint is created through the proxy, on the node its tenant's hooks go to.
    const endpointIds = new Map<string, string>()
    for (const t of tenants) {
      const created = await createEndpoint(proxy.url, t, `${sink.url}/${pathOf(t)}`)
      expect(created.status, JSON.stringify(created)).toBe(201)
      expect(created.body).toMatchObject({ tenant: t, url: `${sink.url}/${pathOf(t)}` })
      if (home.has(t)) expect(created.port, t).toBe(home.get(t))
      home.set(t, created.port)
      endpointIds.set(t, String(created.body["id"]))
    }
    for (const t of tenants) {
      const listed = await endpointsOf(proxy.url, t)
      expect(listed).toMatchObject({ status: 200, port: home.get(t) })
      expect((listed.body["items"] as Array<{ id: string }>).map((e) => e.id)).toEqual([endpointIds.get(t)])
      // The other node has no endpoint for the tenant (nor, here, the tenant at all).
      const other = nodes.find((n) => n.port !== home.get(t))!
      const there = await endpointsOf(other.url, t)
      if (there.status === 200) expect(there.body["items"], `${t} on ${other.name}`).toEqual([])
      else expect(there, `${t} on ${other.name}`).toMatchObject({ status: 404, body: { error: "unknown_tenant" } })
    }

    // Their hooks through the proxy, to the tenant's node; each goes to both sinks and to its tenant's endpoint.
    const answers = await oneEach(tenants.flatMap((t) => [t, t, t]))
    for (const a of answers) expect(a.port, a.tenant).toBe(home.get(a.tenant))
    const idsOf = (t: string) => answers.filter((a) => a.tenant === t).map((a) => String(a.body["id"]))
    const received = (t: string) => sink.receipts.filter((r) => r.sink === pathOf(t) && r.status < 300).map((r) => r.id)
    await awaitDelivered(answers.map((a) => String(a.body["id"])))
    await eventually("every endpoint's hooks", DELIVERY_MS, () => tenants.every((t) => idsOf(t).every((id) => received(t).includes(id))))
    // Time for a stray delivery to show, were there one.
    await new Promise((r) => setTimeout(r, 2_000))
    for (const t of tenants) {
      // Exactly its own tenant's hooks sent since the endpoint exists, each once.
      expect([...received(t)].sort(), t).toEqual(idsOf(t).sort())
      const holder = nodeAt(home.get(t)!)
      for (const id of idsOf(t)) for (const s of SINKS) expect(sink.delivered(s, id).map((r) => r.node), `${s} ${id}`).toEqual([holder.name])
      // Delivered by the node that holds the tenant: its own attempt log has each of them.
      const log = await fetch(`${holder.url}/v1/tenants/${t}/endpoints/${endpointIds.get(t)}/deliveries?limit=100`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` }
      })
      expect(log.status).toBe(200)
      const attempts = ((await log.json()) as { items: Array<{ hookId: string; status: number }> }).items
      for (const id of idsOf(t)) expect(attempts.filter((x) => x.hookId === id && x.status < 300).length, `${t} ${id}`).toBe(1)
    }
    // No other request reached an endpoint's path (but the node-down test's own endpoint, `endpoints/down-…`).
    const paths = new Set(tenants.map(pathOf))
    for (const r of sink.receipts) {
      if (!(SINKS as ReadonlyArray<string>).includes(r.sink) && !r.sink.startsWith("endpoints/down-")) expect(paths.has(r.sink), r.sink).toBe(true)
    }
  })
})
