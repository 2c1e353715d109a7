/**
 * The start line (issue 16; docs/deployment.md "Boot and shutdown"): printed
 * at every log level, so that the port `--port 0` picked can always be read,
 * with the address, data directory, store format and tenant count.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { runAnkusa } from "./support/node-child.js"

describe("start line", () => {
  it("the start line is printed whatever the log level", { timeout: 120_000 }, async () => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-start-line-"))
    try {
      const runs: Array<{ readonly args: Array<string>; readonly env: Record<string, string> }> = [
        { args: [], env: { ANKUSA_LOG_LEVEL: "warning" } },
        { args: ["--log-level", "error"], env: {} },
        { args: [], env: { ANKUSA_LOG_LEVEL: "none" } }
      ]
      for (const [i, run] of runs.entries()) {
        const dataDir = path.join(base, String(i))
        const node = runAnkusa([...run.args, "serve", "--data-dir", dataDir, "--port", "0"], run.env)
        const line = await node.waitFor((l) => l.message === "ankusa serving", 60_000, "the start line")
        const address = String(line.annotations["address"])
        expect(address).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
        expect(line.annotations).toMatchObject({ dataDir, format: 3, tenants: 0 })
        expect((await fetch(`${address}/healthz`)).status).toBe(200)
        node.child.kill("SIGTERM")
        expect((await node.exited(30_000)).code).toBe(0)
        // Below the level nothing else was printed: the start line is the one exception.
        expect(node.lines.map((l) => l.message), JSON.stringify(run)).toEqual(["ankusa serving"])
      }
    } finally {
      fs.rmSync(base, { recursive: true, force: true })
    }
  })
})
