/**
 * PostgreSQL beside a bench (`--store postgres`): a throwaway durable cluster
 * (test/support/pg-cluster.ts with fsync on), and the CPU of every one of its processes. A hook's
 * CPU on PostgreSQL counts the server's processes as RocksDB's count its threads in the node.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { PG_BIN, type PgCluster, startCluster } from "../../test/support/pg-cluster.js"
import { finish } from "./report.js"

/** `--store postgres`: the bench runs on PostgreSQL. */
export const onPostgres = (() => {
  const i = process.argv.indexOf("--store")
  const kind = i < 0 ? "rocksdb" : process.argv[i + 1]
  if (kind !== "rocksdb" && kind !== "postgres") throw new Error(`--store expects rocksdb or postgres, not ${kind}`)
  return kind === "postgres"
})()

/** A durable cluster for the bench `name`, or its FAIL line (exit 1) where PostgreSQL 15 is missing: never a silent pass. */
export const benchCluster = async (name: string): Promise<PgCluster> => {
  if (!["initdb", "postgres"].every((b) => existsSync(join(PG_BIN, b)))) {
    finish(name, false, "PostgreSQL 15 is not installed (bash scripts/ensure-postgres.sh)")
  }
  return startCluster({ durable: true })
}

const USER_HZ = 100

const statFields = (pid: number | string): Array<string> | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  } catch {
    return undefined // ended between the listing and the read
  }
}

/**
 * CPU ms (user + system) of the cluster so far: the postmaster, its children now alive, and (the
 * postmaster's cutime + cstime) the children it has reaped, so a backend that ends inside a window
 * still counts.
 */
export const pgCpuMs = (postmaster: number): number => {
  const f = statFields(postmaster)
  if (f === undefined) throw new Error(`postgres ${postmaster} is gone`)
  // Fields after the command: state ppid ... utime(11) stime(12) cutime(13) cstime(14).
  let ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue
    const c = statFields(pid)
    if (c !== undefined && Number(c[1]) === postmaster) ticks += Number(c[11]) + Number(c[12])
  }
  return (ticks * 1000) / USER_HZ
}

/** pg-boss's figure on these machines, quoted for comparison (not measured here, not gated). */
export const PG_BOSS_REFERENCE =
  "Reference (quoted, not measured in this run, not gated): pg-boss 12 enqueues about 2,200 requests/s at about 700 µs CPU each on these machines."
