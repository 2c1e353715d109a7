/**
 * A bare HTTP client loop, for delivery-bench: `calls` POSTs of `body` to
 * `url`, `concurrency` at a time, each answer read to its end, over
 * `node:http` with a keep-alive Agent holding at most `concurrency` sockets.
 * Nothing else runs per call (no store, no Effect): the limit of one Node
 * process calling that sink on this machine, which the pipeline's
 * deliveries/s is compared to. Counts every call that ended; `failed` those
 * that ended in an error (none expected).
 */
import { mainThreadCpuMs } from "./proc.js"
import { Agent, request } from "node:http"

/**
 * CPU (user + system) of this process's main thread so far, µs, from /proc (Linux); undefined
 * elsewhere. The event loop's own share, without the commit worker's, RocksDB's or libuv's threads.
 */
export const mainThreadCpuUs = (): number | undefined => {
  const ms = mainThreadCpuMs()
  return Number.isNaN(ms) ? undefined : ms * 1000
}

/** A call idle this long (no bytes either way) is cut and counted failed. */
export const CALL_TIMEOUT_MS = 10_000

export interface BareResult {
  readonly calls: number
  readonly failed: number
  readonly seconds: number
  readonly rate: number
  /** CPU (user + system) of this process per call, µs. */
  readonly cpuUsPerCall: number
  /** The main thread's CPU per call, µs (undefined without /proc). */
  readonly mainCpuUsPerCall: number | undefined
}

export const bareClientLoop = (url: string, body: Uint8Array, calls: number, concurrency: number): Promise<BareResult> =>
  new Promise((resolve) => {
    const u = new URL(url)
    const agent = new Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency })
    const headers = { "content-type": "application/json", "content-length": String(body.length) }
    let started = 0
    let done = 0
    let failed = 0
    const t0 = performance.now()
    const cpu0 = process.cpuUsage()
    const main0 = mainThreadCpuUs()
    const finish = () => {
      const seconds = (performance.now() - t0) / 1000
      const cpu = process.cpuUsage(cpu0)
      const main1 = mainThreadCpuUs()
      agent.destroy()
      resolve({
        calls: done,
        failed,
        seconds,
        rate: done / seconds,
        cpuUsPerCall: (cpu.user + cpu.system) / done,
        mainCpuUsPerCall: main0 === undefined || main1 === undefined ? undefined : (main1 - main0) / done
      })
    }
    const next = (): void => {
      if (started >= calls) return
      started++
      // Each call ends once, whichever of its answer's end or an error comes first.
      let ended = false
      const end = (ok: boolean) => {
        if (ended) return
        ended = true
        if (!ok) failed++
        done++
        if (done === calls) finish()
        else next()
      }
      const req = request({ agent, method: "POST", hostname: u.hostname, port: u.port, path: u.pathname, headers }, (res) => {
        res.on("data", () => {})
        res.on("end", () => end(true))
      })
      // A call that stalls fails rather than hanging the bench.
      req.setTimeout(CALL_TIMEOUT_MS, () => req.destroy())
      req.on("error", () => end(false))
      req.end(body)
    }
    for (let i = 0; i < Math.min(concurrency, calls); i++) next()
  })
