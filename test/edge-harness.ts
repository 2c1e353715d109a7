/**
 * The HTTP edge over real services for the edge tests: RocksDB in a temp dir
 * (or a given store layer), the Writer, Queue, QueuedBytes, Tenants, Limits, Endpoints, Quarantine,
 * Audit and Replay, and the server on 127.0.0.1 port 0. Requests go through `fetch`.
 */
import { Context, Effect, Layer, Result, type Scope } from "effect"
import { HttpServer } from "effect/http"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Cfg from "../src/domain/config.js"
import * as Archive from "../src/lifecycle/archive.js"
import * as Audit from "../src/lifecycle/audit.js"
import * as Erase from "../src/lifecycle/erase.js"
import * as Gate from "../src/http/gate.js"
import * as Http from "../src/http/server.js"
import * as Endpoints from "../src/queue/endpoints.js"
import * as Limits from "../src/queue/limits.js"
import * as Quarantine from "../src/lifecycle/quarantine.js"
import * as Queue from "../src/queue/queue.js"
import * as QueuedBytes from "../src/queue/queued-bytes.js"
import * as Replay from "../src/queue/replay.js"
import { layerRocksDb } from "../src/store/rocksdb.js"
import { Store, type StoreShape } from "../src/store/store.js"
import * as Tenants from "../src/queue/tenants.js"
import * as Wake from "../src/queue/wake.js"
import * as Writer from "../src/queue/writer.js"

export const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-edge-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** A configuration from a file-shaped input, on a free port. */
export const configOf = (input: Cfg.ConfigInput): Cfg.Config => {
  const decoded = Cfg.decode({ ...input, http: { ...input.http, host: "127.0.0.1", port: 0 } })
  if (Result.isFailure(decoded)) throw new Error(`bad test config: ${String(decoded.failure)}`)
  return decoded.success
}

export interface Edge {
  readonly url: string
  readonly store: StoreShape
  /** The services behind the gate, and the Store under them (tests set up rows the edge then reads). */
  readonly context: Context.Context<Gate.ApiServices | Store>
  readonly run: <A, E>(effect: Effect.Effect<A, E, Gate.ApiServices | Store>) => Promise<A>
  readonly fetch: (path: string, init?: RequestInit) => Promise<Response>
}

export interface EdgeOptions {
  /** The store layer; default RocksDB in a temp dir removed afterwards. */
  readonly store?: Layer.Layer<Store, unknown>
  /** Leave the gate closed (the node is starting). */
  readonly closed?: boolean
  /** Also the archive (in a temp dir) and the `Erase` service with these options (TEN-5). */
  readonly erase?: Erase.EraseOptions
}

/** The services behind the gate, on a Store. */
export const services = (config: Cfg.Config) =>
  Layer.mergeAll(
    Tenants.layer,
    Endpoints.layer,
    // No pipeline here: the Writer's wakes go to a Wake nobody waits on.
    Writer.layer({ ...config.writer, tenantsMax: config.tenants.max, dedupeWindowMs: config.dedupe.windowMs }).pipe(Layer.provide(Wake.layer)),
    Quarantine.layer(),
    Audit.layer(),
    Replay.layer
  ).pipe(Layer.provideMerge(Limits.layer(config.tenants.limits)), Layer.provideMerge(QueuedBytes.layer), Layer.provideMerge(Queue.layer))

export const startEdge = (config: Cfg.Config, options: EdgeOptions = {}): Effect.Effect<Edge, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    const storeLayer = options.store ?? Layer.unwrap(Effect.map(tempDir, (dir) => layerRocksDb(dir)))
    const withErase =
      options.erase === undefined
        ? services(config)
        : Erase.layer(options.erase).pipe(
            Layer.provideMerge(Layer.unwrap(Effect.map(tempDir, (dir) => Archive.layer({ dir, enabled: true })))),
            Layer.provideMerge(services(config))
          )
    const base = withErase.pipe(Layer.provideMerge(storeLayer))
    const gate = options.closed === true ? Gate.layer : Gate.layerOpen
    const ctx = yield* Layer.build(Http.layer(config).pipe(Layer.provideMerge(gate), Layer.provideMerge(base)))
    const origin = Http.originOf(Context.get(ctx, HttpServer.HttpServer).address)
    const context = ctx as unknown as Context.Context<Gate.ApiServices | Store>
    return {
      url: origin,
      store: Context.get(ctx, Store),
      context,
      run: (effect) => Effect.runPromise(Effect.provide(effect, context)),
      fetch: (p, init) => fetch(origin + p, init)
    }
  })

/** Body and status of a response, the body parsed as JSON when it is JSON. */
export const read = async (r: Response): Promise<{ status: number; body: any; headers: Headers }> => {
  const text = await r.text()
  let body: unknown = text
  try {
    body = text === "" ? null : JSON.parse(text)
  } catch {
    // not JSON
  }
  return { status: r.status, body, headers: r.headers }
}

/** The value of one series in Prometheus text, 0 when absent. */
export const metricValue = (text: string, series: string): number => {
  const line = text.split("\n").find((l) => l.startsWith(series + " "))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}
