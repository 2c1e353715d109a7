/**
 * A full disk (issue 16; docs/deployment.md "A full disk"): a real `ankusa serve`
 * child with its store on a small tmpfs that this test mounts (so it needs
 * root; elsewhere it is skipped with the reason printed) and fills with a
 * filler file, then with hooks. Every ingest after the first failed write
 * answers 503 with Retry-After and a JSON error, promptly; the store gauges
 * and /readyz say so. After the filler is deleted and the node restarted,
 * every hook acknowledged with 202 reaches a real sink on 127.0.0.1, and
 * ingest takes hooks again.
 */
import { describe, expect, it } from "@effect/vitest"
import { execFileSync, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { type NodeChild, runAnkusa, servingAddress, sleep } from "./support/node-child.js"

const TOKEN = "disk-full-token-0123456789"
const MiB = 1024 * 1024
/**
 * What the filler leaves free on the 64 MiB tmpfs. RocksDB has already preallocated its WAL by
 * then, so the store takes a few hundred hooks before a write fails; once the filler is deleted,
 * recovery has the room to replay the WAL and flush it.
 */
const LEFT_FREE = 4 * MiB
const BODY_BYTES = 32 * 1024

const metric = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? NaN)

/** A sink that records every delivery's webhook-id and body. */
const startSink = async () => {
  const received = new Map<string, string>()
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      received.set(String(req.headers["webhook-id"]), Buffer.concat(chunks).toString("utf8"))
      res.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { received, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/in`, close: () => server.close() }
}

const ingest = (url: string, i: number, body: string) =>
  fetch(`${url}/v1/hooks/in`, {
    method: "POST",
    headers: { "x-tenant": `t${i % 3}`, "content-type": "application/json" },
    body,
    signal: AbortSignal.timeout(10_000)
  }).then(async (r) => ({ status: r.status, retryAfter: r.headers.get("retry-after"), type: r.headers.get("content-type"), body: (await r.json()) as any }))

const stop = async (node: NodeChild) => {
  node.child.kill("SIGTERM")
  return node.exited(60_000)
}

describe("disk full", () => {
  it("disk full answers 503 and loses nothing acked", { timeout: 300_000 }, async (ctx) => {
    if (process.getuid?.() !== 0) {
      const why = "skipped: mounting the small tmpfs this test fills needs root (CI runs as root)"
      console.warn(why)
      return ctx.skip(why)
    }
    const base = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-disk-full-"))
    const mnt = path.join(base, "mnt")
    fs.mkdirSync(mnt)
    const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt], { encoding: "utf8" })
    if (mounted.status !== 0) {
      const why = `skipped: mount -t tmpfs failed (${mounted.stderr.trim()})`
      console.warn(why)
      fs.rmSync(base, { recursive: true, force: true })
      return ctx.skip(why)
    }
    const sink = await startSink()
    const nodes: Array<NodeChild> = []
    try {
      const config = path.join(base, "ankusa.json")
      fs.writeFileSync(
        config,
        JSON.stringify({
          http: { demoSink: false },
          // The reserve off: this test is what happens when RocksDB itself runs out (test/disk-reserve.test.ts is the reserve).
          store: { minFreeBytes: 0 },
          sources: [{ id: "in", tenant: { header: "x-tenant" }, routes: ["sink"] }],
          sinks: [{ name: "sink", url: sink.url }],
          adminTokens: [{ name: "ops", token: TOKEN, tenants: "*" }],
          gauges: { intervalMs: 100 },
          pipeline: { graceMs: 1_000 }
        })
      )
      const data = path.join(mnt, "data")
      const serve = () => {
        const node = runAnkusa(["serve", "--config", config, "--data-dir", data, "--port", "0"])
        nodes.push(node)
        return node
      }
      const first = serve()
      const url = await servingAddress(first)

      // The filler leaves LEFT_FREE bytes; the test deletes it later to free the space.
      const filler = path.join(mnt, "filler")
      const free = () => fs.statfsSync(mnt).bavail * fs.statfsSync(mnt).bsize
      fs.writeFileSync(filler, Buffer.alloc(Math.max(0, free() - LEFT_FREE), 1))

      // Ingest until a write fails, then on: every answer after it is a prompt 503 with Retry-After.
      const acked = new Map<string, string>()
      let firstFailure = -1
      const after: Array<Awaited<ReturnType<typeof ingest>>> = []
      for (let i = 0; i < 5_000 && after.length < 30; i++) {
        const body = JSON.stringify({ i, pad: randomBytes(BODY_BYTES / 2).toString("hex") })
        const started = Date.now()
        const r = await ingest(url, i, body)
        expect(Date.now() - started, `ingest ${i} took too long`).toBeLessThan(10_000)
        if (firstFailure < 0 && r.status === 202) acked.set(r.body.id, body)
        else {
          if (firstFailure < 0) firstFailure = i
          after.push(r)
        }
      }
      console.log(`disk full after ${acked.size} hooks acked (${firstFailure} sent); ${(free() / MiB).toFixed(1)} MiB free`)
      expect(firstFailure, "the store never filled").toBeGreaterThan(0)
      expect(acked.size).toBeGreaterThan(10)
      for (const r of after) {
        expect(r.status).toBe(503)
        expect(r.retryAfter).toBe("5")
        expect(r.type).toContain("application/json")
        expect(r.body).toEqual({ error: "unavailable", message: "the store's disk is full; nothing was acknowledged" })
      }

      // The gauge and /readyz say so. (A failed WAL append is not a RocksDB background error, so
      // ankusa_store_background_errors may stay 0: ankusa_store_writable is the Writer's own word.)
      const metrics = await fetch(`${url}/metrics`).then((r) => r.text())
      expect(metric(metrics, "ankusa_store_writable")).toBe(0)
      const ready = await fetch(`${url}/readyz`)
      expect([ready.status, await ready.json()]).toEqual([503, { ready: false, phase: "store_unavailable" }])
      // Reads still answer: the admin API shows what the node holds.
      expect((await fetch(`${url}/v1/tenants/t0`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200)

      // Free the space. The store does not take writes again by itself (RocksDB keeps its error until
      // reopened; this binding offers no resume): a restart does, and every acked hook is delivered.
      fs.rmSync(filler)
      await sleep(1_000)
      expect((await ingest(url, 0, "{}")).status).toBe(503)
      const stopped = await stop(first)
      expect(stopped.code, first.stderr()).toBe(0)
      const second = serve()
      const url2 = await servingAddress(second)
      expect((await fetch(`${url2}/readyz`)).status).toBe(200)
      expect(metric(await fetch(`${url2}/metrics`).then((r) => r.text()), "ankusa_store_writable")).toBe(1)
      const more = JSON.stringify({ more: true })
      const resumed = await ingest(url2, 0, more)
      expect(resumed.status).toBe(202)
      acked.set(resumed.body.id, more)
      for (let i = 0; i < 600 && [...acked.keys()].some((id) => !sink.received.has(id)); i++) await sleep(100)
      const missing = [...acked.keys()].filter((id) => !sink.received.has(id))
      expect(missing, `${missing.length} of ${acked.size} acked hooks never delivered`).toEqual([])
      for (const [id, body] of acked) expect(sink.received.get(id), id).toBe(body)
      const check = await fetch(`${url2}/v1/store/check`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } })
      expect(((await check.json()) as { corruptions: number }).corruptions).toBe(0)
      expect((await stop(second)).code).toBe(0)
    } finally {
      for (const n of nodes) n.kill()
      sink.close()
      for (let i = 0; i < 20 && spawnSync("umount", [mnt]).status !== 0; i++) await sleep(250)
      try {
        execFileSync("mountpoint", ["-q", mnt])
        console.warn(`could not unmount ${mnt}`)
      } catch {
        fs.rmSync(base, { recursive: true, force: true })
      }
    }
  })
})
