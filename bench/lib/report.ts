/**
 * What every bench prints: a table, then ONE summary line
 * `PASS|FAIL <name>: ...` (the gate reads it), then the exit code 0/1.
 * Also the common arguments (`--quick`) and the machine note (cores, load).
 */
import { readFileSync } from "node:fs"
import { cpus, loadavg } from "node:os"

/** `--quick`: smaller sizes for development; the gate passes it through. */
export const quick = process.argv.includes("--quick")

/** A numeric `--name N` argument, or the default. */
export const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`)
  if (i < 0) return dflt
  const n = Number(process.argv[i + 1])
  if (!Number.isFinite(n)) throw new Error(`--${name} expects a number`)
  return n
}

/** The p-th percentile (0..100) of samples, nearest rank. */
export const percentile = (xs: ReadonlyArray<number>, p: number): number => {
  if (xs.length === 0) return NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!
}

export const fmt = (n: number, digits = 2): string =>
  Number.isFinite(n) ? n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits }) : String(n)

export const int = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : String(n))

export const mib = (bytes: number): string => `${fmt(bytes / 1024 / 1024, 1)} MiB`

/** Print rows as a left-aligned text table with a header rule. */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): void => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd()
  console.log(line(header))
  console.log(widths.map((w) => "-".repeat(w)).join("  "))
  for (const r of rows) console.log(line(r))
}

/** The machine's CPU time so far (/proc/stat's first line, clock ticks): all of it, and the steal. */
export const cpuTicks = (): { readonly total: number; readonly steal: number } | undefined => {
  try {
    // cpu user nice system idle iowait irq softirq steal guest guest_nice (guest time is inside user).
    const f = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number)
    return f.length === 8 && f.every(Number.isFinite) ? { total: f.reduce((a, b) => a + b, 0), steal: f[7]! } : undefined
  } catch {
    return undefined
  }
}

/** Taken when the bench's process loaded this module. */
const startTicks = cpuTicks()

/** The steal's share of the machine's CPU time between two `cpuTicks` readings; undefined where /proc/stat does not tell. */
export const stealBetween = (
  from: ReturnType<typeof cpuTicks>,
  to: ReturnType<typeof cpuTicks>
): number | undefined => (from === undefined || to === undefined || to.total <= from.total ? undefined : (to.steal - from.steal) / (to.total - from.total))

/**
 * The share of the machine's CPU time the hypervisor gave to others since the bench started
 * (steal), or undefined where /proc/stat does not tell. On a shared virtual machine this is
 * the noise the ratio rules face; a bench at a high steal share ran beside a busy neighbour.
 */
export const stealShare = (): number | undefined => stealBetween(startTicks, cpuTicks())

/** `2 cores, load 11.8 10.2 9.7, steal 4.2%`: printed with every figure (the machine is shared). */
export const machine = (): string => {
  const steal = stealShare()
  return `${cpus().length} cores, load ${loadavg().map((l) => l.toFixed(1)).join(" ")}${steal === undefined ? "" : `, steal ${fmt(100 * steal, 1)}%`}`
}

export const log = (message: string): void => {
  console.log(`[${new Date().toISOString().slice(11, 19)}] ${message}`)
}

/** Print the summary line and exit: 0 on PASS, 1 on FAIL. */
export const finish = (name: string, pass: boolean, detail: string): never => {
  console.log(`${pass ? "PASS" : "FAIL"} ${name}: ${detail} (${machine()})`)
  process.exit(pass ? 0 : 1)
}

/** Run a bench's main; an exception is a FAIL line too, so the gate always gets its summary. */
export const main = (name: string, run: () => Promise<void>): void => {
  run().catch((e: unknown) => {
    console.error(e)
    finish(name, false, `crashed: ${e instanceof Error ? e.message : String(e)}`)
  })
}
