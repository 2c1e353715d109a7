/**
 * The world of the fleet tests: two real nodes (`node bin/ankusa.js serve`
 * children, each with its own data directory, hence its own node id, on a
 * fixed loopback port so it can come back at the same address), one sink
 * server that both nodes deliver to (two sinks, `orders` and `audit`, told
 * apart by path; each node's sinks send `x-fleet-node` with the node's name,
 * so every delivery says which node made it; tenants' endpoints are other
 * paths on it), and the requests the tests send.
 */
import * as net from "node:net"
import { createServer } from "node:http"
import { type ServeChild, startServe } from "../../bench/lib/serve-child.js"

export const SINKS = ["orders", "audit"] as const
export type SinkName = (typeof SINKS)[number]
/** The shared source of deploy/nginx.conf: its tenant comes from this header. */
export const SOURCE = "shop"
export const TENANT_HEADER = "X-Tenant"
export const ADMIN_TOKEN = "fleet-test-admin-token-0123456789"
/** Retries every second, 60 attempts: rows wait (scheduled) while the sink fails and never go dead in a test. */
const RETRY = { delaysMs: Array.from({ length: 60 }, () => 1_000), jitter: 0 }

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** A free loopback port (bound and released; the node binds it again). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
  })

export interface Receipt {
  /** The request's path without its leading `/`: a sink's name, or a tenant endpoint's path. */
  readonly sink: SinkName
  readonly id: string
  /** `x-fleet-node`: the node that made the call. */
  readonly node: string
  /** `x-fleet-generation`: the configuration the node called with (set by the reload test). */
  readonly generation: string
  readonly status: number
}

export interface Sink {
  readonly url: string
  /** `ok` answers 204, `fail` 503 (the row is retried). */
  mode: "ok" | "fail"
  readonly receipts: Array<Receipt>
  /** 2xx receipts of `id` at `sink`. */
  readonly delivered: (sink: SinkName, id: string) => ReadonlyArray<Receipt>
  readonly close: () => Promise<void>
}

export const startSink = (): Promise<Sink> =>
  new Promise((resolve) => {
    const receipts: Array<Receipt> = []
    const server = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        const status = sink.mode === "ok" ? 204 : 503
        receipts.push({
          sink: (req.url ?? "").slice(1) as SinkName,
          id: String(req.headers["webhook-id"]),
          node: String(req.headers["x-fleet-node"]),
          generation: String(req.headers["x-fleet-generation"] ?? ""),
          status
        })
        res.writeHead(status).end()
      })
    })
    const sink: Sink = {
      url: "",
      mode: "ok",
      receipts,
      delivered: (name, id) => receipts.filter((r) => r.sink === name && r.id === id && r.status < 300),
      close: () =>
        new Promise((done) => {
          server.closeAllConnections()
          server.close(() => done())
        })
    }
    server.listen(0, "127.0.0.1", () => {
      ;(sink as { url: string }).url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`
      resolve(sink)
    })
  })

/**
 * A node's configuration: the shared source of deploy/nginx.conf, routed to both sinks and to
 * its tenant's endpoints (loopback allowed, so an endpoint may point at the sink server).
 */
export const nodeConfig = (name: string, sinkUrl: string, headers: Record<string, string> = {}) => ({
  http: { host: "127.0.0.1", demoSink: false },
  pipeline: { graceMs: 2_000 },
  // The tests fail the sink on purpose; a breaker that opened would hold rows back 30 s (docs/delivery.md "Failing destinations").
  breaker: { openMs: 500 },
  sources: [{ id: SOURCE, tenant: { header: TENANT_HEADER }, routes: [...SINKS, "tenant-endpoints"] }],
  sinks: SINKS.map((s) => ({ name: s, url: `${sinkUrl}/${s}`, headers: { "x-fleet-node": name, ...headers }, retry: RETRY })),
  endpoints: { allowNetworks: ["127.0.0.0/8"] },
  adminTokens: [{ name: "ops", token: ADMIN_TOKEN, tenants: "*" }]
})

export interface Node {
  readonly name: string
  readonly port: number
  readonly dataDir: string
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  /** Defined while the node runs. */
  child: ServeChild | undefined
}

export const startNode = async (node: Node, sinkUrl: string): Promise<void> => {
  node.child = await startServe({ dataDir: node.dataDir, port: node.port, config: nodeConfig(node.name, sinkUrl) })
}

export interface Answer {
  readonly status: number
  readonly body: Record<string, unknown>
  /** The port of the node that answered: the last address of `X-Ankusa-Node`. */
  readonly port: number
  /** Every address `X-Ankusa-Node` lists (more than one when nginx passed the request on). */
  readonly tried: ReadonlyArray<string>
}

const answerOf = async (r: Response): Promise<Answer> => {
  const tried = (r.headers.get("x-ankusa-node") ?? "").split(",").map((s) => s.trim()).filter((s) => s !== "")
  const last = tried.at(-1) ?? ""
  const text = await r.text()
  // nginx's own answers (a 502 while a node is down) are HTML: kept as `raw`.
  const body = text === "" ? {} : text.startsWith("{") ? (JSON.parse(text) as Record<string, unknown>) : { raw: text }
  return { status: r.status, body, port: Number(last.split(":").at(-1)), tried }
}

/** One hook for `tenant` through the proxy (or straight at a node). */
export const ingest = async (base: string, tenant: string, headers: Record<string, string> = {}): Promise<Answer> =>
  answerOf(
    await fetch(`${base}/v1/hooks/${SOURCE}`, {
      method: "POST",
      headers: { "content-type": "application/json", [TENANT_HEADER]: tenant, ...headers },
      body: JSON.stringify({ tenant, at: Date.now() })
    })
  )

/** `GET /v1/tenants/:tenant` with the admin token, at a node or through the proxy. */
export const tenantStats = async (base: string, tenant: string): Promise<Answer> =>
  answerOf(await fetch(`${base}/v1/tenants/${encodeURIComponent(tenant)}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }))

