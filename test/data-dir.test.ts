/**
 * The data directory at boot (issue 16): a real `ankusa serve` child on a data
 * dir it cannot use answers one `config error at dataDir (…)` line and exit 1
 * fast, without a stack trace or a `stopped` line; permission denied is never
 * `StoreLocked`; SIGTERM and SIGINT stop the process in every boot phase,
 * a running migration included.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { checkDataDir } from "../src/config/data-dir.js"
import * as Fixture from "../src/queue/format/fixture.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import { runAnkusa, servingAddress, sleep } from "./support/node-child.js"

const temp = () => fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-data-dir-"))
const isRoot = process.getuid?.() === 0

/** `serve --data-dir dir`, expected to refuse it: exit 1, one stderr line, nothing on stdout. */
const refused = async (dir: string) => {
  const node = runAnkusa(["serve", "--data-dir", dir, "--port", "0"])
  const exit = await node.exited(10_000)
  return { ...exit, stdout: node.stdout(), stderr: node.stderr() }
}

const expectConfigError = (r: Awaited<ReturnType<typeof refused>>, dir: string, reason: RegExp) => {
  expect(r.code, r.stderr).toBe(1)
  const lines = r.stderr.trim().split("\n")
  expect(lines).toHaveLength(1)
  expect(lines[0]!.startsWith(`config error at dataDir (${dir}): `), lines[0]).toBe(true)
  expect(lines[0]).toMatch(reason)
  expect(r.stderr).not.toMatch(/\n\s+at |StoreLocked|Error:/)
  // Refused before anything started: no log line at all, so no `stopped` line before the error.
  expect(r.stdout).toBe("")
}

/** A store made (and closed) in `dataDir/store`, as a node that ran there leaves it. */
const makeStore = (dataDir: string) =>
  Effect.runPromise(Effect.scoped(makeRocksDbStore(path.join(dataDir, "store"), { commitThread: "main" })))

const chattr = (flag: "+i" | "-i", p: string): boolean =>
  spawnSync("chattr", [flag, p], { stdio: "ignore" }).status === 0

