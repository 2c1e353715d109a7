/**
 * What the PostgreSQL layer reports of itself (docs/api.md "Store health"): its round trips
 * (count, total and slowest time since the last read), the statements in flight against the
 * pool's size, errors by kind, and the server's replication as `pg_stat_replication` shows it on
 * the primary. Plain counters on the hot path; `StoreHealth.database` carries a reading, and
 * src/observability/store-health.ts publishes it.
 */
import { Effect } from "effect"
import { FENCED_SQLSTATE } from "./postgres-schema.js"
import type { DatabaseHealth, ErrorKind, StoreError, StoreHealth } from "./store.js"

type Values = ReadonlyArray<ReadonlyArray<unknown>>

/** The kind of a client error, for `ankusa_store_database_errors_total{kind}`. */
export const errorKind = (e: unknown): ErrorKind => {
  const reason = (e as { reason?: { _tag?: string; cause?: { code?: unknown; message?: unknown } } } | undefined)?.reason
  const tag = reason?._tag ?? ""
  const code = typeof reason?.cause?.code === "string" ? reason.cause.code : ""
  const message = typeof reason?.cause?.message === "string" ? reason.cause.message : String((e as { message?: unknown })?.message ?? "")
  if (tag === "DeadlockError" || code === "40P01") return "deadlock"
  if (code === FENCED_SQLSTATE) return "fenced"
  if (/timed? ?out|timeout/i.test(tag + " " + message) || code === "57014") return "timeout"
  if (/connect|ECONN|EPIPE|socket|closed|terminat/i.test(tag + " " + message + " " + code) || code.startsWith("08") || code === "57P01") return "connection"
  if (/^[0-9A-Z]{5}$/.test(code)) return "server"
  return "other"
}

export const makeRoundTrips = (poolMax: number) => {
  let count = 0
  let totalMs = 0
  let maxMs = 0
  let inflight = 0
  let commits = 0
  const errors: Record<ErrorKind, number> = { connection: 0, timeout: 0, deadlock: 0, fenced: 0, server: 0, other: 0 }
  return {
    /** `effect` timed as one round trip; a failure counted by its kind. */
    time: <A>(effect: Effect.Effect<A, unknown>): Effect.Effect<A, unknown> =>
      Effect.suspend(() => {
        const start = performance.now()
        inflight++
        return effect.pipe(
          Effect.tapError((e) => Effect.sync(() => void errors[errorKind(e)]++)),
          Effect.ensuring(
            Effect.sync(() => {
              inflight--
              const ms = performance.now() - start
              count++
              totalMs += ms
              if (ms > maxMs) maxMs = ms
            })
          )
        )
      }),
    /** A batch committed. */
    committed: () => void commits++,
    /** A reading; the slowest round trip starts again from it. */
    read: (replicas: DatabaseHealth["replicas"]): DatabaseHealth => {
      const out: DatabaseHealth = { poolMax, inflight, commits, roundTrips: count, roundTripSeconds: totalMs / 1000, slowestSeconds: maxMs / 1000, errors: { ...errors }, replicas }
      maxMs = 0
      return out
    }
  }
}

export type RoundTrips = ReturnType<typeof makeRoundTrips>

/**
 * The health read: the schema's tables' size (heap, indexes and TOAST) as `sst`, and the standbys
 * the server streams to. PostgreSQL has no write stall of its own: writes wait on locks or the WAL,
 * never on a compaction. A role that may not read `pg_stat_replication`'s details sees its rows
 * with empty fields: they are reported as state `unknown`.
 */
export const readHealth = (
  values: (op: string, text: string, params: ReadonlyArray<unknown>) => Effect.Effect<Values, StoreError>,
  schema: string,
  trips: RoundTrips
): Effect.Effect<StoreHealth, StoreError> =>
  Effect.gen(function* () {
    const [size] = yield* values(
      "health",
      `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint, count(*)::int FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`,
      [schema]
    )
    const standbys = yield* values(
      "health",
      `SELECT coalesce(application_name, ''), coalesce(state, 'unknown'), coalesce(sync_state, 'unknown'),
              coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), 0)::bigint
       FROM pg_stat_replication`,
      []
    )
    return {
      writeStopped: false,
      delayedWriteRate: 0,
      backgroundErrors: 0,
      runningCompactions: 0,
      runningFlushes: 0,
      disk: { sst: Number(size?.[0] ?? 0), wal: 0, other: 0, files: Number(size?.[1] ?? 0), truncated: false },
      database: trips.read(
        standbys.map(([name, state, sync, lag]) => ({ name: String(name), state: String(state), syncState: String(sync), replayLagBytes: Number(lag) }))
      )
    }
  })
