/** A real `ankusa serve` child (node-child.ts's, the compiled CLI) on a fresh data dir, for tests that scrape or call it. */
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { runAnkusa, servingAddress } from "./node-child.js"

/** How long `stop` waits for the drain before the child is SIGKILLed and `stop` fails. */
const STOP_MS = 60_000

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
  const node = runAnkusa(["serve", "--config", file, "--data-dir", dir, "--port", "0"])
  const stop = async () => {
    if (node.child.exitCode === null && node.child.signalCode === null) node.child.kill("SIGTERM")
    try {
      await node.exited(STOP_MS)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  try {
    return { url: await servingAddress(node, timeoutMs), dir, child: node.child, stdout: node.stdout, stop }
  } catch (e) {
    await stop().catch(() => undefined)
    throw e
  }
}