describe("data directory", () => {
  it("a data dir under /proc fails fast with a config error", { timeout: 60_000 }, async () => {
    const dir = `/proc/ankusa-${process.pid}/data`
    const r = await refused(dir)
    expectConfigError(r, dir, /on a proc filesystem \(\/proc\), which cannot hold a store$/)
    console.log(`/proc: exit ${r.code} in ${r.ms} ms (load ${os.loadavg()[0]!.toFixed(2)})`)
    expect(r.ms).toBeLessThan(2_000)

    // The other ways a path cannot be a data directory, each one line and exit 1.
    const base = temp()
    try {
      const file = path.join(base, "a-file")
      fs.writeFileSync(file, "")
      expectConfigError(await refused(file), file, /: is a file, not a directory$/)
      const under = path.join(file, "data")
      expectConfigError(await refused(under), under, new RegExp(`: ${file} is a file, not a directory$`))
      expectConfigError(await refused("/sys/ankusa-data"), "/sys/ankusa-data", /on a sysfs filesystem/)
      // A FIFO where the write probe goes: refused at once, no thread left waiting for a reader.
      const fifo = path.join(base, "fifo")
      fs.mkdirSync(path.join(fifo, "store"), { recursive: true })
      if (spawnSync("mkfifo", [path.join(fifo, "store", ".ankusa-write-probe")]).status === 0) {
        const r = await refused(fifo)
        expectConfigError(r, fifo, /: not a regular file \(create .*\.ankusa-write-probe\)$/)
        expect(r.ms).toBeLessThan(2_000)
      }
      // In process: the same check, and a good directory is created with its store directory.
      const good = path.join(base, "new", "data")
      await Effect.runPromise(checkDataDir(good, path.join(good, "store")))
      expect(fs.statSync(path.join(good, "store")).isDirectory()).toBe(true)
      expect(fs.readdirSync(path.join(good, "store"))).toEqual([])
    } finally {
      fs.rmSync(base, { recursive: true, force: true })
    }
  })

  it("an unwritable data dir is a config error, not StoreLocked", { timeout: 120_000 }, async (ctx) => {
    // Root ignores permission bits, so as root the directory is made immutable (chattr +i: even
    // root may not create a file in it); otherwise its mode is 0555. A node ran there before.
    const base = temp()
    const data = path.join(base, "data")
    const store = path.join(data, "store")
    await makeStore(data)
    const lock = (on: boolean) => (isRoot ? chattr(on ? "+i" : "-i", store) : (fs.chmodSync(store, on ? 0o555 : 0o755), true))
    try {
      if (!lock(true)) {
        const why = `skipped: chattr +i ${store} failed (the filesystem of ${os.tmpdir()} has no immutable attribute) and permissions do not stop root`
        console.warn(why)
        return ctx.skip(why)
      }
      const r = await refused(data)
      expectConfigError(r, data, /: permission denied \(create .*\.ankusa-write-probe\)$/)
      // The store wing on its own says the same, never "already open": its LOCK may not be opened for writing.
      lock(false)
      const lockFile = path.join(store, "LOCK")
      if (isRoot ? chattr("+i", lockFile) : (fs.chmodSync(lockFile, 0o444), true)) {
        const open = await Effect.runPromise(
          Effect.flip(Effect.scoped(makeRocksDbStore(store, { commitThread: "main" })))
        )
        expect(open._tag).toBe("StorePermissionDenied")
        expect(open.message).toMatch(/permission denied/)
        expectConfigError(await refused(data), data, /: permission denied \(open .*LOCK for writing\)$/)
        if (isRoot) chattr("-i", lockFile)
        else fs.chmodSync(lockFile, 0o644)
      }
      // A read-only filesystem (a tmpfs mounted read-only; needs root).
      if (isRoot) {
        const mnt = path.join(base, "ro")
        fs.mkdirSync(mnt)
        if (spawnSync("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt]).status === 0) {
          try {
            await makeStore(mnt)
            execFileSync("mount", ["-o", "remount,ro", mnt])
            expectConfigError(await refused(mnt), mnt, /: a read-only filesystem \(create .*\.ankusa-write-probe\)$/)
            const below = path.join(mnt, "more", "data")
            expectConfigError(await refused(below), below, /: a read-only filesystem \(mkdir .*more\)$/)
          } finally {
            spawnSync("umount", [mnt])
          }
        } else console.warn("read-only case skipped: mount -t tmpfs failed")
      }
    } finally {
      lock(false)
      fs.rmSync(base, { recursive: true, force: true })
    }
  })

  it("SIGTERM during boot stops the process", { timeout: 180_000 }, async () => {
    const base = temp()
    try {
      // 1. At once: before or while the runtime loads; the process ends either way.
      const early = runAnkusa(["serve", "--data-dir", path.join(base, "early"), "--port", "0"])
      await sleep(100)
      early.child.kill("SIGTERM")
      const e = await early.exited(10_000)
      expect(e.code === 0 || e.signal === "SIGTERM", JSON.stringify(e)).toBe(true)

      // 2. A format 2 store big enough that its migration takes seconds (50,000 hooks).
      const data = path.join(base, "v2")
      await Effect.runPromise(
        Effect.scoped(
          Effect.flatMap(makeRocksDbStore(path.join(data, "store"), { supportedFormat: 2, commitThread: "main" }), (s) =>
            Fixture.writeV2(s, Fixture.syntheticHooks({ hooks: 50_000, tenants: 1_000 }), { hooksPerBatch: 500 })
          )
        )
      )
      // SIGTERM, then SIGINT, each while /readyz says "migrating": the process exits 0 soon after.
      for (const signal of ["SIGTERM", "SIGINT"] as const) {
        const node = runAnkusa(["serve", "--data-dir", data, "--port", "0"])
        const booting = await node.waitFor((l) => l.message === "listening; booting", 60_000, "the listening line")
        const url = String(booting.annotations["address"])
        let phase = ""
        for (let i = 0; i < 400 && phase !== "migrating"; i++) {
          phase = await fetch(`${url}/readyz`).then((r) => r.json() as Promise<{ phase: string }>, () => ({ phase: "" })).then((b) => b.phase)
          if (phase !== "migrating") await sleep(10)
        }
        expect(phase, `${signal}: the migration was not seen running`).toBe("migrating")
        const sent = Date.now()
        node.child.kill(signal)
        const exit = await node.exited(15_000)
        console.log(`${signal} while migrating: exit ${exit.code} ${Date.now() - sent} ms after the signal`)
        expect(exit.code, node.stderr()).toBe(0)
        expect(Date.now() - sent).toBeLessThan(10_000)
        expect(node.lines.some((l) => l.message === "ankusa serving")).toBe(false)
      }
      // The interrupted migration resumes on the next boot and the node serves.
      const last = runAnkusa(["serve", "--data-dir", data, "--port", "0"])
      await servingAddress(last, 120_000)
      expect(last.lines.some((l) => String(l.message).startsWith("resuming store migration"))).toBe(true)
      last.child.kill("SIGTERM")
      expect((await last.exited(30_000)).code).toBe(0)
    } finally {
      fs.rmSync(base, { recursive: true, force: true })
    }
  })
})
