/**
 * The store's own health as gauges (product.md "Operations"): write stalls,
 * background work and errors, and the bytes on disk by kind, from
 * `Store.health`, read by a scheduled fiber of its own (a failed read is
 * logged; the next runs on time). docs/api.md "Store health" says what
 * each means and when to alert.
 */
import { Duration, Effect, Layer, Metric, Schedule } from "effect"
import { type DatabaseHealth, type ErrorKind, Store, type StoreError, type StoreHealth } from "../store/store.js"

export interface StoreHealthOptions {
  /** Read period (ms); `serve` passes `gauges.intervalMs`. */
  readonly intervalMs: number
}

export const Defaults = { intervalMs: 15_000 } as const satisfies StoreHealthOptions

export const writeStopped = Metric.gauge("ankusa_store_write_stopped", {
  description: "1 while RocksDB stops writes (a write stall), else 0"
})
export const delayedWriteRate = Metric.gauge("ankusa_store_delayed_write_rate_bytes", {
  description: "Bytes a second RocksDB slows writes to; 0 when writes are not delayed"
})
export const backgroundErrors = Metric.gauge("ankusa_store_background_errors", {
  description: "RocksDB background (flush or compaction) errors since the store opened"
})
export const runningCompactions = Metric.gauge("ankusa_store_running_compactions", {
  description: "RocksDB compactions running now"
})
export const runningFlushes = Metric.gauge("ankusa_store_running_flushes", {
  description: "RocksDB memtable flushes running now"
})
export const diskBytes = Metric.gauge("ankusa_store_disk_bytes", {
  description: "Bytes of the store directory's files by kind: sst, wal, other"
})
export const diskFiles = Metric.gauge("ankusa_store_disk_files", {
  description: "Files of the store directory counted by the last health read"
})

export const diskBytesOf = (kind: "sst" | "wal" | "other") => Metric.withAttributes(diskBytes, { kind })

// A store in a database server (PostgreSQL): StoreHealth.database.
export const databaseConnectionsMax = Metric.gauge("ankusa_store_database_connections_max", {
  description: "Connections the store's database pool may open (store.postgres.maxConnections)"
})
export const databaseInflight = Metric.gauge("ankusa_store_database_inflight", {
  description: "Statements in flight to the store's database at the last health read (each holds a pool connection)"
})
export const databaseCommits = Metric.counter("ankusa_store_database_commits_total", {
  description: "Batches this node committed to the store's database (a standby's stays 0)",
  incremental: true
})
export const databaseRoundTrips = Metric.counter("ankusa_store_database_round_trips_total", {
  description: "Round trips (statements) to the store's database",
  incremental: true
})
export const databaseRoundTripSeconds = Metric.counter("ankusa_store_database_round_trip_seconds_total", {
  description: "Time spent in round trips to the store's database; over round_trips_total, the mean round trip",
  incremental: true
})
export const databaseSlowest = Metric.gauge("ankusa_store_database_round_trip_slowest_seconds", {
  description: "The slowest round trip to the store's database between the last two health reads"
})
export const databaseErrors = Metric.counter("ankusa_store_database_errors_total", {
  description: "Failed round trips to the store's database by kind: connection, timeout, deadlock, fenced, server, other",
  incremental: true
})
export const databaseReplicas = Metric.gauge("ankusa_store_database_replicas", {
  description: "Standbys the database streams to (pg_stat_replication), by state and sync_state"
})
export const databaseReplayLag = Metric.gauge("ankusa_store_database_replay_lag_bytes", {
  description: "The largest WAL replay lag of the database's standbys, in bytes (0 with none)"
})

const ERROR_KINDS: ReadonlyArray<ErrorKind> = ["connection", "timeout", "deadlock", "fenced", "server", "other"]

