/**
 * Crash recovery of the pipeline: a real `ankusa serve` child process is
 * killed with SIGKILL while sink calls are in flight, then restarted on the
 * same data directory. Boot recovery returns the inflight rows to due and
 * every accepted hook reaches the sink; nothing is lost.
 */
import { describe, expect, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { createServer, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"

interface LogLine {
  readonly message: unknown
  readonly annotations: Record<string, unknown>
}

const root = path.resolve(import.meta.dirname, "..")
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Start `ankusa serve` in its own process group; resolve once it logs that it serves. */
const startServe = async (configPath: string, dataDir: string) => {
  const child = spawn(process.execPath, ["bin/ankusa.js", "serve", "--config", configPath, "--data-dir", dataDir, "--port", "0"], {
    cwd: root,
    env: { ...process.env, ANKUSA_CONFIG: "", ANKUSA_HTTP_PORT: "" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true
  })
  const lines: Array<LogLine> = []
  let buffer = ""
  let stderr = ""
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
  child.stdout!.on("data", (c: Buffer) => {
    buffer += c.toString("utf8")
    let nl: number
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const text = buffer.slice(0, nl)
      buffer = buffer.slice(nl + 1)
      try {
        lines.push(JSON.parse(text) as LogLine)
      } catch {
        // not a log line
      }
    }
  })
  const deadline = Date.now() + 120_000
  for (;;) {
    const serving = lines.find((l) => l.message === "ankusa serving")
    if (serving !== undefined) return { child, lines, url: String(serving.annotations["address"]) }
    if (child.exitCode !== null || Date.now() > deadline) {
      kill(child, "SIGKILL")
      throw new Error(`serve did not start (exit ${child.exitCode}); stderr:\n${stderr}\nlog:\n${lines.map((l) => JSON.stringify(l)).join("\n")}`)
    }
    await sleep(50)
  }
}

const kill = (child: ChildProcess, signal: NodeJS.Signals) => {
  try {
    process.kill(-child.pid!, signal)
  } catch {
    // already gone
  }
}

const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())))

const until = async (what: string, check: () => boolean | Promise<boolean>, ms: number) => {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

describe("recovery", () => {
  it("inflight rows are recovered on boot", { timeout: 300_000 }, async () => {
    // The sink: answers the first few deliveries, then holds every call open until `release`.
    const ANSWERED = 5
    let holding = true
    const held: Array<ServerResponse> = []
    const seen: Array<string> = []
    const delivered = new Set<string>()
    const sink = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        const id = String(req.headers["webhook-id"])
        seen.push(id)
        if (holding && seen.length > ANSWERED) {
          held.push(res)
          return
        }
        delivered.add(id)
        res.writeHead(204).end()
      })
    })
    await new Promise<void>((r) => sink.listen(0, "127.0.0.1", () => r()))
    const sinkUrl = `http://127.0.0.1:${(sink.address() as AddressInfo).port}/hook`

    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-recovery-"))
    const configPath = path.join(dataDir, "ankusa.json")
    const token = "recovery-test-token-0123456789"
    const CONCURRENCY = 4
    fs.writeFileSync(
      configPath,
      JSON.stringify({
        sources: [{ id: "in", tenant: { header: "x-tenant" }, routes: ["out"] }],
        sinks: [{ name: "out", url: sinkUrl, timeoutMs: 120_000, concurrency: CONCURRENCY, retry: { delaysMs: [100, 200, 400], jitter: 0 } }],
        adminTokens: [{ name: "ops", token, tenants: "*" }],
        http: { demoSink: false },
        pipeline: { tickMs: 20 },
        log: { level: "info" }
      })
    )

    let serve = await startServe(configPath, path.join(dataDir, "data"))
    try {
      // Accepted hooks (202 after the synced commit) across three tenants.
      const tenants = ["acme", "globex", "initech"]
      const accepted = new Map<string, string>()
      for (let i = 0; i < 30; i++) {
        const tenant = tenants[i % tenants.length]!
        const res = await fetch(`${serve.url}/v1/hooks/in`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-tenant": tenant },
          body: JSON.stringify({ i })
        })
        if (res.status !== 202) throw new Error(`ingest answered ${res.status}: ${await res.text()}`)
        const { id } = (await res.json()) as { id: string }
        accepted.set(id, tenant)
      }

      // Kill mid-delivery: a few answered, the sink's whole concurrency held open.
      await until("calls held open at the sink", () => held.length === CONCURRENCY, 60_000)
      const inflightAtKill = held.length
      kill(serve.child, "SIGKILL")
      await exited(serve.child)
      holding = false
      for (const res of held) res.destroy()

      serve = await startServe(configPath, path.join(dataDir, "data"))
      const recovered = serve.lines.find((l) => l.message === "recovered inflight rows")
      expect(recovered).toBeDefined()
      // At least the calls the kill cut were inflight rows; boot returned them to due.
      expect(Number(recovered!.annotations["rows"])).toBeGreaterThanOrEqual(inflightAtKill)

      await until("every accepted hook delivered", () => [...accepted.keys()].every((id) => delivered.has(id)), 120_000)
      // And the queue is empty again for every tenant: nothing pending, inflight or dead.
      const counters = async (tenant: string) =>
        (await fetch(`${serve.url}/v1/tenants/${tenant}`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.json())) as Record<
          string,
          number
        >
      await until(
        "the counters settle at zero",
        async () => {
          for (const t of tenants) {
            const c = await counters(t)
            if (c["pending"] !== 0 || c["scheduled"] !== 0 || c["inflight"] !== 0 || c["dead"] !== 0 || c["bytes"] !== 0) return false
          }
          return true
        },
        30_000
      )
      // Nothing reached the sink that was not accepted.
      expect(seen.every((id) => accepted.has(id))).toBe(true)

      kill(serve.child, "SIGTERM")
      await exited(serve.child)
    } finally {
      kill(serve.child, "SIGKILL")
      await new Promise<void>((r) => {
        sink.closeAllConnections()
        sink.close(() => r())
      })
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
