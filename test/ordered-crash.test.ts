/**
 * Ordered delivery across a crash (issue 44; docs/delivery.md "Ordered delivery"): a real
 * `ankusa serve` child on RocksDB in a temp dir is killed with SIGKILL while its ordered sink
 * holds the head of a key open, then restarted on the same data dir. The head is sent again
 * (at least once), still before its successors, and no successor is ever attempted before it.
 */
import { afterEach, describe, expect, it } from "vitest"
import { createServer, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { leftovers, runAnkusa, servingAddress, sleep } from "./support/node-child.js"

const left = leftovers(afterEach)

interface Call {
  readonly k: string
  readonly n: number
  status: number | undefined
}

/** An ordered sink on 127.0.0.1: `hold(k, n, attempt)` keeps that call open (never answered); the rest answer 204. */
const startSink = async (hold: (k: string, n: number, attempt: number) => boolean) => {
  const calls: Array<Call> = []
  const open = new Map<string, number>()
  let maxOpen = 0
  const held: Array<ServerResponse> = []
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const { k, n } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { k: string; n: number }
      const attempt = calls.filter((c) => c.k === k && c.n === n).length + 1
      const call: Call = { k, n, status: undefined }
      calls.push(call)
      open.set(k, (open.get(k) ?? 0) + 1)
      maxOpen = Math.max(maxOpen, open.get(k)!)
      // A call is open until answered or until its connection goes (the killed node's).
      let closed = false
      const close = () => {
        if (closed) return
        closed = true
        open.set(k, open.get(k)! - 1)
      }
      res.on("close", close)
      if (hold(k, n, attempt)) {
        held.push(res)
        return
      }
      call.status = 204
      res.writeHead(204)
      res.end()
    })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`
  return {
    url,
    calls,
    maxOpen: () => maxOpen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      })
  }
}

const post = async (base: string, k: string, n: number) => {
  const res = await fetch(`${base}/v1/hooks/in`, { method: "POST", headers: { "content-type": "application/json", "x-order": k }, body: JSON.stringify({ k, n }) })
  if (res.status !== 202) throw new Error(`ingest answered ${res.status}: ${await res.text()}`)
}

const until = async (what: string, f: () => boolean, ms = 60_000) => {
  const deadline = Date.now() + ms
  while (!f()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(20)
  }
}

describe("ordered delivery: crash", () => {
  it("order holds across a kill -9 with the head in flight", { timeout: 240_000 }, async () => {
    // Before the kill: the first attempt of k/1 is held open. After: every call is answered.
    let crashed = false
    const sink = await startSink((k, n, attempt) => !crashed && k === "k" && n === 1 && attempt === 1)
    left.closers.push(sink)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-ordered-crash-"))
    left.dirs.push(dir)
    const config = path.join(dir, "ankusa.json")
    fs.writeFileSync(
      config,
      JSON.stringify({
        sources: [{ id: "in", tenant: "acme", routes: ["o"], orderingKey: { header: "x-order" } }],
        sinks: [{ name: "o", url: sink.url, timeoutMs: 120_000, concurrency: 8, ordered: true, retry: { delaysMs: [50, 50, 50], jitter: 0 } }],
        http: { demoSink: false },
        pipeline: { tickMs: 20 },
        log: { level: "info" }
      })
    )
    const data = path.join(dir, "data")
    const serve = () => {
      const node = runAnkusa(["serve", "--config", config, "--data-dir", data, "--port", "0"])
      left.children.push(node)
      return node
    }

    let node = serve()
    let url = await servingAddress(node)
    for (let n = 1; n <= 5; n++) await post(url, "k", n)
    for (let n = 1; n <= 3; n++) await post(url, "other", n)
    await until("k/1 held open and the other key delivered", () => sink.calls.some((c) => c.k === "k") && sink.calls.filter((c) => c.k === "other" && c.status === 204).length === 3)
    await sleep(200)
    // The head is in flight: nothing after it was attempted.
    expect(sink.calls.filter((c) => c.k === "k").map((c) => c.n)).toEqual([1])
    node.child.kill("SIGKILL")
    await node.exited(30_000)
    crashed = true

    node = serve()
    url = await servingAddress(node)
    await node.waitFor((l) => l.message === "recovered inflight rows", 30_000, "inflight recovery")
    await until("k delivered", () => sink.calls.filter((c) => c.k === "k" && c.status === 204).length === 5)
    const k = sink.calls.filter((c) => c.k === "k")
    // The head was sent again (at least once), still first; then its successors, one each, in order.
    expect(k.map((c) => c.n)).toEqual([1, 1, 2, 3, 4, 5])
    expect(k.filter((c) => c.status === 204).map((c) => c.n)).toEqual([1, 2, 3, 4, 5])
    expect(sink.maxOpen()).toBe(1)

    // Drained, stopped: the store's ordering state is clean (no head, nothing waiting) and its counters agree.
    node.child.kill("SIGTERM")
    await node.exited(60_000)
    const check = runAnkusa(["store", "check", "--data-dir", data])
    const exit = await check.exited(120_000)
    expect(exit.code, check.stdout() + check.stderr()).toBe(0)
  })
})
