/**
 * `ankusa serve` as a real child process (what `npm start` runs:
 * `node bin/ankusa.js serve`, the compiled build in dist/; run `npm run build`
 * first), on a given data directory and configuration, for the benches and
 * the crash test. `pid` is the server itself (SIGKILL reaches it,
 * /proc/<pid>/status is its memory). The configuration goes in a JSON
 * file named by ANKUSA_CONFIG.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { writeFileSync } from "node:fs"
import { join, resolve } from "node:path"

/** How long a boot may take before the start is given up (a loaded machine, a migration at boot). */
export const SERVE_START_TIMEOUT_MS = 120_000

export const ROOT = resolve(import.meta.dirname, "..", "..")

export interface ServeChild {
  readonly pid: number
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly child: ChildProcess
  /** stderr so far (a healthy server writes none). */
  readonly stderr: () => string
  /** Resolves with the exit code (null when killed by a signal). */
  readonly exited: Promise<number | null>
  /** SIGKILL, and wait for the exit. */
  readonly kill: () => Promise<void>
  /** SIGTERM (drain), and wait for the exit. */
  readonly stop: () => Promise<number | null>
}

export interface ServeOptions {
  readonly dataDir: string
  /** The configuration file's content (http.port is overridden by `port`). */
  readonly config: Record<string, unknown>
  /** Where the configuration file is written (default: next to the data directory's store, `<dataDir>/serve-config.json`). */
  readonly configFile?: string
  readonly port?: number
  /** Node options placed before `--import tsx` (e.g. `--cpu-prof`). */
  readonly nodeArgs?: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>>
  /** Each stdout line (JSON log lines), as it comes. */
  readonly onLine?: (line: string) => void
}

/**
 * Node flags for every `serve` a bench starts, from `ANKUSA_BENCH_SERVE_ARGS` (space-separated),
 * e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile the server under a bench's load
 * (the profile is written when the server exits on the bench's SIGTERM).
 */
/** How long `kill` waits for a server started with `ANKUSA_BENCH_SERVE_ARGS` to stop before SIGKILL. */
const PROFILED_STOP_MS = 30_000

const extraNodeArgs = (): ReadonlyArray<string> => (process.env.ANKUSA_BENCH_SERVE_ARGS ?? "").split(" ").filter((a) => a.length > 0)

export const startServe = (o: ServeOptions): Promise<ServeChild> => {
  const configFile = o.configFile ?? join(o.dataDir, "serve-config.json")
  writeFileSync(configFile, JSON.stringify(o.config, null, 2))
  const child = spawn(
    process.execPath,
    [...extraNodeArgs(), ...(o.nodeArgs ?? []), "bin/ankusa.js", "serve", "--data-dir", o.dataDir, "--port", String(o.port ?? 0)],
    {
      cwd: ROOT,
      env: { ...process.env, ANKUSA_CONFIG: configFile, ANKUSA_HTTP_PORT: "", ...o.env },
      stdio: ["ignore", "pipe", "pipe"]
    }
  )
  let stderr = ""
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString("utf8")))
  const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)))
  const waitExit = () => (child.exitCode !== null || child.signalCode !== null ? Promise.resolve(child.exitCode) : exited)
  return new Promise((resolveStart, reject) => {
    let buffered = ""
    let started = false
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`serve did not start within ${SERVE_START_TIMEOUT_MS} ms; stderr: ${stderr}`))
    }, SERVE_START_TIMEOUT_MS)
    void exited.then((code) => {
      if (started) return
      clearTimeout(timer)
      reject(new Error(`serve exited (${code ?? child.signalCode}) before serving; stderr: ${stderr}`))
    })
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (d: string) => {
      buffered += d
      const lines = buffered.split("\n")
      buffered = lines.pop()!
      for (const line of lines) {
        o.onLine?.(line)
        if (started || !line.includes('"ankusa serving"')) continue
        const address = (JSON.parse(line) as { annotations: { address: string } }).annotations.address
        started = true
        clearTimeout(timer)
        resolveStart({
          pid: child.pid!,
          url: address,
          child,
          stderr: () => stderr,
          exited,
          kill: async () => {
            // With extra flags (a profiler) the server is stopped first, so that it writes what they collect.
            if (extraNodeArgs().length > 0 && child.exitCode === null && child.signalCode === null) {
              child.kill("SIGTERM")
              await Promise.race([waitExit(), new Promise((r) => setTimeout(r, PROFILED_STOP_MS))])
            }
            if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
            await waitExit()
          },
          stop: async () => {
            if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
            return waitExit()
          }
        })
      }
    })
  })
}

/** The value of one sample of a Prometheus text exposition (`name{labels}` exactly as rendered), or undefined. */
export const metricValue = (text: string, series: string): number | undefined => {
  for (const line of text.split("\n")) {
    if (line.startsWith(series + " ")) return Number(line.slice(series.length + 1))
  }
  return undefined
}