/** Publishes database readings: counters by the change since the last reading, gauges as read; a replica state no longer seen goes to 0. */
export const makeDatabasePublisher = () => {
  let last: DatabaseHealth | undefined
  const seen = new Set<string>()
  return (d: DatabaseHealth): Effect.Effect<void> => {
    const prev = last
    last = d
    const counts = new Map<string, number>()
    for (const r of d.replicas) {
      const k = `${r.state}\u0000${r.syncState}`
      counts.set(k, (counts.get(k) ?? 0) + 1)
      seen.add(k)
    }
    return Effect.all(
      [
        Metric.update(databaseConnectionsMax, d.poolMax),
        Metric.update(databaseInflight, d.inflight),
        Metric.update(databaseCommits, d.commits - (prev?.commits ?? 0)),
        Metric.update(databaseRoundTrips, d.roundTrips - (prev?.roundTrips ?? 0)),
        Metric.update(databaseRoundTripSeconds, d.roundTripSeconds - (prev?.roundTripSeconds ?? 0)),
        Metric.update(databaseSlowest, d.slowestSeconds),
        ...ERROR_KINDS.map((kind) => Metric.update(Metric.withAttributes(databaseErrors, { kind }), d.errors[kind] - (prev?.errors[kind] ?? 0))),
        ...[...seen].map((k) => {
          const [state, sync_state] = k.split("\u0000")
          return Metric.update(Metric.withAttributes(databaseReplicas, { state: state!, sync_state: sync_state! }), counts.get(k) ?? 0)
        }),
        Metric.update(databaseReplayLag, d.replicas.reduce((m, r) => Math.max(m, r.replayLagBytes), 0))
      ],
      { discard: true }
    )
  }
}

/** Set every gauge from one reading. */
export const publish = (h: StoreHealth): Effect.Effect<void> =>
  Effect.all(
    [
      Metric.update(writeStopped, h.writeStopped ? 1 : 0),
      Metric.update(delayedWriteRate, h.delayedWriteRate),
      Metric.update(backgroundErrors, h.backgroundErrors),
      Metric.update(runningCompactions, h.runningCompactions),
      Metric.update(runningFlushes, h.runningFlushes),
      Metric.update(diskBytesOf("sst"), h.disk.sst),
      Metric.update(diskBytesOf("wal"), h.disk.wal),
      Metric.update(diskBytesOf("other"), h.disk.other),
      Metric.update(diskFiles, h.disk.files)
    ],
    { discard: true }
  )

/** Read the store's health once and set the gauges. */
export const tick: Effect.Effect<StoreHealth, StoreError, Store> = Effect.flatMap(Store, (s) => s.health).pipe(Effect.tap(publish))

/** The scheduled read, for the layer's scope. */
export const layer = (options: Partial<StoreHealthOptions> = {}): Layer.Layer<never, never, Store> =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const intervalMs = options.intervalMs ?? Defaults.intervalMs
      if (!Number.isInteger(intervalMs) || intervalMs < 1) return yield* Effect.die(new Error(`storeHealth.intervalMs = ${intervalMs} must be >= 1`))
      const store = yield* Store
      let warned = false
      const database = makeDatabasePublisher()
      const once = tick.pipe(
        Effect.provideService(Store, store),
        Effect.tap((h) => (h.database === undefined ? Effect.void : database(h.database))),
        Effect.tap((h) =>
          h.disk.truncated && !warned
            ? Effect.andThen(
                Effect.sync(() => (warned = true)),
                Effect.logWarning("store health: the store directory has more files than one read lists; disk bytes are of the first ones").pipe(
                  Effect.annotateLogs({ files: h.disk.files })
                )
              )
            : Effect.void
        ),
        Effect.catchCause((cause) => Effect.logError("store health: read failed", cause))
      )
      // The first read before the layer is up, so the gauges are there from boot.
      yield* once
      yield* once.pipe(Effect.delay(Duration.millis(intervalMs)), Effect.repeat(Schedule.spaced(Duration.millis(intervalMs))), Effect.forkScoped)
    })
  )
