/**
 * A bench server in its own process, so that the bench's own load does not delay its answers:
 * the module, run as `<module> --serve ...`, listens on a free port of 127.0.0.1 and prints
 * `listening <port>`; the bench spawns it (under tsx) and waits for that line.
 * bench/lib/delay-sink.ts and bench/lib/target-server.ts are such servers.
 */
import { spawn } from "node:child_process"
import type { Server } from "node:http"
import { fileURLToPath } from "node:url"

export interface ServerProcess {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly pid: number
  /** SIGKILL, and wait for the exit. */
  readonly close: () => Promise<void>
}

/** Whether this process runs the module at `moduleUrl` (its `import.meta.url`) as the server. */
export const servesHere = (moduleUrl: string): boolean => process.argv[1] === fileURLToPath(moduleUrl) && process.argv.includes("--serve")

/** In the server: the number after `name` on the command line, else `dflt`. */
export const numberArg = (name: string, dflt: number): number => {
  const at = process.argv.indexOf(name)
  return at >= 0 ? Number(process.argv[at + 1]) : dflt
}

/** In the server: listen, and print the port for `spawnServer`. */
export const listenAndAnnounce = (server: Server): void => {
  server.keepAliveTimeout = 60_000
  server.listen(0, "127.0.0.1", () => {
    const a = server.address()
    process.stdout.write(`listening ${typeof a === "object" && a !== null ? a.port : 0}\n`)
  })
}

/** In the bench: run the module at `moduleUrl` with `--serve ...args`, and resolve once it listens. */
export const spawnServer = (moduleUrl: string, args: ReadonlyArray<string>, what: string): Promise<ServerProcess> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(moduleUrl), "--serve", ...args], { stdio: ["ignore", "pipe", "inherit"] })
    let out = ""
    const onData = (d: Buffer) => {
      out += d.toString("utf8")
      const m = /listening (\d+)/.exec(out)
      if (m === null) return
      child.stdout.off("data", onData)
      resolve({
        url: `http://127.0.0.1:${m[1]}`,
        pid: child.pid!,
        close: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null || child.signalCode !== null) return done()
            child.once("exit", () => done())
            child.kill("SIGKILL")
          })
      })
    }
    child.stdout.on("data", onData)
    child.once("exit", (code) => reject(new Error(`${what} exited (${code}) before listening`)))
  })
