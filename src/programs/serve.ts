/**
 * `ankusa serve` (what `npm start` runs; product.md "Running it"): the HTTP
 * server, the Writer, the dispatch pipeline, the gauge tick, the store
 * health and process memory gauges, quarantine and audit pruning, the dedupe
 * sweep, the DLQ ceiling, archive and reclaim, on the RocksDB store in
 * `<dataDir>/store` or, with `store.kind: postgres`, on PostgreSQL (docs/storage.md).
 *
 * Boot, in order (docs/deployment.md "Boot and shutdown"): open the store;
 * bind HTTP with the gate closed (`/healthz` answers, `/readyz` is 503); on a
 * shared store, take its lease (a standby waits there, src/ha/lease.ts);
 * run the migrations; return inflight rows to due (`recoverInflight`) BEFORE
 * the pipeline starts; start the Writer, the pipeline and the background
 * fibers; open the gate. Shutdown (SIGTERM/SIGINT through `NodeRuntime.runMain`
 * interrupting the main fiber) releases in reverse: the gate closes first
 * (ingest and admin answer 503), the pipeline lets inflight sink calls finish
 * within `pipeline.graceMs` (rows still inflight are left for the next boot's
 * recovery), the Writer commits what it holds, the server closes, the store
 * closes.
 */
import { Clock, Duration, Effect, Layer, Redacted, References } from "effect"
import { HttpServer } from "effect/http"
import * as path from "node:path"
import { type Config, type LogLevel, resolveUrl } from "../domain/config.js"
import { onDeadOf } from "../domain/config-ordering.js"
import { familiesOf } from "../domain/keys.js"
import * as Archive from "../lifecycle/archive.js"
import * as Audit from "../lifecycle/audit.js"
import * as ConfigLoader from "../config/config.js"
import * as Live from "../config/live.js"
import { checkDataDir } from "../config/data-dir.js"
import * as DedupeSweep from "../lifecycle/dedupe-sweep.js"
import * as DiskReserve from "../lifecycle/disk-reserve.js"
import * as DlqCeiling from "../lifecycle/dlq-ceiling.js"
import * as Erase from "../lifecycle/erase.js"
import * as EventLoopMetrics from "../observability/event-loop-metrics.js"
import * as Gauges from "../observability/gauges.js"
import * as Gate from "../http/gate.js"
import * as Lease from "../ha/lease.js"
import * as Http from "../http/server.js"
import * as LifecycleMetrics from "../observability/lifecycle-metrics.js"
import * as Endpoints from "../queue/endpoints.js"
import * as RequestAnswers from "../queue/request-answers.js"
import * as AttemptLog from "../delivery/attempt-log.js"
import * as Limits from "../queue/limits.js"
import * as Logger from "../observability/logger.js"
import * as Migrate from "../queue/format/migrate.js"
import * as Pipeline from "../delivery/pipeline.js"
import * as OperationalEvents from "../delivery/operations.js"
import * as ProcessMetrics from "../observability/process-metrics.js"
import * as Quarantine from "../lifecycle/quarantine.js"
import * as Queue from "../queue/queue.js"
import * as QueuedBytes from "../queue/queued-bytes.js"
import * as Reclaim from "../lifecycle/reclaim.js"
import * as Replay from "../queue/replay.js"
import * as StoreCheck from "../queue/format/check-service.js"
import * as StoreHealth from "../observability/store-health.js"
import * as Tracing from "../observability/tracing.js"
import pkg from "../../package.json" with { type: "json" }
import { postgresUrl, redactUrl } from "../domain/config-store.js"
import { layerPostgres } from "../store/postgres.js"
import { layerRocksDb } from "../store/rocksdb.js"
import { Store } from "../store/store.js"
import * as Tenants from "../queue/tenants.js"
import * as Wake from "../queue/wake.js"
import * as Writer from "../queue/writer.js"
import { storeDirOf } from "./store.js"

export interface ServeOptions {
  readonly config?: string | undefined
  readonly dataDir?: string | undefined
  readonly port?: number | undefined
  readonly logLevel?: LogLevel | undefined
  readonly env?: Readonly<Record<string, string | undefined>>
}

/** The pipeline's sinks from the configuration, `{self}` resolved to the bound server. */
export const sinksOf = (config: Config, origin: string): ReadonlyArray<Pipeline.SinkOptions> =>
  config.sinks.map((s) => ({
    name: s.name,
    url: resolveUrl(s.url, origin),
    timeoutMs: s.timeoutMs,
    headers: s.headers,
    secret: s.secret,
    concurrency: s.concurrency,
    ratePerSec: s.ratePerSec,
    maxWaiting: s.maxWaiting,
    maxPauseMs: s.maxPauseMs,
    retry: s.retry,
    ordered: onDeadOf(s.ordered) === undefined ? undefined : { onDead: onDeadOf(s.ordered)! }
  }))

/** `next` built after `prev`, on its services; both out, released in reverse (boot is a chain of these). */
const andThen =
  <A, E, R>(next: Layer.Layer<A, E, R>) =>
  <B, E2, R2>(prev: Layer.Layer<B, E2, R2>) =>
    Layer.provideMerge(next, prev)

