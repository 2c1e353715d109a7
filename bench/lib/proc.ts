/** Memory of a process from /proc/<pid>/status (Linux): resident now (VmRSS) and its peak (VmHWM), in bytes. */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { createServer, type AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface Memory {
  readonly rss: number
  readonly peak: number
}

const field = (status: string, name: string): number => {
  const m = new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)
  if (m === null) throw new Error(`no ${name} in /proc status`)
  return Number(m[1]) * 1024
}

export const memoryOf = (pid: number | "self"): Memory => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  return { rss: field(status, "VmRSS"), peak: field(status, "VmHWM") }
}

/** A fresh directory under the OS temp dir, and its removal. */
export const tempDir = (prefix: string): { readonly path: string; readonly remove: () => void } => {
  const path = mkdtempSync(join(tmpdir(), `ankusa-${prefix}-`))
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) }
}

/** The unit of /proc's CPU times (clock ticks per second; 100 on Linux). */
const USER_HZ = 100

/** utime and stime (ms) of a /proc `stat` file; the command name in it may hold spaces, so fields count from its ")". */
const statTimesMs = (path: string): { readonly user: number; readonly system: number } => {
  const stat = readFileSync(path, "utf8")
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return { user: (Number(f[11]) * 1000) / USER_HZ, system: (Number(f[12]) * 1000) / USER_HZ }
}

/** utime + stime (ms) of a /proc `stat` file. */
const statCpuMs = (path: string): number => {
  const t = statTimesMs(path)
  return t.user + t.system
}

/**
 * CPU time (user + system, ms) of a process so far: every thread, its main thread alone, and the
 * main thread's system time (in the kernel: socket reads and writes, epoll, the wake of another thread).
 */
export const cpuOf = (pid: number): { readonly all: number; readonly main: number; readonly mainSystem: number } => {
  const main = statTimesMs(`/proc/${pid}/task/${pid}/stat`)
  return { all: statCpuMs(`/proc/${pid}/stat`), main: main.user + main.system, mainSystem: main.system }
}

/**
 * Wait until the processes `pids` are idle together: their CPU (all threads) under `share` of one
 * core over a `windowMs` window (a store's compaction after a run has finished), or `timeoutMs`
 * passed. Resolves with the ms waited and whether they went idle.
 */
export const untilIdle = async (pids: ReadonlyArray<number>, o: { readonly windowMs?: number; readonly share?: number; readonly timeoutMs?: number } = {}) => {
  const windowMs = o.windowMs ?? 500
  const share = o.share ?? 0.05
  const timeoutMs = o.timeoutMs ?? 15_000
  const started = performance.now()
  const total = () => pids.reduce((n, pid) => n + cpuOf(pid).all, 0)
  for (;;) {
    const before = total()
    await new Promise((r) => setTimeout(r, windowMs))
    const idle = total() - before <= windowMs * share
    const waited = performance.now() - started
    if (idle || waited >= timeoutMs) return { waitedMs: waited, idle }
  }
}

/** CPU ms of this process's main thread (the event loop) so far; NaN off Linux. */
export const mainThreadCpuMs = (): number => {
  try {
    return statCpuMs(`/proc/self/task/${process.pid}/stat`)
  } catch {
    return Number.NaN
  }
}

/** CPU ms of each thread of this process so far, by thread id; empty off Linux. */
export const threadsCpuMs = (): Map<string, number> => new Map([...namedThreadsCpuMs()].map(([tid, t]) => [tid, t.ms]))

/** Each thread's name (/proc `comm`: "WorkerThread", "rocksdb:low", "V8Worker", ...) and CPU ms so far, by thread id, of this process or `pid`; empty off Linux. */
export const namedThreadsCpuMs = (pid: number | "self" = "self"): Map<string, { readonly name: string; readonly ms: number }> => {
  const out = new Map<string, { readonly name: string; readonly ms: number }>()
  if (!existsSync(`/proc/${pid}/task`)) return out
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      out.set(tid, { name: readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim(), ms: statCpuMs(`/proc/${pid}/task/${tid}/stat`) })
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out
}

/** A loopback port nothing listens on: bound, then closed (a destination that refuses connections). */
export const closedPort = () =>
  new Promise<number>((resolve) => {
    const s = createServer()
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as AddressInfo
      s.close(() => resolve(port))
    })
  })
