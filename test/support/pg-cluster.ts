/**
 * A throwaway PostgreSQL 15 cluster for one test file: `initdb` in a temporary directory
 * (trust auth, which its pg_hba.conf grants only to the unix socket and loopback), then the
 * `postgres` binary listening on 127.0.0.1 alone, on a free port, its socket in that directory.
 * PostgreSQL refuses to run as root: as root (CI) both run as the `postgres` user, who owns the
 * directory. `stop` ends the server by its own PID (a fast shutdown, then SIGKILL past a bound)
 * and removes the directory; an exiting test process kills it too. Tests run it without fsync;
 * `startCluster({ durable: true })` keeps PostgreSQL's defaults (the benches time synced commits).
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
  /** The postmaster's PID (the server's other processes are its children). */
  readonly pid: () => number
  /** The cluster's data directory (PGDATA): where the tables' files are. */
  readonly dataDir: string
  /** A new, empty database; returns its URL. */
  readonly createDatabase: () => Promise<string>
  /** Run one SQL statement with psql against `database` (test setup and inspection). */
  readonly psql: (database: string, sql: string) => string
  /** A fast shutdown that keeps the data directory: the database is unreachable until `restart`. */
  readonly halt: () => Promise<void>
  /** Start the halted server again, on the same port and data. */
  readonly restart: () => Promise<void>
  readonly stop: () => Promise<void>
  /** SIGKILL the server (the postmaster; its backends follow): a crash, not a shutdown. */
  readonly kill: () => Promise<void>
  /** A standby streaming from this cluster, made by `pg_basebackup -R`, on a port of its own. */
  readonly standby: () => Promise<PgStandby>
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

export interface ClusterOptions {
  /** Leave `fsync` and `full_page_writes` at their defaults (on): a commit waits for its WAL flush. */
  readonly durable?: boolean
  /** More server settings (`name=value`), e.g. `synchronous_standby_names=*` for a primary with a synchronous standby. */
  readonly settings?: ReadonlyArray<string>
}

/** A streaming standby of a cluster (`standby()`), promoted by `promote`. */
export interface PgStandby {
  readonly port: number
  readonly url: (database?: string) => string
  /** `pg_ctl promote`, then wait until it takes writes. */
  readonly promote: () => Promise<void>
  readonly stop: () => Promise<void>
}

export const startCluster = async (options: ClusterOptions = {}): Promise<PgCluster> => {
  const durable = options.durable === true
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
  const settings = options.settings ?? []
  let child = await serverOn(data, dir, port, owner, env, durable, settings).catch((e: unknown) => {
    rmSync(dir, { recursive: true, force: true })
    throw e
  })
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  }
  process.once("exit", kill)
  /** SIGINT is PostgreSQL's fast shutdown (SIGTERM, its smart shutdown, waits for every client). */
  const fastShutdown = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT")
    if (!(await exited(child, STOP_TIMEOUT_MS))) {
      kill()
      await exited(child, STOP_TIMEOUT_MS)
    }
  }

  const url = (database = "postgres") => `postgres://postgres@127.0.0.1:${port}/${database}`
  const psql = (database: string, sql: string) =>
    execFileSync(join(PG_BIN, "psql"), ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url(database), "-c", sql], {
      encoding: "utf8",
      env
    })
  return {
    url,
    port,
    pid: () => child.pid!,
    dataDir: data,
    psql,
    createDatabase: async () => {
      const name = `t${process.pid}_${++databases}`
      psql("postgres", `CREATE DATABASE ${name}`)
      return url(name)
    },
    halt: fastShutdown,
    restart: async () => {
      child = await serverOn(data, dir, port, owner, env, durable, settings)
    },
    kill: async () => {
      kill()
      await exited(child, STOP_TIMEOUT_MS)
    },
    standby: async () => {
      const sdir = mkdtempSync(join(tmpdir(), "ankusa-pg-standby-"))
      if (as !== undefined) chownSync(sdir, as.uid, as.gid)
      const sdata = join(sdir, "data")
      execFileSync(join(PG_BIN, "pg_basebackup"), ["-D", sdata, "-R", "-X", "stream", "-h", "127.0.0.1", "-p", String(port), "-U", "postgres"], {
        ...owner,
        env,
        stdio: ["ignore", "ignore", "pipe"],
        cwd: sdir
      })
      const sport = await freePort()
      const senv = { ...env, HOME: sdir }
      const s = await serverOn(sdata, sdir, sport, owner, senv, durable, [])
      const skill = () => {
        if (s.exitCode === null && s.signalCode === null) s.kill("SIGKILL")
      }
      process.once("exit", skill)
      const surl = (database = "postgres") => `postgres://postgres@127.0.0.1:${sport}/${database}`
      return {
        port: sport,
        url: surl,
        promote: async () => {
          execFileSync(join(PG_BIN, "pg_ctl"), ["promote", "-w", "-D", sdata], { ...owner, env: senv, stdio: ["ignore", "ignore", "pipe"], cwd: sdir })
        },
        stop: async () => {
          process.off("exit", skill)
          if (s.exitCode === null && s.signalCode === null) s.kill("SIGINT")
          if (!(await exited(s, STOP_TIMEOUT_MS))) {
            skill()
            await exited(s, STOP_TIMEOUT_MS)
          }
          rmSync(sdir, { recursive: true, force: true })
        }
      }
    },
    stop: async () => {
      process.off("exit", kill)
      await fastShutdown()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** The server on `data`, listening on 127.0.0.1:`port` alone; resolves once it accepts connections. */
const serverOn = async (
  data: string,
  dir: string,
  port: number,
  owner: { readonly uid?: number; readonly gid?: number },
  env: NodeJS.ProcessEnv,
  durable: boolean,
  settings: ReadonlyArray<string> = []
): Promise<ChildProcess> => {
  const child = spawn(
    join(PG_BIN, "postgres"),
    [
      "-D", data,
      "-h", "127.0.0.1",
      "-p", String(port),
      "-k", dir,
      // Throwaway data: durability is the server's business, not these tests'.
      ...(durable ? [] : ["-c", "fsync=off", "-c", "full_page_writes=off"]),
      "-c", "max_connections=200",
      "-c", "shared_buffers=32MB",
      ...settings.flatMap((s) => ["-c", s])
    ],
    { ...owner, env, stdio: ["ignore", "ignore", "pipe"], cwd: dir }
  )
  let log = ""
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`postgres did not start within ${START_TIMEOUT_MS} ms:\n${log}`)), START_TIMEOUT_MS)
    child.stderr!.on("data", (d: Buffer) => {
      log = (log + d.toString("utf8")).slice(-8192)
      // A hot standby says "ready to accept read-only connections".
      if (/database system is ready to accept (read-only )?connections/.test(log)) {
        clearTimeout(t)
        resolve()
      }
    })
    child.once("exit", (code) => {
      clearTimeout(t)
      reject(new Error(`postgres exited with code ${code} before it was ready:\n${log}`))
    })
  }).catch((e: unknown) => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    throw e
  })
  // Keep draining its log so a full pipe never blocks the server.
  child.stderr!.resume()
  return child
}
