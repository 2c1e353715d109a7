/**
 * `ankusa serve` (what `npm start` runs; product.md "Running it"): the HTTP
 * server, the Writer, the dispatch pipeline, the gauge tick, the store
 * health and process memory gauges, quarantine and audit pruning, the dedupe
 * sweep, the DLQ ceiling, archive and reclaim, on the RocksDB store in
 * `<dataDir>/store`.
 *
 * Boot, in order (docs/deployment.md "Boot and shutdown"): open the store;
 * bind HTTP with the gate closed (`/healthz` answers, `/readyz` is 503);
 * run the migrations; return inflight rows to due (`recoverInflight`) BEFORE
 * the pipeline starts; start the Writer, the pipeline and the background
 * fibers; open the gate. Shutdown (SIGTERM/SIGINT through `NodeRuntime.runMain`
 * interrupting the main fiber) releases in reverse: the gate closes first
 * (ingest and admin answer 503), the pipeline lets inflight sink calls finish
 * within `pipeline.graceMs` (rows still inflight are left for the next boot's
 * recovery), the Writer commits what it holds, the server closes, the store
 * closes.
 */
import { Clock, Context, Duration, Effect, Layer, type Scope } from "effect"
import { HttpServer } from "effect/http"
import * as fs from "node:fs"
import * as path from "node:path"
import { type Config, type LogLevel, resolveUrl } from "../domain/config.js"
import { familiesOf } from "../domain/keys.js"
import * as Archive from "../lifecycle/archive.js"
import * as Audit from "../lifecycle/audit.js"
import * as ConfigLoader from "../config/config.js"
import * as DedupeSweep from "../lifecycle/dedupe-sweep.js"
import * as DlqCeiling from "../lifecycle/dlq-ceiling.js"
import * as EventLoopMetrics from "../observability/event-loop-metrics.js"
import * as Gauges from "../observability/gauges.js"
import * as Gate from "../http/gate.js"
import * as Http from "../http/server.js"
import * as LifecycleMetrics from "../observability/lifecycle-metrics.js"
import * as Logger from "../observability/logger.js"
import * as Migrate from "../queue/format/migrate.js"
import * as Pipeline from "../delivery/pipeline.js"
import * as ProcessMetrics from "../observability/process-metrics.js"
import * as Quarantine from "../lifecycle/quarantine.js"
import * as Queue from "../queue/queue.js"
import * as Reclaim from "../lifecycle/reclaim.js"
import * as Replay from "../queue/replay.js"
import * as StoreHealth from "../observability/store-health.js"
import { layerRocksDb } from "../store/rocksdb.js"
import { Store } from "../store/store.js"
import * as Tenants from "../queue/tenants.js"
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
    retry: s.retry
  }))

// Boot builds one layer at a time, in order, in one scope (released in reverse), each on the
// context of the ones before. Requirements are met by that order, which the types cannot follow.
type Ctx = Context.Context<any>

/** Build a layer in the current scope on top of `ctx`; the result has both. */
const build = <ROut, E, RIn>(ctx: Ctx, layer: Layer.Layer<ROut, E, RIn>): Effect.Effect<Ctx, E, Scope.Scope> =>
  Layer.build(layer).pipe(
    Effect.provide(ctx as Context.Context<RIn>),
    Effect.map((out): Ctx => Context.merge(ctx, out))
  )