/** `POST /v1/tenants/:tenant/endpoints` with the admin token, at a node or through the proxy. */
export const createEndpoint = async (base: string, tenant: string, url: string): Promise<Answer> =>
  answerOf(
    await fetch(`${base}/v1/tenants/${encodeURIComponent(tenant)}/endpoints`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ url, description: `fleet test: ${tenant}` })
    })
  )

/** `GET /v1/tenants/:tenant/endpoints` with the admin token, at a node or through the proxy. */
export const endpointsOf = async (base: string, tenant: string): Promise<Answer> =>
  answerOf(await fetch(`${base}/v1/tenants/${encodeURIComponent(tenant)}/endpoints`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }))

/** Rows a tenant has on a node, whatever their state. */
export const rowsOf = (b: Record<string, unknown>): number =>
  Number(b["pending"]) + Number(b["scheduled"]) + Number(b["inflight"]) + Number(b["dead"])

/** The node part of a hook id `h_<node>_<seq>`. */
export const nodePart = (id: unknown): string => String(id).split("_")[1] ?? ""

export const metricsOf = async (node: Node): Promise<string> => (await fetch(`${node.url}/metrics`)).text()

/** `fn` over `items`, `concurrency` at a time, results in order. */
export const mapLimit = async <A, B>(items: ReadonlyArray<A>, concurrency: number, fn: (a: A) => Promise<B>): Promise<Array<B>> => {
  const out: Array<B> = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      out[i] = await fn(items[i]!)
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker))
  return out
}

/** Poll `test` every 100 ms until it holds, at most `ms`. */
export const eventually = async (what: string, ms: number, test: () => boolean | Promise<boolean>): Promise<void> => {
  const deadline = Date.now() + ms
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await sleep(100)
  }
}

/** Every id delivered (a 2xx) to every sink. */
export const allDelivered = (sink: Sink, ids: Iterable<string>) => {
  const ok = new Set(sink.receipts.filter((r) => r.status < 300).map((r) => `${r.sink} ${r.id}`))
  for (const id of ids) for (const s of SINKS) if (!ok.has(`${s} ${id}`)) return false
  return true
}
