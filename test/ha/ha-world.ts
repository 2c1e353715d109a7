/**
 * The world of the failover tests (issue 41): `ankusa serve` nodes on one PostgreSQL store, started
 * on loopback and signalled by their own PIDs; a sink that counts every delivery by `webhook-id`;
 * and a load that sends each hook to the nodes in order, moving on from a refused connection, a
 * timeout or a 503 (what the example proxy's `proxy_next_upstream error timeout http_503` does),
 * and records every 202 with the node that gave it.
 */
import { Context, Effect, Layer } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { join } from "node:path"
import { ROOT } from "../../bench/lib/serve-child.js"
import { layerPostgres } from "../../src/store/postgres.js"
import { Store } from "../../src/store/store.js"
import { type Acked, inspectStore } from "../support/crash-world.js"

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Poll `check` every 50 ms until it holds or `ms` pass. */
export const until = async (check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> => {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await check()) return true
    await sleep(50)
  }
  return check()
}

export const ADMIN_TOKEN = "ha-test-admin-token-0123456789"

/** Short lease timings, so a takeover by expiry fits a test. */
export const HA = { leaseMs: 3_000, renewMs: 500, pollMs: 200 }

export interface HaNode {
  readonly name: string
  readonly pid: number
  readonly url: string
  readonly child: ChildProcess
  readonly output: () => string
  readonly exited: Promise<number | null>
  readonly running: () => boolean
  readonly signal: (s: NodeJS.Signals) => void
}

export const nodeConfig = (dbUrl: string, sinkUrl: string) => ({
  sources: [{ id: "ha", tenant: { header: "x-tenant" }, routes: ["ok"] }],
  sinks: [{ name: "ok", url: `${sinkUrl}/ok`, timeoutMs: 2_000, concurrency: 16, retry: { delaysMs: [50, 100, 200, 400, 800], jitter: 0 } }],
  pipeline: { tickMs: 20, graceMs: 1_000 },
  gauges: { intervalMs: 1_000 },
  http: { demoSink: false },
  adminTokens: [{ name: "ops", token: ADMIN_TOKEN, tenants: "*" }],
  store: { kind: "postgres", postgres: { url: dbUrl, connectTimeoutMs: 2_000 } },
  ha: HA,
  log: { level: "info" }
})