/** `{self}` of the sink URLs: the bound server's origin. */
const origin = Effect.map(HttpServer.HttpServer, (server) => Http.originOf(server.address))

const setPhase = (phase: Parameters<Gate.GateShape["setPhase"]>[0]) =>
  Layer.effectDiscard(Effect.flatMap(Gate.Gate, (gate) => gate.setPhase(phase)))

/** The store's layer: RocksDB in `storeDir`, or PostgreSQL at the URL (its password from the environment when the URL has none). */
export const storeLayer = (config: Config, storeDir: string, env: Readonly<Record<string, string | undefined>>) =>
  config.store.kind === "postgres"
    ? layerPostgres({
        url: Redacted.make(postgresUrl(config.store, env)),
        schema: config.store.postgres.schema,
        maxConnections: config.store.postgres.maxConnections,
        connectTimeoutMs: config.store.postgres.connectTimeoutMs
      })
    : layerRocksDb(storeDir)

/** Where the store is, as the logs say it: the directory, or the database's URL without its password. */
const storeWhere = (config: Config, storeDir: string) =>
  config.store.kind === "postgres" ? redactUrl(config.store.postgres.url) : storeDir

/**
 * 1. The store, in the directory `checkDataDir` made (refuses a newer format, or a store another
 * process holds) or in PostgreSQL, and `store check` on it for `POST /v1/store/check` (behind the
 * gate like all admin).
 */
const store = (config: Config, storeDir: string, env: Readonly<Record<string, string | undefined>>) =>
  storeLayer(config, storeDir, env).pipe(andThen(StoreCheck.layer))

/** 2. HTTP, gate closed: /healthz and /readyz answer during the rest of boot. */
const http = (config: Config, dataDir: string) =>
  Gate.layer.pipe(
    andThen(Http.layer(config)),
    andThen(Layer.effectDiscard(
      Effect.flatMap(origin, (address) => Effect.logInfo("listening; booting").pipe(Effect.annotateLogs({ address, dataDir })))
    ))
  )

/**
 * 2b. The store's lease, on a store several nodes share (PostgreSQL): a standby waits here, its
 * gate saying `standby`, and nothing before this step writes. Losing the lease later stops the
 * node (its service manager starts it again, as a standby).
 */
const lease = (config: Config) =>
  Layer.unwrap(
    Effect.map(Gate.Gate, (gate) =>
      Lease.layer(
        config.ha,
        gate.setPhase("standby"),
        // No drain: nothing this node sends can commit any more, and what it acknowledged is in the store.
        Effect.andThen(gate.setPhase("stopping"), Effect.sync(() => process.exit(Lease.EXIT_STEPPED_DOWN)))
      )
    )
  )

/** 3. Migrations (readyz stays false until they are done). */
const migrations = (config: Config) =>
  setPhase("migrating").pipe(
    andThen(Migrate.layer({ maxTenants: config.tenants.max })),
    andThen(Layer.effectDiscard(Effect.flatMap(Migrate.Migrate, (m) => m.await)))
  )

/** 4. Inflight rows left by the last run go back to due before anything dispatches. */
const recovery = setPhase("recovering").pipe(
  andThen(Queue.layer),
  andThen(Layer.effectDiscard(
    Effect.gen(function* () {
      const queue = yield* Queue.Queue
      const recovered = yield* queue.recoverInflight(yield* Clock.currentTimeMillis)
      if (recovered > 0) yield* Effect.logInfo("recovered inflight rows").pipe(Effect.annotateLogs({ rows: recovered }))
      // Ordered lanes: a promotion or a purge's repair that a crash cut short (docs/delivery.md "Ordered delivery").
      const lanes = yield* queue.recoverLanes(yield* Clock.currentTimeMillis)
      if (lanes > 0) yield* Effect.logInfo("recovered ordered lanes").pipe(Effect.annotateLogs({ lanes }))
    })
  ))
)

/**
 * 5. The services behind the gate, then the background work; the Writer wakes the pipeline through `Wake`.
 * `QueuedBytes` reads the counters before anything writes (it is exact from then on).
 */
