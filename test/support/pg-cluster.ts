/**
 * A throwaway PostgreSQL 15 cluster for one test file: `initdb` in a temporary directory
 * (trust auth, which its pg_hba.conf grants only to the unix socket and loopback), then the
 * `postgres` binary listening on 127.0.0.1 alone, on a free port, its socket in that directory.
 * PostgreSQL refuses to run as root: as root (CI) both run as the `postgres` user, who owns the
 * directory. `stop` ends the server by its own PID (a fast shutdown, then SIGKILL past a bound)
 * and removes the directory; an exiting test process kills it too.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { chownSync, existsSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** Where Debian's PostgreSQL 15 puts its binaries (scripts/ensure-postgres.sh installs it). */
export const PG_BIN = process.env["ANKUSA_PG_BIN"] ?? "/usr/lib/postgresql/15/bin"

/** Why the PostgreSQL tests cannot run here, or undefined when they can. */
export const pgUnavailable: string | undefined = (() => {
  for (const b of ["initdb", "postgres"]) {
    if (!existsSync(join(PG_BIN, b))) {
      return `PostgreSQL tests skipped: ${join(PG_BIN, b)} is missing (bash scripts/ensure-postgres.sh as root installs Debian's postgresql-15, or set ANKUSA_PG_BIN)`
    }
  }
  if (process.getuid?.() === 0 && postgresUser() === undefined) {
    return "PostgreSQL tests skipped: running as root and there is no `postgres` user to run the server as"
  }
  return undefined
})()

/** Bound on the server's start (initdb excluded). */
const START_TIMEOUT_MS = 30_000
/** Bound on a fast shutdown before SIGKILL. */
const STOP_TIMEOUT_MS = 10_000

export interface PgCluster {
  /** The connection URL of `database` (no password: trust auth). */
  readonly url: (database?: string) => string
  readonly port: number
  /** A new, empty database; returns its URL. */
  readonly createDatabase: () => Promise<string>
  /** Run one SQL statement with psql against `database` (test setup and inspection). */
  readonly psql: (database: string, sql: string) => string
  readonly stop: () => Promise<void>
}

function postgresUser(): { readonly uid: number; readonly gid: number } | undefined {
  try {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim())
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim())
    return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : undefined
  } catch {
    return undefined
  }
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })

const exited = (child: ChildProcess, ms: number) =>
  new Promise<boolean>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(true)
    const t = setTimeout(() => resolve(false), ms)
    child.once("exit", () => {
      clearTimeout(t)
      resolve(true)
    })
  })

let databases = 0

export const startCluster = async (): Promise<PgCluster> => {
  if (pgUnavailable !== undefined) throw new Error(pgUnavailable)
  const as = process.getuid?.() === 0 ? postgresUser()! : undefined
  const owner = as === undefined ? {} : { uid: as.uid, gid: as.gid }
  const dir = mkdtempSync(join(tmpdir(), "ankusa-pg-"))
  if (as !== undefined) chownSync(dir, as.uid, as.gid)
  const data = join(dir, "data")
  const env = { ...process.env, LC_ALL: "C", HOME: dir }
  execFileSync(
    join(PG_BIN, "initdb"),
    ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"],
    { ...owner, env, stdio: ["ignore", "ignore", "pipe"], cwd: dir }
  )
  const port = await freePort()
  const child = spawn(
    join(PG_BIN, "postgres"),
    [
      "-D", data,
      "-h", "127.0.0.1",
      "-p", String(port),
      "-k", dir,
      // Throwaway data: durability is the server's business, not these tests'.
      "-c", "fsync=off",
      "-c", "full_page_writes=off",
      "-c", "max_connections=200",
      "-c", "shared_buffers=32MB"
    ],
    { ...owner, env, stdio: ["ignore", "ignore", "pipe"], cwd: dir }
  )
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  }
  process.once("exit", kill)
  let log = ""
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`postgres did not start within ${START_TIMEOUT_MS} ms:\n${log}`)), START_TIMEOUT_MS)
    child.stderr!.on("data", (d: Buffer) => {
      log = (log + d.toString("utf8")).slice(-8192)
      if (log.includes("database system is ready to accept connections")) {
        clearTimeout(t)
        resolve()
      }
    })
    child.once("exit", (code) => {
      clearTimeout(t)
      reject(new Error(`postgres exited with code ${code} before it was ready:\n${log}`))
    })
  }).catch((e: unknown) => {
    kill()
    rmSync(dir, { recursive: true, force: true })
    throw e
  })
  // Keep draining its log so a full pipe never blocks the server.
  child.stderr!.resume()

  const url = (database = "postgres") => `postgres://postgres@127.0.0.1:${port}/${database}`
  const psql = (database: string, sql: string) =>
    execFileSync(join(PG_BIN, "psql"), ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url(database), "-c", sql], {
      encoding: "utf8",
      env
    })
  return {
    url,
    port,
    psql,
    createDatabase: async () => {
      const name = `t${process.pid}_${++databases}`
      psql("postgres", `CREATE DATABASE ${name}`)
      return url(name)
    },
    stop: async () => {
      process.off("exit", kill)
      // SIGINT is PostgreSQL's fast shutdown (SIGTERM, its smart shutdown, waits for every client).
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT")
      if (!(await exited(child, STOP_TIMEOUT_MS))) {
        kill()
        await exited(child, STOP_TIMEOUT_MS)
      }
      rmSync(dir, { recursive: true, force: true })
    }
  }
}