/** `ankusa serve` as `name`; resolves once it listens (an active node or a standby: both answer /readyz). */
export const startNode = (dir: string, name: string, config: Record<string, unknown>, port = 0): Promise<HaNode> => {
  const file = join(dir, `${name}.json`)
  writeFileSync(file, JSON.stringify(config))
  const child = spawn(process.execPath, ["bin/ankusa.js", "serve", "--data-dir", join(dir, name), "--port", String(port)], {
    cwd: ROOT,
    env: { ...process.env, ANKUSA_CONFIG: file, ANKUSA_HTTP_PORT: "" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  child.stderr!.on("data", (d: Buffer) => (out += d.toString("utf8")))
  const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)))
  const running = () => child.exitCode === null && child.signalCode === null
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not listen within 60 s:\n${out}`)), 60_000)
    void exited.then((code) => reject(new Error(`${name} exited (${code ?? child.signalCode}) before it listened:\n${out}`)))
    child.stdout!.setEncoding("utf8")
    let lines = ""
    let listening = false
    child.stdout!.on("data", (d: string) => {
      out += d
      if (listening) return
      lines += d
      const line = lines.split("\n").find((l) => l.includes('"listening; booting"') && l.endsWith("}"))
      if (line === undefined) return
      listening = true
      clearTimeout(timer)
      const url = (JSON.parse(line) as { annotations: { address: string } }).annotations.address
      resolve({ name, pid: child.pid!, url, child, output: () => out, exited, running, signal: (s) => void (running() && child.kill(s)) })
    })
  })
}

/** A node under a service manager (deploy/ankusa.service restarts any exit but 0): started again at once on a non-zero exit. */
export interface Supervised {
  /** The node now running (the last one started). */
  readonly current: () => HaNode
  /** The exit codes of the nodes that exited on their own (not by `drain` or `stop`), in order (null: killed by a signal). */
  readonly exits: Array<number | null>
  /** What each of those nodes wrote, in the same order. */
  readonly outputs: Array<string>
  /** SIGTERM, as a service manager stops it (it drains), and no restart: nothing writes once it resolves. */
  readonly drain: () => Promise<void>
  readonly stop: () => Promise<void>
}

export const supervise = async (dir: string, name: string, config: Record<string, unknown>): Promise<Supervised> => {
  let node = await startNode(dir, name, config)
  let stopped = false
  const exits: Array<number | null> = []
  const outputs: Array<string> = []
  let restarting = Promise.resolve()
  const watch = (n: HaNode): void =>
    void n.exited.then((code) => {
      if (stopped) return
      exits.push(code)
      outputs.push(n.output())
      if (code === 0) return
      restarting = startNode(dir, name, config).then(
        (next) => {
          node = next
          if (stopped) return killNode(next)
          watch(next)
        },
        () => undefined
      )
    })
  watch(node)
  return {
    current: () => node,
    exits,
    outputs,
    drain: async () => {
      stopped = true
      await restarting
      node.signal("SIGTERM")
      await node.exited
    },
    stop: async () => {
      stopped = true
      await restarting
      await killNode(node)
    }
  }
}

/** SIGKILL if still running, and wait for the exit. */
export const killNode = async (n: HaNode) => {
  n.signal("SIGCONT")
  n.signal("SIGKILL")
  await n.exited
}

export const readyz = (n: HaNode): Promise<{ readonly status: number; readonly body: { readonly phase?: string } }> =>
  fetch(`${n.url}/readyz`, { signal: AbortSignal.timeout(2_000) })
    .then(async (r) => ({ status: r.status, body: (await r.json()) as { phase?: string } }))
    .catch(() => ({ status: 0, body: {} }))

export interface Sink {
  readonly url: string
  /** Deliveries by webhook-id (a count over 1 is a duplicate). */
  readonly seen: Map<string, number>
  readonly close: () => Promise<void>
}

/** `delayMs`: each answer waits this long (so that deliveries are always in flight under load). */
export const startSink = (delayMs = 0): Promise<Sink> =>
  new Promise((resolve) => {
    const seen = new Map<string, number>()
    const server: Server = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        const id = String(req.headers["webhook-id"])
        seen.set(id, (seen.get(id) ?? 0) + 1)
        if (delayMs === 0) res.writeHead(204).end()
        else setTimeout(() => res.writeHead(204).end(), delayMs)
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port
      resolve({
        url: `http://127.0.0.1:${port}`,
        seen,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })

export interface AckedBy extends Acked {
  readonly node: string
  readonly at: number
}

/** Loops sending hooks to `nodes()` in order until stopped; every 202 is recorded with its node and time. */
export const startLoad = (nodes: () => ReadonlyArray<HaNode>, acked: Array<AckedBy>, loops = 4) => {
  let running = true
  let n = 0
  const one = async () => {
    const tenant = `tenant-${n++ % 16}`
    for (const node of nodes()) {
      try {
        const r = await fetch(`${node.url}/v1/hooks/ha`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-tenant": tenant },
          body: JSON.stringify({ n, tenant }),
          signal: AbortSignal.timeout(1_000)
        })
        const text = await r.text()
        if (r.status === 202) {
          const { id, seq } = JSON.parse(text) as { id: string; seq: number }
          acked.push({ id, seq, tenant, node: node.name, at: Date.now() })
          return
        }
      } catch {
        // Refused, reset or timed out: the next node.
      }
    }
    await sleep(50)
  }
  const loop = async () => {
    while (running) await one()
  }
  const all = Array.from({ length: loops }, loop)
  return {
    stop: async () => {
      running = false
      await Promise.all(all)
    }
  }
}

/** Every acknowledged hook delivered (duplicates counted), ids unique, and the store's counters a fold of its rows. */
export const verify = (dbUrl: string, acked: ReadonlyArray<AckedBy>, sink: Sink) =>
  Effect.gen(function* () {
    const delivered = new Set(sink.seen.keys())
    const open = Effect.map(Layer.build(layerPostgres({ url: dbUrl })), Context.get(Store))
    const inspection = yield* Effect.scoped(inspectStore(open, acked, delivered, ["ok"]))
    const duplicates = acked.reduce((n, h) => n + Math.max(0, (sink.seen.get(h.id) ?? 0) - 1), 0)
    return {
      undelivered: acked.filter((h) => !delivered.has(h.id)).map((h) => h.id),
      reissued: acked.length - new Set(acked.map((h) => h.id)).size,
      duplicates,
      report: inspection.report,
      lost: inspection.lost
    }
  })