const services = (config: Config, dataDir: string, storeDir: string) => {
  const quarantine = {
    maxCount: config.quarantine.maxCount,
    maxBytes: config.quarantine.maxBytes,
    retention: Duration.millis(config.quarantine.retentionMs)
  }
  const audit = { retention: Duration.millis(config.audit.retentionMs) }
  return Wake.layer.pipe(
    andThen(Tenants.layer),
    andThen(Limits.layer(config.tenants.limits)),
    andThen(QueuedBytes.layer),
    andThen(Layer.unwrap(Effect.map(Live.LiveConfig, (live) => DiskReserve.layer({
      dir: config.store.kind === "postgres" ? dataDir : storeDir,
      // The reserve guards RocksDB's own disk; PostgreSQL's disk is the database server's.
      minFreeBytes: () => (config.store.kind === "postgres" ? 0 : live.get().config.store.minFreeBytes)
    })))),
    // The attempt log hears the endpoints' changes (a deleted or disabled endpoint's log is dropped).
    andThen(Layer.provideMerge(AttemptLog.layer, Endpoints.layer)),
    // The operational events go through the Writer (src/delivery/operations.ts).
    andThen(Writer.layer({ ...config.writer, tenantsMax: config.tenants.max, dedupeWindowMs: config.dedupe.windowMs }).pipe(andThen(OperationalEvents.layer))),
    andThen(Layer.mergeAll(Quarantine.layer(quarantine), RequestAnswers.layer)),
    andThen(Audit.layer(audit)),
    andThen(Replay.layer),
    andThen(Archive.layer({
      dir: Archive.archiveDir(dataDir),
      enabled: config.archive.enabled,
      retention: Duration.millis(config.archive.retentionMs),
      segmentBytes: config.archive.segmentBytes
    })),
    // Before the pipeline: resumed erase jobs fence their tenants before any claim (TEN-5).
    andThen(Layer.mergeAll(Erase.layer(), Reclaim.layer())),
    // Each sweep step runs inside the Writer's commit section (src/lifecycle/dedupe-sweep.ts says why).
    andThen(Layer.unwrap(Effect.map(Writer.Writer, (writer) => DedupeSweep.layer({ exclusive: writer.exclusive })))),
    andThen(DlqCeiling.layer({ maxRows: config.dlq.maxRows, maxBytes: config.dlq.maxBytes })),
    andThen(Layer.unwrap(Effect.map(origin, (self) => Pipeline.layer({ ...config.pipeline, sinks: sinksOf(config, self), sinksOf: (c) => sinksOf(c, self) })))),
    andThen(Gauges.layer({ intervalMs: config.gauges.intervalMs })),
    andThen(StoreHealth.layer({ intervalMs: config.gauges.intervalMs })),
    andThen(EventLoopMetrics.layer),
    andThen(LifecycleMetrics.layer),
    andThen(ProcessMetrics.layer()),
    andThen(Layer.mergeAll(
      Quarantine.layerPruner(quarantine),
      Audit.layerPruner(audit),
      Reclaim.layerSchedule(),
      DedupeSweep.layerSchedule(),
      DlqCeiling.layerSchedule(),
      // Always on: with the archive off it still drops obligations past retention.
      Archive.layerCompactor()
    ))
  )
}

/** 6. Open. The first finalizer to run at shutdown closes the gate again. */
const open = (config: Config, dataDir: string, storeDir: string) =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const gate = yield* Gate.Gate
      yield* Effect.addFinalizer(() =>
        Effect.andThen(gate.setPhase("stopping"), Effect.logInfo("stopping: the gate is closed; draining"))
      )
      yield* gate.open(yield* Effect.context<Gate.ApiServices>())
      const format = yield* (yield* Store).format
      const tenants = yield* (yield* Tenants.Tenants).count
      // The start line is printed at every log.level: it is how `--port 0` tells its port.
      yield* Effect.logInfo("ankusa serving").pipe(
        Effect.annotateLogs({
          address: yield* origin,
          dataDir,
          store: storeWhere(config, storeDir),
          storeKind: config.store.kind,
          format,
          tenants,
          families: familiesOf(format).map((f) => f.name),
          sources: config.sources.map((s) => s.id),
          sinks: config.sinks.map((s) => s.name)
        }),
        Effect.provideService(References.MinimumLogLevel, "All")
      )
    })
  )

/**
 * Check the data directory (a refusal is a `ConfigError`, before anything has
 * started, so no `stopped` line), then boot in the order above, serve until
 * interrupted, shut down in reverse.
 */
export const serve = (config: Config, options: ConfigLoader.LoadOptions = {}) => {
  const dataDir = path.resolve(config.dataDir)
  const storeDir = storeDirOf(dataDir)
  // First: SIGHUP reloads from here on (docs/configuration.md "Reloading"), never ends the process.
  const launched = Live.layer(config, options).pipe(
    // Tracing (off unless telemetry.otlp.endpoint is set) before the parts that start spans; its exporter flushes last.
    andThen(Tracing.layer(config.telemetry, pkg.version)),
    andThen(store(config, storeDir, options.env ?? process.env)),
    andThen(http(config, dataDir)),
    andThen(lease(config)),
    andThen(migrations(config)),
    andThen(recovery),
    andThen(services(config, dataDir, storeDir)),
    andThen(open(config, dataDir, storeDir)),
    Layer.launch,
    Effect.ensuring(Effect.logInfo("stopped"))
  )
  return Effect.andThen(checkDataDir(dataDir, config.store.kind === "postgres" ? undefined : storeDir), launched)
}

/** Load the configuration (refusing a bad one with the key named), then serve with its logger. */
export const run = (options: ServeOptions) =>
  Effect.gen(function* () {
    const load: ConfigLoader.LoadOptions = {
      file: options.config,
      dataDir: options.dataDir,
      port: options.port,
      logLevel: options.logLevel,
      ...(options.env === undefined ? {} : { env: options.env })
    }
    const config = yield* ConfigLoader.load(load)
    return yield* serve(config, load).pipe(Effect.provide(Logger.layer(config.log.level)))
  })
