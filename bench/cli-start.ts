/**
 * cli-start (issue 12): `ankusa --version` and `ankusa --help` wall time, each a fresh
 * process of the compiled build (`npm run build` first), against a bare `node -e ""` start
 * measured in the same run, alternating. PASS: the median of each command under
 * CLI_START_TARGET_MS. Printed beside it: what the CLI adds to a bare Node start.
 * Run: npm run build && npx tsx bench/cli-start.ts [--quick] [--rounds N]
 */
import { spawnSync } from "node:child_process"
import { join } from "node:path"
import { arg, finish, fmt, machine, main, percentile, quick, table } from "./lib/report.js"

export const CLI_START_TARGET_MS = 300

const BIN = join(import.meta.dirname, "..", "bin", "ankusa.js")
const rounds = arg("rounds", quick ? 5 : 15)

const wall = (args: ReadonlyArray<string>): number => {
  const started = performance.now()
  const r = spawnSync(process.execPath, args, { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } })
  const ms = performance.now() - started
  if (r.status !== 0) throw new Error(`${args.join(" ")} exited ${r.status}: ${r.stderr}`)
  return ms
}

main("cli-start", async () => {
  console.log(`cli-start: ${machine()}; ${rounds} rounds`)
  const cases = [
    { name: "node -e ''", args: ["-e", ""] },
    { name: "ankusa --version", args: [BIN, "--version"] },
    { name: "ankusa --help", args: [BIN, "--help"] }
  ]
  const samples = cases.map(() => [] as Array<number>)
  wall(cases[1]!.args) // warm the page cache once
  for (let r = 0; r < rounds; r++) cases.forEach((c, i) => samples[i]!.push(wall(c.args)))
  const p50 = samples.map((s) => percentile(s, 50))
  table(
    ["command", "p50 ms", "p90 ms", "max ms", "over bare node p50"],
    cases.map((c, i) => [c.name, fmt(p50[i]!, 0), fmt(percentile(samples[i]!, 90), 0), fmt(Math.max(...samples[i]!), 0), i === 0 ? "" : `${fmt(p50[i]! - p50[0]!, 0)} ms`])
  )
  const worst = Math.max(p50[1]!, p50[2]!)
  finish(
    "cli-start",
    worst < CLI_START_TARGET_MS,
    `ankusa --version p50 ${fmt(p50[1]!, 0)} ms, --help ${fmt(p50[2]!, 0)} ms (target < ${CLI_START_TARGET_MS}); bare node ${fmt(p50[0]!, 0)} ms`
  )
})
