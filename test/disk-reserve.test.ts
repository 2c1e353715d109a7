/**
 * The disk reserve (issue 24; docs/deployment.md "A full disk"): a real
 * `ankusa serve` child with its store on a small tmpfs that this test mounts
 * (so it needs root; elsewhere it is skipped with the reason printed) and
 * fills with a filler file past `store.minFreeBytes`. Ingest answers 503
 * `disk_reserve` for every tenant and `/readyz` says why, while deliveries
 * and their settles go on; once the filler is deleted, ingest takes hooks
 * again in the same process.
 */
import { describe, expect, it } from "@effect/vitest"
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { type NodeChild, runAnkusa, servingAddress, sleep } from "./support/node-child.js"

const MiB = 1024 * 1024
const RESERVE = 16 * MiB
/** What the filler leaves free: under the reserve, with room for the store's settles. */
const LEFT_FREE = 8 * MiB

/** A sink that answers 503 until `healthy`, then 204, recording the webhook-ids it took. */
const startSink = async () => {
  const received = new Set<string>()
  const state = { healthy: false }
  const server = createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      if (!state.healthy) return void res.writeHead(503).end()
      received.add(String(req.headers["webhook-id"]))
      res.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { received, state, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/in`, close: () => server.close() }
}

const ingest = (url: string, tenant: string) =>
  fetch(`${url}/v1/hooks/in`, {
    method: "POST",
    headers: { "x-tenant": tenant, "content-type": "application/json" },
    body: JSON.stringify({ tenant, at: Date.now() }),
    signal: AbortSignal.timeout(10_000)
  }).then(async (r) => ({ status: r.status, retryAfter: r.headers.get("retry-after"), body: (await r.json()) as any }))

const until = async (what: string, ok: () => Promise<boolean>, ms = 15_000) => {
  const deadline = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`)
    await sleep(100)
  }
}

describe("disk reserve", () => {
  it("below the disk reserve ingest answers 503 and resumes without a restart", { timeout: 180_000 }, async (ctx) => {
    if (process.getuid?.() !== 0) {
      const why = "skipped: mounting the small tmpfs this test fills needs root (CI runs as root)"
      console.warn(why)
      return ctx.skip(why)
    }
    const base = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-disk-reserve-"))
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
    let node: NodeChild | undefined
    try {
      const config = path.join(base, "ankusa.json")
      fs.writeFileSync(
        config,
        JSON.stringify({
          store: { minFreeBytes: RESERVE },
          sources: [{ id: "in", tenant: { header: "x-tenant" }, routes: ["sink"] }],
          sinks: [{ name: "sink", url: sink.url, retry: { delaysMs: Array.from({ length: 50 }, () => 200) } }],
          pipeline: { graceMs: 1_000 }
        })
      )
      node = runAnkusa(["serve", "--config", config, "--data-dir", path.join(mnt, "data"), "--port", "0"])
      const url = await servingAddress(node)
      const pid = node.child.pid

      // Tenant a's hooks are queued; its sink fails them for now, so they wait for retries.
      const acked = new Set<string>()
      for (let i = 0; i < 20; i++) {
        const r = await ingest(url, "a")
        expect(r.status).toBe(202)
        acked.add(r.body.id)
      }

      // Fill the filesystem past the reserve.
      const filler = path.join(mnt, "filler")
      const free = () => fs.statfsSync(mnt).bavail * fs.statfsSync(mnt).bsize
      fs.writeFileSync(filler, Buffer.alloc(Math.max(0, free() - LEFT_FREE), 1))
      expect(free()).toBeLessThan(RESERVE)

      // Within a poll or two: 503 disk_reserve for every tenant, and /readyz says why.
      await until("ingest answers disk_reserve", async () => (await ingest(url, "b")).status === 503)
      for (const tenant of ["a", "b", "c"]) {
        const r = await ingest(url, tenant)
        expect([r.status, r.retryAfter, r.body.error]).toEqual([503, "10", "disk_reserve"])
        expect(r.body.message).toMatch(/^the store's disk has \d+ bytes free, under its reserve of 16777216$/)
      }
      const ready = await fetch(`${url}/readyz`)
      expect([ready.status, await ready.json()]).toEqual([503, { ready: false, phase: "disk_reserve" }])
      const metrics = await fetch(`${url}/metrics`).then((r) => r.text())
      expect(Number(/^ankusa_ingest_requests_total\{outcome="disk_reserve"\} (\S+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(4)
      expect(Number(/^ankusa_store_free_bytes (\S+)$/m.exec(metrics)?.[1])).toBeLessThan(RESERVE)

      // Deliveries and their settles go on under the reserve: the sink recovers and takes every acked hook.
      sink.state.healthy = true
      await until("every acked hook delivered under the reserve", async () => [...acked].every((id) => sink.received.has(id)), 30_000)
      expect((await ingest(url, "a")).status).toBe(503)

      // Space back: ingest resumes by itself, in the same process.
      fs.rmSync(filler)
      await until("ingest takes hooks again", async () => (await ingest(url, "b")).status === 202)
      expect((await fetch(`${url}/readyz`)).status).toBe(200)
      const more = await ingest(url, "c")
      expect(more.status).toBe(202)
      await until("the new hook delivered", async () => sink.received.has(more.body.id))
      expect(node.child.pid).toBe(pid)
      expect(node.child.exitCode).toBeNull()
      node.child.kill("SIGTERM")
      expect((await node.exited(60_000)).code).toBe(0)
    } finally {
      node?.kill()
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
