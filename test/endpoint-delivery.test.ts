/**
 * Tenant endpoints delivering (issue 27; docs/delivery.md "Tenant endpoints"): a real
 * `ankusa serve` child on RocksDB, a source routed to `tenant-endpoints`, endpoints created over
 * the API, and real sinks on 127.0.0.1 (loopback allowed through `endpoints.allowNetworks`).
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type NodeChild, runAnkusa, servingAddress } from "./support/node-child.js"
import { type RecordingSink as Sink, startRecordingSink as startSink, verifies } from "./support/record-sink.js"

const TOKEN = "endpoint-admin-token-0001"
const ACME_TOKEN = "endpoint-acme-token-0002"

interface Node {
  url: string
  child: NodeChild
  readonly dir: string
  readonly file: string
}

const nodes: Array<Node> = []
const sinks: Array<Sink> = []
afterEach(async () => {
  for (const n of nodes.splice(0)) {
    n.child.child.kill("SIGTERM")
    await n.child.exited(30_000).catch(() => n.child.kill())
    fs.rmSync(n.dir, { recursive: true, force: true })
  }
  for (const s of sinks.splice(0)) await s.close()
})

const configOf = (extra: Record<string, unknown> = {}) => ({
  sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["tenant-endpoints"], eventType: { header: "x-event-type" } }],
  sinks: [],
  adminTokens: [
    { name: "ops", token: TOKEN, tenants: "*" },
    { name: "acme", token: ACME_TOKEN, tenants: ["acme"] }
  ],
  endpoints: { allowNetworks: ["127.0.0.0/8"] },
  http: { demoSink: false },
  pipeline: { tickMs: 20 },
  log: { level: "info" },
  ...extra
})

const boot = async (node: Pick<Node, "dir" | "file">): Promise<Node> => {
  const child = runAnkusa(["serve", "--config", node.file, "--data-dir", node.dir, "--port", "0"])
  return { ...node, child, url: await servingAddress(child) }
}

const serve = async (config: object): Promise<Node> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-endpoints-"))
  const file = path.join(dir, "ankusa.json")
  fs.writeFileSync(file, JSON.stringify(config))
  const node = await boot({ dir, file })
  nodes.push(node)
  return node
}

/** SIGTERM, wait, and start again on the same data directory. */
const restart = async (node: Node) => {
  node.child.child.kill("SIGTERM")
  await node.child.exited(30_000)
  const again = await boot(node)
  node.child = again.child
  node.url = again.url
}

const sink = async () => {
  const s = await startSink()
  sinks.push(s)
  return s
}

const hook = (node: Node, tenant: string, body: object, eventType?: string) =>
  fetch(`${node.url}/v1/hooks/shop`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-tenant": tenant, ...(eventType === undefined ? {} : { "x-event-type": eventType }) },
    body: JSON.stringify(body)
  })

