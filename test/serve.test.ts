/**
 * `ankusa serve` as a user runs it: a real child process running the program
 * `npm start` runs (`node bin/ankusa.js serve`, the compiled build that
 * `npm test` makes first) with the built-in default configuration, a fresh
 * data directory and a free port, talked to over HTTP and stopped with
 * SIGTERM. test/platform.test.ts runs it behind `npm start` itself.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type LogLine, type NodeChild, runAnkusa } from "./support/node-child.js"

/** The exit code; a child still running after a minute is SIGKILLed and the wait fails. */
const exited = (node: NodeChild) => node.exited(60_000).then((e) => e.code)

const is = (message: string) => (l: LogLine) => l.message === message

describe("serve", () => {
  it("the default configuration serves", { timeout: 180_000 }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-serve-"))
    const log = runAnkusa(["serve", "--data-dir", dataDir, "--port", "0"])
    try {
      const serving = await log.waitFor(is("ankusa serving"), 120_000, "the start line")
      const a = serving.annotations
      expect(a["dataDir"]).toBe(dataDir)
      expect(a["format"]).toBe(3)
      expect(a["families"]).toContain("counters")
      expect(a["sources"]).toEqual(["demo"])
      const url = String(a["address"])
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
      expect(await fetch(`${url}/readyz`).then((r) => r.json())).toEqual({ ready: true, phase: "ready" })

      const accepted = await fetch(`${url}/v1/hooks/demo`, {
        method: "POST",
        body: '{"hello":"ankusa"}',
        headers: { "content-type": "application/json" }
      })
      expect(accepted.status).toBe(202)
      const { id } = (await accepted.json()) as { id: string }

      // The pipeline delivers it to the built-in demo sink, which logs the delivery's webhook-id.
      const received = await log.waitFor(
        (l) => l.message === "demo sink received a delivery" && l.annotations["webhookId"] === id,
        30_000,
        "the demo sink's delivery"
      )
      expect(received.annotations["contentType"]).toBe("application/json")
      expect(received.annotations["bytes"]).toBe(Buffer.byteLength('{"hello":"ankusa"}'))
      // The outcome is counted once the pipeline has the sink's answer: poll for it.
      const delivered = /ankusa_delivery_outcomes_total\{sink="demo",outcome="delivered"\} 1\n/
      let metrics = ""
      for (let i = 0; i < 100 && !delivered.test(metrics); i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, 100))
        metrics = await fetch(`${url}/metrics`).then((r) => r.text())
      }
      expect(metrics).toMatch(delivered)
      expect(metrics).toMatch(/ankusa_ingest_requests_total\{outcome="accepted"\} 1\n/)
      // The store's health and the process's memory, read once at boot and on their schedules after.
      expect(metrics).toMatch(/ankusa_store_write_stopped 0\n/)
      expect(metrics).toMatch(/ankusa_store_background_errors 0\n/)
      for (const kind of ["sst", "wal", "other"]) expect(metrics).toMatch(new RegExp(`ankusa_store_disk_bytes\\{kind="${kind}"\\} \\d+\n`))
      expect(metrics).toMatch(/ankusa_store_disk_bytes\{kind="wal"\} [1-9]\d*\n/)
      expect(metrics).toMatch(/ankusa_process_resident_memory_bytes [1-9]\d*\n/)
      expect(metrics).toMatch(/ankusa_process_heap_bytes\{kind="used"\} [1-9]\d*\n/)

      // SIGTERM drains and exits cleanly.
      process.kill(log.child.pid!, "SIGTERM")
      expect(await exited(log)).toBe(0)
      expect(log.lines.some(is("stopping: the gate is closed; draining"))).toBe(true)
      expect(log.lines.some(is("stopped"))).toBe(true)
      expect(log.stderr()).toBe("")
    } finally {
      log.kill()
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })
})

describe("serve configuration", () => {
  it("a bad configuration file is refused at start with a message naming the key", { timeout: 120_000 }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-serve-config-"))
    try {
      const file = path.join(dir, "ankusa.yaml")
      fs.writeFileSync(file, "sinks:\n  - name: a\n    url: ftp://example.com/in\nsources:\n  - id: s\n    routes: [a]\n")
      const child = runAnkusa(["serve", "--config", file, "--data-dir", dir])
      expect(await exited(child)).toBe(1)
      expect(child.stderr().trim()).toBe(`config error at sinks[0].url (file ${file}): expected an http:// or https:// URL`)
      // Refused before anything was opened.
      expect(fs.existsSync(path.join(dir, "store"))).toBe(false)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
