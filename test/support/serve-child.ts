/** A real `ankusa serve` child (the compiled CLI, bin/ankusa.js) on a fresh data dir, for tests that scrape or call it. */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const ROOT = path.resolve(import.meta.dirname, "../..")

export interface ServeChild {
  readonly url: string
  readonly dir: string
  readonly child: ChildProcess
  /** Everything the child printed on stdout so far. */
  readonly stdout: () => string
  /** SIGTERM, wait for the exit, remove the data dir. */
  readonly stop: () => Promise<void>
}

/** Starts a node with `config` (a config file's document) and resolves once its start line names the address. */
export const startServeChild = async (config: object, timeoutMs = 60_000): Promise<ServeChild> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-serve-"))
  const file = path.join(dir, "ankusa.json")
  fs.writeFileSync(file, JSON.stringify(config))
  const child = spawn(process.execPath, ["bin/ankusa.js", "serve", "--config", file, "--data-dir", dir, "--port", "0"], {
    cwd: ROOT,
    env: { ...process.env, ANKUSA_CONFIG: "", ANKUSA_HTTP_PORT: "" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  let err = ""
  child.stdout!.on("data", (c: Buffer) => (out += c.toString("utf8")))
  child.stderr!.on("data", (c: Buffer) => (err += c.toString("utf8")))
  const exited = new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", () => resolve())))
  const stop = async () => {
    if (child.exitCode === null) child.kill("SIGTERM")
    await exited
    fs.rmSync(dir, { recursive: true, force: true })
  }
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const url = /"message":"ankusa serving".*?"address":"(http:\/\/[^"]+)"/.exec(out)?.[1]
    if (url !== undefined) return { url, dir, child, stdout: () => out, stop }
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop()
      throw new Error(`serve did not start (exit ${child.exitCode}); stdout:\n${out}\nstderr:\n${err}`)
    }
    await new Promise((r) => setTimeout(r, 50))
  }
}