const api = async (node: Node, method: string, route: string, body?: unknown, token = TOKEN) => {
  const r = await fetch(`${node.url}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await r.text()
  return { status: r.status, body: (text === "" ? {} : JSON.parse(text)) as any }
}

const createEndpoint = async (node: Node, tenant: string, body: Record<string, unknown>, token = TOKEN) => {
  const r = await api(node, "POST", `/v1/tenants/${tenant}/endpoints`, body, token)
  expect(r.status, JSON.stringify(r.body)).toBe(201)
  return r.body as { id: string; secret: string }
}

/** The tenants exist on the node (a first hook each: an ordinal), as the API needs. */
const known = async (node: Node, tenants: ReadonlyArray<string>) => {
  for (const t of tenants) expect((await hook(node, t, { hello: t })).status).toBe(202)
}

const until = async (what: string, ok: () => boolean | Promise<boolean>, ms = 20_000) => {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

const bodies = (s: Sink, route: string) => s.got.filter((g) => g.path === route).map((g) => JSON.parse(g.body))
const idOf = async (r: Response) => ((await r.json()) as { id: string }).id

describe("tenant endpoints", () => {
  it("a tenant's endpoint receives that tenant's hooks and no other tenant's", { timeout: 60_000 }, async () => {
    const s = await sink()
    const node = await serve(configOf())
    await known(node, ["acme"])
    await createEndpoint(node, "acme", { url: `${s.url}/acme` })
    // globex registers its URL before its first event.
    await createEndpoint(node, "globex", { url: `${s.url}/globex` })
    for (let i = 0; i < 5; i++) {
      expect((await hook(node, "acme", { tenant: "acme", i })).status).toBe(202)
      expect((await hook(node, "globex", { tenant: "globex", i })).status).toBe(202)
    }
    await until("ten deliveries", () => s.got.length >= 10)
    await new Promise((r) => setTimeout(r, 200))
    expect(bodies(s, "/acme").map((b) => b.tenant)).toEqual(Array(5).fill("acme"))
    expect(bodies(s, "/globex").map((b) => b.tenant)).toEqual(Array(5).fill("globex"))
    // A tenant without endpoints: its hooks are taken and go nowhere.
    expect((await hook(node, "initech", { tenant: "initech" })).status).toBe(202)
    await new Promise((r) => setTimeout(r, 200))
    expect(s.got.length).toBe(10)
  })

  it("event type filters select endpoints, with prefixes", { timeout: 60_000 }, async () => {
    const s = await sink()
    const node = await serve(configOf())
    await known(node, ["acme"])
    await createEndpoint(node, "acme", { url: `${s.url}/invoices`, eventTypes: ["invoice.*"] })
    await createEndpoint(node, "acme", { url: `${s.url}/paid`, eventTypes: ["invoice.paid"] })
    await createEndpoint(node, "acme", { url: `${s.url}/all` })
    await createEndpoint(node, "acme", { url: `${s.url}/users`, eventTypes: ["user.created"] })
    const sent: Array<readonly [string | undefined, ReadonlyArray<string>]> = [
      ["invoice.paid", ["/all", "/invoices", "/paid"]],
      ["invoice.created", ["/all", "/invoices"]],
      ["invoice", ["/all"]],
      ["user.created", ["/all", "/users"]],
      [undefined, ["/all"]]
    ]
    for (const [type] of sent) expect((await hook(node, "acme", { type: type ?? null }, type)).status).toBe(202)
    const expected = sent.reduce((n, [, to]) => n + to.length, 0)
    await until(`${expected} deliveries`, () => s.got.length >= expected)
    await new Promise((r) => setTimeout(r, 200))
    expect(s.got.length).toBe(expected)
    for (const [type, to] of sent) {
      const at = s.got.filter((g) => JSON.parse(g.body).type === (type ?? null)).map((g) => g.path).sort()
      expect(at, String(type)).toEqual([...to])
    }
  })

  it("an endpoint created, changed or deleted over the API applies to the next hook without a restart and survives one", { timeout: 90_000 }, async () => {
    const s = await sink()
    const node = await serve(configOf())
    await known(node, ["acme"])
    const { id } = await createEndpoint(node, "acme", { url: `${s.url}/one` })
    expect((await hook(node, "acme", { n: 1 })).status).toBe(202)
    await until("the first delivery", () => bodies(s, "/one").length === 1)
    expect((await api(node, "PATCH", `/v1/tenants/acme/endpoints/${id}`, { url: `${s.url}/two`, headers: { "x-v": "2" } })).status).toBe(200)
    expect((await hook(node, "acme", { n: 2 })).status).toBe(202)
    await until("the second delivery at the new url", () => bodies(s, "/two").length === 1)
    expect(s.got.find((g) => g.path === "/two")!.headers["x-v"]).toBe("2")
    await restart(node)
    expect((await api(node, "GET", `/v1/tenants/acme/endpoints/${id}`)).body).toMatchObject({ id, url: `${s.url}/two` })
    expect((await hook(node, "acme", { n: 3 })).status).toBe(202)
    await until("the third delivery after the restart", () => bodies(s, "/two").length === 2)
    expect((await api(node, "DELETE", `/v1/tenants/acme/endpoints/${id}`)).status).toBe(200)
    expect((await hook(node, "acme", { n: 4 })).status).toBe(202)
    await new Promise((r) => setTimeout(r, 300))
    expect(s.got.map((g) => JSON.parse(g.body).n)).toEqual([1, 2, 3])
  })

  it("a disabled endpoint gets no new hooks and its queued rows are handled as documented", { timeout: 90_000 }, async () => {
    const s = await sink()
    s.status = 500
    const node = await serve(configOf())
    await known(node, ["acme"])
    const { id } = await createEndpoint(node, "acme", { url: `${s.url}/down` })
    const queued = await idOf(await hook(node, "acme", { n: "queued" }))
    // Its first attempt failed: the row waits for its retry (the default schedule's 5 s, ±20%).
    await until("the first attempt", () => s.got.length === 1)
    expect((await api(node, "PATCH", `/v1/tenants/acme/endpoints/${id}`, { disabled: true, disabledReason: "receiver down" })).status).toBe(200)
    expect((await hook(node, "acme", { n: "new" })).status).toBe(202)
    // The queued row comes due and goes to the DLQ (reason: the endpoint is disabled); the new hook never fanned out to it.
    await until(
      "the queued row in the DLQ",
      async () => (await api(node, "GET", "/v1/dlq?tenant=acme")).body.items.some((i: any) => i.id === queued),
      15_000
    )
    expect(node.child.stdout()).toMatch(/row dead-lettered.*reason\W{1,6}endpoint disabled: receiver down/)
    expect(s.got.length).toBe(1)
    // Enabled again, replay brings the row back, and it is delivered.
    s.status = 204
    expect((await api(node, "PATCH", `/v1/tenants/acme/endpoints/${id}`, { disabled: false })).status).toBe(200)
    const replay = await api(node, "POST", "/v1/dlq/replay", { tenant: "acme" })
    expect(replay.status).toBe(200)
    await until("the replayed delivery", () => s.got.some((g) => g.headers["webhook-id"] === queued && JSON.parse(g.body).n === "queued") && s.got.length === 2)
    expect(bodies(s, "/down").map((b) => b.n)).toEqual(["queued", "queued"])
  })

  it("a thousand tenants with an endpoint each keep the pool count within its bound", { timeout: 180_000 }, async () => {
    const s = await sink()
    const MAX_POOLS = 20
    const node = await serve(configOf({ endpoints: { allowNetworks: ["127.0.0.0/8"], maxPools: MAX_POOLS }, log: { level: "warning" } }))
    const tenants = Array.from({ length: 1_000 }, (_, i) => `t${String(i).padStart(4, "0")}`)
    const each = async <A>(xs: ReadonlyArray<A>, f: (a: A) => Promise<void>) => {
      let next = 0
      await Promise.all(Array.from({ length: 16 }, async () => {
        while (next < xs.length) await f(xs[next++]!)
      }))
    }
    await each(tenants, async (t) => void expect((await hook(node, t, { first: true })).status).toBe(202))
    await each(tenants, async (t) => void (await createEndpoint(node, t, { url: `${s.url}/${t}` })))
    let most = 0
    let sampling = true
    const sampler = (async () => {
      while (sampling) {
        const text = await (await fetch(`${node.url}/metrics`)).text()
        const m = /^ankusa_endpoint_pools (\d+)/m.exec(text)
        if (m !== null) most = Math.max(most, Number(m[1]))
        await new Promise((r) => setTimeout(r, 10))
      }
    })()
    await each(tenants, async (t) => void expect((await hook(node, t, { tenant: t })).status).toBe(202))
    await until("a delivery to every tenant's endpoint", () => new Set(s.got.map((g) => g.path)).size === tenants.length, 120_000).catch((e) => { throw new Error(`${e.message}: ${new Set(s.got.map((g) => g.path)).size} of ${tenants.length}; pools at most ${most}`) })
    sampling = false
    await sampler
    // The bound held, and the load did reach it: this is not a test that cannot fail.
    expect(most).toBeLessThanOrEqual(MAX_POOLS)
    expect(most).toBeGreaterThanOrEqual(MAX_POOLS / 2)
    // Each pool holds at most its endpoint's concurrency (4) connections.
    expect(s.sockets.max).toBeLessThanOrEqual(MAX_POOLS * 4)
    for (const t of tenants) expect(bodies(s, `/${t}`).map((b) => b.tenant)).toEqual([t])
  })

  it("the test event is signed and reaches the endpoint", { timeout: 60_000 }, async () => {
    const s = await sink()
    const node = await serve(configOf())
    await known(node, ["acme"])
    const { id, secret } = await createEndpoint(node, "acme", { url: `${s.url}/test`, eventTypes: ["invoice.paid"] }, ACME_TOKEN)
    const sent = await api(node, "POST", `/v1/tenants/acme/endpoints/${id}/test`, undefined, ACME_TOKEN)
    expect(sent.status).toBe(202)
    await until("the test event", () => s.got.length === 1)
    const got = s.got[0]!
    expect(got.headers["webhook-id"]).toBe(sent.body.id)
    expect(JSON.parse(got.body)).toMatchObject({ type: "ankusa.test", endpoint: id, tenant: "acme" })
    expect(verifies(got, secret)).toBe(true)
    await until("the attempt in the endpoint's log", async () => (await api(node, "GET", `/v1/tenants/acme/endpoints/${id}/deliveries`, undefined, ACME_TOKEN)).body.items.length === 1)
    const log = await api(node, "GET", `/v1/tenants/acme/endpoints/${id}/deliveries`, undefined, ACME_TOKEN)
    expect(log.body.items[0]).toMatchObject({ hookId: sent.body.id, status: 204, outcome: "delivered", error: null })
  })

  it("an endpoint the guard refuses after a reload is never called", { timeout: 60_000 }, async () => {
    const s = await sink()
    const node = await serve(configOf())
    await known(node, ["acme"])
    const { id } = await createEndpoint(node, "acme", { url: `${s.url}/guarded` })
    expect((await hook(node, "acme", { n: 1 })).status).toBe(202)
    await until("the first delivery", () => s.got.length === 1)
    // Loopback no longer allowed: the next call is refused before any connection.
    fs.writeFileSync(node.file, JSON.stringify(configOf({ endpoints: { allowNetworks: [] } })))
    expect((await api(node, "POST", "/v1/config/reload")).status).toBe(200)
    const sockets = s.sockets.max
    expect((await hook(node, "acme", { n: 2 })).status).toBe(202)
    await until("the refused attempt in the log", async () =>
      (await api(node, "GET", `/v1/tenants/acme/endpoints/${id}/deliveries`)).body.items.some((a: any) => a.status === 0)
    )
    const refused = (await api(node, "GET", `/v1/tenants/acme/endpoints/${id}/deliveries`)).body.items[0]
    expect(refused.error).toMatch(/^unsafe_url: /)
    expect(s.got.length).toBe(1)
    expect(s.sockets.max).toBe(sockets)
    expect(await (await fetch(`${node.url}/metrics`)).text()).toMatch(/^ankusa_endpoint_unsafe_refused_total [1-9]/m)
  })
})

describe("secret rotation", () => {
  const SECRET_A = "whsec_" + Buffer.from("rotation-secret-a-0123456789").toString("base64")
  const SECRET_B = "whsec_" + Buffer.from("rotation-secret-b-0123456789").toString("base64")
  const OVERLAP_MS = 1_500

  it("during the rotation overlap both secrets verify, after it only the new one", { timeout: 60_000 }, async () => {
    const s = await sink()
    const node = await serve(configOf({ endpoints: { allowNetworks: ["127.0.0.0/8"], rotationOverlapMs: OVERLAP_MS } }))
    const { id } = await createEndpoint(node, "acme", { url: `${s.url}/rotating`, secret: SECRET_A })
    const rotated = await api(node, "POST", `/v1/tenants/acme/endpoints/${id}/secret/rotate`)
    expect(rotated.status).toBe(200)
    const fresh: string = rotated.body.secret
    expect(fresh).not.toBe(SECRET_A)
    expect(Date.parse(rotated.body.previousUntil) - Date.now()).toBeGreaterThan(0)
    expect((await hook(node, "acme", { n: 1 })).status).toBe(202)
    await until("the delivery in the overlap", () => s.got.length === 1)
    const during = s.got[0]!
    expect(String(during.headers["webhook-signature"]).split(" ")).toHaveLength(2)
    expect([verifies(during, SECRET_A), verifies(during, fresh)]).toEqual([true, true])
    await new Promise((r) => setTimeout(r, OVERLAP_MS + 200))
    expect((await hook(node, "acme", { n: 2 })).status).toBe(202)
    await until("the delivery after the overlap", () => s.got.length === 2)
    const after = s.got[1]!
    expect([verifies(after, SECRET_A), verifies(after, fresh)]).toEqual([false, true])
    // The rotation left its audit row; no answer but the rotation's shows a secret.
    const audit = await api(node, "GET", "/v1/audit?tenant=acme")
    expect(audit.body.items.some((i: any) => i.action === "endpoint.rotate")).toBe(true)
    expect(JSON.stringify((await api(node, "GET", `/v1/tenants/acme/endpoints/${id}`)).body)).not.toContain(SECRET_A.slice(6))
  })

  it("a shared sink's secret changed by reload signs with both during the overlap", { timeout: 60_000 }, async () => {
    const s = await sink()
    const shared = (secret: string) =>
      configOf({
        sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["shared"] }],
        sinks: [{ name: "shared", url: `${s.url}/shared`, secret }],
        endpoints: { allowNetworks: [], rotationOverlapMs: OVERLAP_MS }
      })
    const node = await serve(shared(SECRET_A))
    expect((await hook(node, "acme", { n: 1 })).status).toBe(202)
    await until("the first delivery", () => s.got.length === 1)
    expect([verifies(s.got[0]!, SECRET_A), verifies(s.got[0]!, SECRET_B)]).toEqual([true, false])
    fs.writeFileSync(node.file, JSON.stringify(shared(SECRET_B)))
    expect((await api(node, "POST", "/v1/config/reload")).status).toBe(200)
    expect((await hook(node, "acme", { n: 2 })).status).toBe(202)
    await until("the delivery in the overlap", () => s.got.length === 2)
    expect([verifies(s.got[1]!, SECRET_A), verifies(s.got[1]!, SECRET_B)]).toEqual([true, true])
    await new Promise((r) => setTimeout(r, OVERLAP_MS + 200))
    expect((await hook(node, "acme", { n: 3 })).status).toBe(202)
    await until("the delivery after the overlap", () => s.got.length === 3)
    expect([verifies(s.got[2]!, SECRET_A), verifies(s.got[2]!, SECRET_B)]).toEqual([false, true])
  })
})

describe("failing endpoints and operational events", () => {
  const OPS_SECRET = "whsec_" + Buffer.from("operations-secret-0123456789").toString("base64")
  const eventsAt = (s: Sink) => s.got.filter((g) => g.path === "/ops").map((g) => ({ g, e: JSON.parse(g.body) as Record<string, string | null> }))

  it("an endpoint failing past disableAfterMs is disabled with an audit row and an operational event", { timeout: 60_000 }, async () => {
    const s = await sink()
    const down = await sink()
    down.status = 500
    const node = await serve(
      configOf({
        sinks: [{ name: "ops", url: `${s.url}/ops`, secret: OPS_SECRET }],
        operations: { sink: "ops" },
        endpoints: { allowNetworks: ["127.0.0.0/8"], disableAfterMs: 1_000 },
        // Its breaker stays closed here: this is the disable rule alone.
        breaker: { minCalls: 1_000_000 }
      })
    )
    const { id } = await createEndpoint(node, "acme", { url: `${down.url}/failing` })
    // A hook every 300 ms: each first attempt fails at once; past a second of failures it is disabled.
    await until(
      "the endpoint disabled",
      async () => {
        await hook(node, "acme", { at: Date.now() })
        await new Promise((r) => setTimeout(r, 300))
        return (await api(node, "GET", `/v1/tenants/acme/endpoints/${id}`)).body.disabled === true
      },
      20_000
    )
    const e = (await api(node, "GET", `/v1/tenants/acme/endpoints/${id}`)).body
    expect(e.disabledReason).toMatch(/^failing without a success since /)
    const audit = (await api(node, "GET", "/v1/audit?tenant=acme")).body.items as Array<{ actor: string; action: string; params: { id: string } }>
    expect(audit.some((a) => a.actor === "system" && a.action === "endpoint.update" && a.params.id === id)).toBe(true)
    await until("the operational event", () => eventsAt(s).some(({ e }) => e["type"] === "endpoint.disabled"))
    const event = eventsAt(s).find(({ e }) => e["type"] === "endpoint.disabled")!.e
    expect(event).toMatchObject({ tenant: "acme", destination: `endpoint:${id}` })
    expect(event["reason"]).toMatch(/^failing without a success since /)
    // No new hook goes to it now.
    const calls = down.got.length
    expect((await hook(node, "acme", { after: true })).status).toBe(202)
    await new Promise((r) => setTimeout(r, 300))
    expect(down.got.length).toBe(calls)
  })

  it("operational events reach the operations sink signed, and survive a restart", { timeout: 90_000 }, async () => {
    const ops = await sink()
    ops.status = 503
    const down = await sink()
    down.status = 500
    const node = await serve(
      configOf({
        sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["down"] }],
        sinks: [
          { name: "ops", url: `${ops.url}/ops`, secret: OPS_SECRET, retry: { delaysMs: Array.from({ length: 30 }, () => 300), jitter: 0 } },
          { name: "down", url: `${down.url}/down`, retry: { delaysMs: Array.from({ length: 30 }, () => 100), jitter: 0 } }
        ],
        operations: { sink: "ops" },
        breaker: { minCalls: 4, openMs: 60_000 }
      })
    )
    for (let i = 0; i < 8; i++) expect((await hook(node, "acme", { i })).status).toBe(202)
    // The breaker of `down` opens: its event is acknowledged, then the operations sink refuses it once.
    await until("the event's first attempt", () => eventsAt(ops).length >= 1)
    const first = eventsAt(ops)[0]!
    await restart(node)
    const restarted = Date.now()
    ops.status = 204
    // The event acknowledged before the restart is delivered after it (the same webhook-id).
    await until(
      "the first event delivered after the restart",
      () => eventsAt(ops).some(({ g }) => g.at > restarted && g.headers["webhook-id"] === first.g.headers["webhook-id"]),
      30_000
    )
    const { g, e } = eventsAt(ops).find(({ g }) => g.at > restarted && g.headers["webhook-id"] === first.g.headers["webhook-id"])!
    expect(e).toMatchObject({ type: "sink.breaker_opened", tenant: null, destination: "down" })
    expect(typeof e["at"]).toBe("string")
    expect(verifies(g, OPS_SECRET)).toBe(true)
  })
})