/** Boot, serve until interrupted, shut down. */
export const serve = (config: Config) =>
  Effect.scoped(
    Effect.gen(function* () {
      let wakePipeline: Effect.Effect<void> = Effect.void
      const dataDir = path.resolve(config.dataDir)
      const storeDir = storeDirOf(dataDir)
      fs.mkdirSync(storeDir, { recursive: true })

      // 1. The store (refuses a newer format or a store another process holds).
      let ctx = yield* build(Context.empty() as Ctx, layerRocksDb(storeDir))
      const store = Context.get(ctx, Store)

      // 2. HTTP, gate closed: /healthz and /readyz answer during the rest of boot.
      ctx = yield* build(ctx, Gate.layer)
      const gate = Context.get(ctx, Gate.Gate)
      ctx = yield* build(ctx, Http.layer(config))
      const origin = Http.originOf(Context.get(ctx, HttpServer.HttpServer).address)
      yield* Effect.logInfo("listening; booting").pipe(Effect.annotateLogs({ address: origin, dataDir }))

      // 3. Migrations (readyz stays false until they are done).
      yield* gate.setPhase("migrating")
      ctx = yield* build(ctx, Migrate.layer({ maxTenants: config.tenants.max }))
      yield* Effect.flatMap(Migrate.Migrate, (m) => m.await).pipe(Effect.provide(ctx))

      // 4. Inflight rows left by the last run go back to due before anything dispatches.
      yield* gate.setPhase("recovering")
      ctx = yield* build(ctx, Queue.layer)
      const now = yield* Clock.currentTimeMillis
      const recovered = yield* Effect.flatMap(Queue.Queue, (q) => q.recoverInflight(now)).pipe(Effect.provide(ctx))
      if (recovered > 0) yield* Effect.logInfo("recovered inflight rows").pipe(Effect.annotateLogs({ rows: recovered }))

      // 5. The services behind the gate, then the background work.
      ctx = yield* build(ctx, Tenants.layer)
      ctx = yield* build(
        ctx,
        Writer.layer(
          {
            ...config.writer,
            tenantsMax: config.tenants.max,
            dedupeWindowMs: config.dedupe.windowMs
          },
          // The pipeline starts later; until then a commit wakes nobody.
          { onCommit: Effect.suspend(() => wakePipeline) }
        )
      )
      const writer = Context.get(ctx, Writer.Writer)
      const quarantine = {
        maxCount: config.quarantine.maxCount,
        maxBytes: config.quarantine.maxBytes,
        retention: Duration.millis(config.quarantine.retentionMs)
      }
      const audit = { retention: Duration.millis(config.audit.retentionMs) }
      ctx = yield* build(ctx, Quarantine.layer(quarantine))
      ctx = yield* build(ctx, Audit.layer(audit))
      ctx = yield* build(ctx, Replay.layer)
      ctx = yield* build(
        ctx,
        Archive.layer({
          dir: Archive.archiveDir(dataDir),
          enabled: config.archive.enabled,
          retention: Duration.millis(config.archive.retentionMs),
          segmentBytes: config.archive.segmentBytes
        })
      )
      ctx = yield* build(ctx, Reclaim.layer())
      // Each sweep step runs inside the Writer's commit section (src/lifecycle/dedupe-sweep.ts says why).
      ctx = yield* build(ctx, DedupeSweep.layer({ exclusive: writer.exclusive }))
      ctx = yield* build(ctx, DlqCeiling.layer({ maxRows: config.dlq.maxRows, maxBytes: config.dlq.maxBytes }))
      ctx = yield* build(
        ctx,
        Pipeline.layer({ ...config.pipeline, sinks: sinksOf(config, origin) })
      )
      wakePipeline = Context.get(ctx, Pipeline.Pipeline).wake
      ctx = yield* build(ctx, Gauges.layer({ intervalMs: config.gauges.intervalMs }))
      ctx = yield* build(ctx, StoreHealth.layer({ intervalMs: config.gauges.intervalMs }))
      ctx = yield* build(ctx, EventLoopMetrics.layer)
      ctx = yield* build(ctx, LifecycleMetrics.layer)
      ctx = yield* build(ctx, ProcessMetrics.layer())
      ctx = yield* build(
        ctx,
        Layer.mergeAll(
          Quarantine.layerPruner(quarantine),
          Audit.layerPruner(audit),
          Reclaim.layerSchedule(),
          DedupeSweep.layerSchedule(),
          DlqCeiling.layerSchedule(),
          // Always on: with the archive off it still drops obligations past retention.
          Archive.layerCompactor()
        )
      )

      // 6. Open. The first finalizer to run at shutdown closes the gate again.
      yield* Effect.addFinalizer(() =>
        Effect.andThen(gate.setPhase("stopping"), Effect.logInfo("stopping: the gate is closed; draining"))
      )
      yield* gate.open(ctx)
      const format = yield* store.format
      yield* Effect.logInfo("ankusa serving").pipe(
        Effect.annotateLogs({
          address: origin,
          dataDir,
          store: storeDir,
          format,
          families: familiesOf(format).map((f) => f.name),
          sources: config.sources.map((s) => s.id),
          sinks: config.sinks.map((s) => s.name)
        })
      )
      return yield* Effect.never
    })
  ).pipe(Effect.ensuring(Effect.logInfo("stopped")))

/** Load the configuration (refusing a bad one with the key named), then serve with its logger. */
export const run = (options: ServeOptions) =>
  Effect.gen(function* () {
    const config = yield* ConfigLoader.load({
      file: options.config,
      dataDir: options.dataDir,
      port: options.port,
      logLevel: options.logLevel,
      ...(options.env === undefined ? {} : { env: options.env })
    })
    return yield* serve(config).pipe(Effect.provide(Logger.layer(config.log.level)))
  })
