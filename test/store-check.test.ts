/**
 * `store check` as an operator runs it (issue 16): the compiled CLI on the
 * shipped fixtures before and after `store migrate` (the format 2 fixture's
 * hook-less rows are a documented leftover, exit 0 with a note; a hook lost
 * under another tenant is corruption, exit 1), and on a live node through
 * `POST /v1/store/check`, under ingest load.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as K from "../src/domain/keys.js"
import { del } from "../src/domain/ops.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import * as Archive from "../src/store/tarball.js"
import { ROOT, runAnkusa, servingAddress } from "./support/node-child.js"

const FIXTURE_V2 = path.join(ROOT, "test", "fixtures", "store-v2.tar.zst")
const FIXTURE_V3 = path.join(ROOT, "test", "fixtures", "store-v3.tar.zst")
const GLOBAL = "global-token-0123456789"
const SCOPED = "acme-token-0123456789ab"

const temp = () => fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-store-check-"))

const cli = async (...args: Array<string>) => {
  const node = runAnkusa(args)
  const exit = await node.exited(120_000)
  return { code: exit.code, stdout: node.stdout(), stderr: node.stderr() }
}

const unpack = (file: string, dataDir: string) => Effect.runPromise(Archive.unpack(file, path.join(dataDir, "store")))

const defaultOrd = (dataDir: string) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(makeRocksDbStore(path.join(dataDir, "store"), { commitThread: "main" }), (s) =>
        Effect.map(s.get("tenants", K.tenantOrdKey("default")), (v) => K.decodeU32(v!))
      )
    )
  )

describe("store check", () => {
  it("store check passes the migrated v2 fixture", { timeout: 180_000 }, async () => {
    const base = temp()
    try {
      // Before migration: the format 2 store is checked as format 2 (and left so), exit 0 with the note.
      const v2 = path.join(base, "v2")
      await unpack(FIXTURE_V2, v2)
      const before = await cli("store", "check", "--data-dir", v2)
      expect(before.code, before.stdout + before.stderr).toBe(0)
      expect(before.stdout).toContain("leftover obligation_without_hook family=archive seq=14 (format2_orphan)")
      expect(before.stdout).toContain("leftover row_without_hook family=deliveries seq=14 (format2_orphan)")
      expect(before.stdout).toMatch(/^note: format2_orphan: /m)
      expect(before.stdout).toMatch(/^verdict: ok; 2 leftover\(s\)/m)
      const dry = await cli("store", "migrate", "--dry-run", "--data-dir", v2)
      expect(dry.stdout).toContain("2 -> 3")

      // After migration: the same rows, now filed under tenant default, with the note naming the path.
      const migrated = await cli("store", "migrate", "--data-dir", v2)
      expect(migrated.code, migrated.stderr).toBe(0)
      const after = await cli("store", "check", "--data-dir", v2)
      expect(after.code, after.stdout + after.stderr).toBe(0)
      const ord = await defaultOrd(v2)
      expect(after.stdout).toMatch(/^store check: ok \(format 3, 4 tenants\)$/m)
      expect(after.stdout).toContain(`leftover obligation_without_hook family=archive seq=14 ord=${ord} (migrated_orphan)`)
      expect(after.stdout).toMatch(new RegExp(`^leftover row_without_hook family=(due|inflight|dead) seq=14 ord=${ord} \\(migrated_orphan\\)$`, "m"))
      expect(after.stdout).toMatch(/^note: migrated_orphan: filed under tenant default by the 2 -> 3 migration/m)
      expect(after.stdout).toMatch(/^verdict: ok; 2 leftover\(s\)/m)

      // The format 3 fixture: nothing at all.
      const v3 = path.join(base, "v3")
      await unpack(FIXTURE_V3, v3)
      const clean = await cli("store", "check", "--data-dir", v3)
      expect(clean.code, clean.stdout + clean.stderr).toBe(0)
      expect(clean.stdout).toMatch(/^lifecycle check: ok /m)
      expect(clean.stdout).toMatch(/^verdict: ok$/m)

      // A hook lost under another tenant (acme's seq 1) is corruption: exit 1, not a leftover.
      await Effect.runPromise(
        Effect.scoped(
          Effect.flatMap(makeRocksDbStore(path.join(v3, "store"), { commitThread: "main" }), (s) =>
            s.write([del("hooks", K.hookKey(1))], { sync: true })
          )
        )
      )
      const lost = await cli("store", "check", "--data-dir", v3)
      expect(lost.code).toBe(1)
      expect(lost.stdout).toMatch(/^row_without_hook family=due seq=1 ord=\d+$/m)
      expect(lost.stdout).toMatch(/^obligation_without_hook family=archive seq=1 ord=\d+$/m)
      expect(lost.stdout).not.toContain("leftover row_without_hook family=due seq=1")
      expect(lost.stderr).toMatch(/difference\(s\) that mean corruption/)
    } finally {
      fs.rmSync(base, { recursive: true, force: true })
    }
  })

  it("store check runs against a live node", { timeout: 180_000 }, async () => {
    const base = temp()
    const config = path.join(base, "ankusa.json")
    fs.writeFileSync(
      config,
      JSON.stringify({
        sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["demo"] }],
        sinks: [{ name: "demo", url: "{self}/_demo/sink" }],
        adminTokens: [
          { name: "ops", token: GLOBAL, tenants: "*" },
          { name: "acme", token: SCOPED, tenants: ["acme"] }
        ]
      })
    )
    const data = path.join(base, "data")
    const node = runAnkusa(["serve", "--config", config, "--data-dir", data, "--port", "0"])
    try {
      const url = await servingAddress(node)
      const ingest = (i: number) =>
        fetch(`${url}/v1/hooks/shop`, { method: "POST", headers: { "x-tenant": `t${i % 7}` }, body: `{"i":${i}}` }).then((r) => r.status)
      const check = (token: string | undefined) =>
        fetch(`${url}/v1/store/check`, { method: "POST", headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }).then(
          async (r) => ({ status: r.status, body: (await r.json()) as any })
        )
      // 2,000 hooks over 7 tenants, 20 at a time, so that a check takes long enough to overlap writes.
      for (let i = 0; i < 2_000; i += 20) {
        expect(new Set(await Promise.all(Array.from({ length: 20 }, (_, j) => ingest(i + j))))).toEqual(new Set([202]))
      }

      // The CLI cannot open a store the node holds; it says how to check it instead.
      const locked = await cli("store", "check", "--data-dir", data)
      expect(locked.code).toBe(1)
      expect(locked.stderr).toMatch(/open by a running node; check it through the node: POST \/v1\/store\/check/)

      expect((await check(undefined)).status).toBe(401)
      const scoped = await check(SCOPED)
      expect([scoped.status, scoped.body.error]).toEqual([403, "forbidden"])

      // While hooks arrive and are delivered (4 senders): every pass reads a moving store, and no check
      // reports corruption; a difference one pass saw and the next did not is counted as unconfirmed.
      let load = true
      let sent = 0
      const loaders = Array.from({ length: 4 }, () =>
        (async () => {
          while (load) expect(await ingest(10_000 + sent++)).toBe(202)
        })()
      )
      const busy = []
      for (let i = 0; i < 5; i++) busy.push(await check(GLOBAL))
      load = false
      await Promise.all(loaders)
      for (const b of busy) {
        expect(b.status, JSON.stringify(b.body)).toBe(200)
        expect(b.body, JSON.stringify(b.body.differences)).toMatchObject({ ok: true, format: 3, corruptions: 0 })
      }
      console.log(`live checks under load: ${sent} hooks sent during 5 checks; passes ${busy.map((b) => b.body.passes)}, unconfirmed ${busy.map((b) => b.body.unconfirmed)}`)

      const quiet = await check(GLOBAL)
      expect(quiet.status).toBe(200)
      expect(quiet.body).toMatchObject({ ok: true, format: 3, corruptions: 0, leftovers: 0, differences: [], notes: [] })
      expect(quiet.body.report).toMatch(/^store check: ok \(format 3, 7 tenants\)$/m)
      expect(quiet.body.report).toMatch(/^verdict: ok$/m)
    } finally {
      node.child.kill("SIGTERM")
      await node.exited(30_000).catch(() => undefined)
      fs.rmSync(base, { recursive: true, force: true })
    }
  })
})
