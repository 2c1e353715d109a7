/**
 * A real `ankusa` child process (the compiled CLI, bin/ankusa.js) for the
 * tests that run the CLI: its JSON log lines and stderr as they arrive, a wait
 * for a line, and a bounded wait for its exit. serve-child.ts starts a
 * `serve` on a fresh data directory with it.
 */
import * as fs from "node:fs"
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"

export const ROOT = path.resolve(import.meta.dirname, "../..")

export interface LogLine {
  readonly message: unknown
  readonly logLevel: string
  readonly annotations: Record<string, unknown>
}

export interface Exited {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  /** Milliseconds from spawn to exit. */
  readonly ms: number
}

export interface NodeChild {
  readonly child: ChildProcess
  readonly lines: Array<LogLine>
  readonly stdout: () => string
  readonly stderr: () => string
  /** The first log line (already printed or to come) that passes `test`. */
  readonly waitFor: (test: (l: LogLine) => boolean, ms: number, what: string) => Promise<LogLine>
  /** The exit, or a rejection after `ms` (the child is then SIGKILLed). */
  readonly exited: (ms: number) => Promise<Exited>
  /** SIGKILL if still running. */
  readonly kill: () => void
}

export const runAnkusa = (args: ReadonlyArray<string>, env: Record<string, string> = {}): NodeChild => {
  const started = Date.now()
  const child = spawn(process.execPath, [path.join(ROOT, "bin/ankusa.js"), ...args], {
    cwd: ROOT,
    env: { ...process.env, ANKUSA_CONFIG: "", ANKUSA_HTTP_PORT: "", ANKUSA_DATA_DIR: "", ANKUSA_LOG_LEVEL: "", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const lines: Array<LogLine> = []
  const waiters: Array<{ readonly test: (l: LogLine) => boolean; readonly done: (l: LogLine) => void; readonly gone: () => void }> = []
  // Once the child's output is closed no line can come: a waiter fails then rather than at its timeout.
  let closed = false
  let out = ""
  let err = ""
  let buffer = ""
  child.stderr!.on("data", (c: Buffer) => (err += c.toString("utf8")))
  child.stdout!.on("data", (c: Buffer) => {
    const text = c.toString("utf8")
    out += text
    buffer += text
    let nl: number
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const raw = buffer.slice(0, nl)
      buffer = buffer.slice(nl + 1)
      let line: LogLine
      try {
        line = JSON.parse(raw) as LogLine
      } catch {
        continue
      }
      lines.push(line)
      for (const w of [...waiters]) {
        if (w.test(line)) {
          waiters.splice(waiters.indexOf(w), 1)
          w.done(line)
        }
      }
    }
  })
  child.once("close", () => {
    closed = true
    for (const w of waiters.splice(0)) w.gone()
  })
  const exit = new Promise<Exited>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal, ms: Date.now() - started }))
  })
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  }
  return {
    child,
    lines,
    stdout: () => out,
    stderr: () => err,
    waitFor: (test, ms, what) =>
      new Promise<LogLine>((resolve, reject) => {
        const found = lines.find(test)
        if (found !== undefined) return resolve(found)
        const fail = (why: string) => reject(new Error(`${why} ${what}; stdout:\n${out}\nstderr:\n${err}`))
        const gone = () => fail(`exited (${child.exitCode ?? child.signalCode}) before`)
        if (closed) return gone()
        const timer = setTimeout(() => fail("timed out waiting for"), ms)
        waiters.push({ test, done: (l) => (clearTimeout(timer), resolve(l)), gone: () => (clearTimeout(timer), gone()) })
      }),
    exited: (ms) =>
      Promise.race([
        exit,
        new Promise<Exited>((_, reject) =>
          setTimeout(() => {
            kill()
            reject(new Error(`still running after ${ms} ms; stdout:\n${out}\nstderr:\n${err}`))
          }, ms).unref()
        )
      ]),
    kill
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** The start line's address, once the child serves. */
export const servingAddress = async (node: NodeChild, ms = 60_000): Promise<string> =>
  String((await node.waitFor((l) => l.message === "ankusa serving", ms, "the start line")).annotations["address"])

/**
 * What a test file's children leave behind, released after each test: the children stopped with
 * SIGTERM (killed after 30 s), then their data directories removed, then anything else closed.
 */
export const leftovers = (after: (f: () => Promise<void>) => void) => {
  const children: Array<NodeChild> = []
  const dirs: Array<string> = []
  const closers: Array<{ readonly close: () => Promise<void> }> = []
  after(async () => {
    for (const c of children.splice(0)) {
      c.child.kill("SIGTERM")
      await c.exited(30_000).catch(() => c.kill())
    }
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
    for (const s of closers.splice(0)) await s.close()
  })
  return { children, dirs, closers }
}
