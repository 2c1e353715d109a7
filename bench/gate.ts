/**
 * `npm run bench:gate` (issue 6; TEN-1 §12): every bench script in sequence,
 * each as a child process (its own heap, its own store, nothing shared), its
 * output passed through, then one line per bench: its summary line
 * `PASS|FAIL <name>: ...`. Exits 1 if any bench failed, printed no summary,
 * or outlived its time limit.
 *
 * Run: npm run bench:gate [-- --quick] [-- --only gauges-bench,memory]
 * `--quick` is passed on to every bench (smaller sizes, for development).
 */
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { machine } from "./lib/report.js"

/**
 * The benches, in the order they run. A missing optional script is skipped (and said so). `script`
 * and `args` run a bench's script with arguments under another name (its summary line's).
 */
export const BENCHES: ReadonlyArray<{ readonly name: string; readonly script?: string; readonly args?: ReadonlyArray<string>; readonly optional?: boolean }> = [
  { name: "cli-start" },
  { name: "gauges-bench" },
  { name: "dispatch-tick-bench" },
  { name: "ingest-bench" },
  { name: "delivery-bench" },
  { name: "trace-bench" },
  { name: "ingest-bench-postgres", script: "ingest-bench", args: ["--store", "postgres"] },
  { name: "delivery-bench-postgres", script: "delivery-bench", args: ["--store", "postgres"] },
  { name: "noisy-neighbour" },
  { name: "endpoint-fanout" },
  { name: "breaker-bench" },
  { name: "ordered-bench" },
  { name: "idle-after-drain" },
  { name: "migration-bench" },
  { name: "memory" },
  { name: "soak", optional: true }
]

/** A bench still running after this long is killed and counted as failed. */
export const BENCH_TIMEOUT_MS = 20 * 60_000

const SUMMARY = /^(PASS|FAIL) \S+: .*$/

const run = (name: string, args: ReadonlyArray<string>) =>
  new Promise<{ readonly code: number | null; readonly summary: string | undefined; readonly seconds: number }>((resolve) => {
    const started = performance.now()
    // node --import tsx rather than the tsx wrapper: signals and exit codes pass straight through.
    const child = spawn(process.execPath, ["--import", "tsx", join(import.meta.dirname, `${name}.ts`), ...args], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    let summary: string | undefined
    let buffered = ""
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (d: string) => {
      process.stdout.write(d)
      buffered += d
      const lines = buffered.split("\n")
      buffered = lines.pop()!
      for (const l of lines) if (SUMMARY.test(l)) summary = l
    })
    const timer = setTimeout(() => child.kill("SIGKILL"), BENCH_TIMEOUT_MS)
    child.on("exit", (code) => {
      clearTimeout(timer)
      if (SUMMARY.test(buffered)) summary = buffered
      resolve({ code, summary, seconds: (performance.now() - started) / 1000 })
    })
  })

const main = async () => {
  const quick = process.argv.includes("--quick")
  const onlyAt = process.argv.indexOf("--only")
  const only = onlyAt >= 0 ? new Set((process.argv[onlyAt + 1] ?? "").split(",")) : undefined
  const results: Array<{ readonly name: string; readonly ok: boolean; readonly line: string }> = []
  for (const b of BENCHES) {
    if (only !== undefined && !only.has(b.name)) continue
    const script = b.script ?? b.name
    if (!existsSync(join(import.meta.dirname, `${script}.ts`))) {
      results.push(
        b.optional === true
          ? { name: b.name, ok: true, line: `SKIP ${b.name}: bench/${script}.ts does not exist` }
          : { name: b.name, ok: false, line: `FAIL ${b.name}: bench/${script}.ts does not exist` }
      )
      continue
    }
    console.log(`\n=== ${b.name} (${machine()}) ===`)
    const r = await run(script, [...(b.args ?? []), ...(quick ? ["--quick"] : [])])
    const ok = r.code === 0 && r.summary?.startsWith("PASS") === true
    const line = r.summary ?? `FAIL ${b.name}: exited with ${r.code ?? "a signal"} and printed no summary line`
    results.push({ name: b.name, ok, line: `${line} [${r.seconds.toFixed(0)} s]` })
  }
  console.log(`\n=== bench gate (${machine()}) ===`)
  for (const r of results) console.log(r.line)
  const failed = results.filter((r) => !r.ok).length
  console.log(failed === 0 ? `bench gate: all ${results.length} passed` : `bench gate: ${failed} of ${results.length} failed`)
  process.exit(failed === 0 ? 0 : 1)
}

void main()
