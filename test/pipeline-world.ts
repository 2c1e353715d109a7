/**
 * Helpers for the pipeline and gauge tests: a store (RocksDB in a temp dir, or
 * memory) with the Queue on it, hooks ingested through `Deliveries.ingest`
 * batches with their tenant allocations, and a Pipeline started in its own
 * scope so a test can shut it down while the store stays open.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import * as Deliveries from "../src/domain/deliveries.js"
import { encodeEnvelope, type Envelope } from "../src/domain/envelope.js"
import type { Op } from "../src/domain/ops.js"
import * as Tenants from "../src/domain/tenants.js"
import * as Pipeline from "../src/delivery/pipeline.js"
import * as Queue from "../src/queue/queue.js"
import * as Wake from "../src/queue/wake.js"
import { Store, type StoreShape } from "../src/store/store.js"
import { layerMemory } from "../src/store/memory.js"
import { layerRocksDb } from "../src/store/rocksdb.js"
import type { RetrySchedule } from "../src/domain/retry-schedule.js"

export const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-pipeline-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

export interface World {
  readonly store: StoreShape
  readonly queue: Queue.QueueShape
  readonly context: Context.Context<Store | Queue.Queue>
}

const build = (storeLayer: Layer.Layer<Store, unknown>) =>
  Effect.gen(function* () {
    const context = yield* Layer.build(Queue.layer.pipe(Layer.provideMerge(storeLayer))).pipe(Effect.orDie)
    return { store: Context.get(context, Store), queue: Context.get(context, Queue.Queue), context } satisfies World
  })

/** RocksDB in a fresh temp dir, removed after the scope (the store closes first). */
export const rocksWorld = Effect.flatMap(tempDir, (dir) => build(layerRocksDb(dir)))
export const memoryWorld = build(layerMemory())

/** A quick retry schedule: three retries 50 ms apart. */
export const fast: RetrySchedule = { delaysMs: [50, 50, 50], jitter: 0, maxRetryAfterMs: 5_000 }

/** A sink of the pipeline's options with test defaults (5 s timeout, concurrency 4, `fast` retries). */
export const sinkOf = (name: string, url: string, o: Partial<Pipeline.SinkOptions> = {}): Pipeline.SinkOptions => ({
  name,
  url,
  timeoutMs: 5_000,
  headers: {},
  concurrency: 4,
  retry: fast,
  ...o
})

/** A started pipeline and the effect that shuts it down (also run when the test's scope ends). */
export const startPipeline = (world: World, input: Pipeline.Input) =>
  Effect.gen(function* () {
    const outer = yield* Effect.scope
    const scope = yield* Scope.fork(outer, "sequential")
    const layer = Pipeline.layer(input).pipe(Layer.provideMerge(Wake.layer), Layer.provide(Layer.succeedContext(world.context)))
    const ctx = yield* Layer.buildWithScope(layer, scope)
    return { pipeline: Context.get(ctx, Pipeline.Pipeline), wake: Context.get(ctx, Wake.Wake), shutdown: Scope.close(scope, Exit.void) }
  })

export interface HookSpec {
  readonly tenant: string
  readonly sinks: ReadonlyArray<string>
  readonly at: number
  readonly body?: Uint8Array
  readonly contentType?: string
  readonly headers?: Readonly<Record<string, string>>
  readonly sourceId?: string
  /** With an archive obligation (`?a`). */
  readonly archive?: boolean
}

export interface Ingested extends HookSpec {
  readonly seq: number
  readonly ord: number
  readonly id: string
  readonly envelope: Envelope
  readonly size: number
}

/** Ordinals by tenant, 1 up, in first-seen order: a new tenant's allocation ops go into `alloc`. */
export const makeOrdinals = () => {
  const ords = new Map<string, number>()
  return (tenant: string, alloc: Array<Op>): number => {
    let ord = ords.get(tenant)
    if (ord === undefined) {
      ord = ords.size + 1
      ords.set(tenant, ord)
      alloc.push(...Tenants.allocate(tenant, ord), Tenants.nextOrdOp(ord + 1))
    }
    return ord
  }
}

/** Assigns seqs and tenant ordinals like the Writer does, and commits hooks in `Deliveries.ingest` batches. */
export const makeIngest = (store: StoreShape) => {
  const ordinalOf = makeOrdinals()
  let nextSeq = 1
  return (hooks: ReadonlyArray<HookSpec>) =>
    Effect.gen(function* () {
      const alloc: Array<Op> = []
      const out: Array<Ingested> = []
      for (const h of hooks) {
        const ord = ordinalOf(h.tenant, alloc)
        const seq = nextSeq++
        const envelope: Envelope = {
          id: `msg_${seq}`,
          tenantId: h.tenant,
          sourceId: h.sourceId ?? "src",
          receivedAt: h.at,
          contentType: h.contentType ?? "application/json",
          headers: h.headers ?? {},
          sinks: h.sinks,
          idempotencyKey: null,
          body: h.body ?? Buffer.from(JSON.stringify({ seq }))
        }
        const encoded = encodeEnvelope(envelope)
        out.push({ ...h, seq, ord, id: envelope.id, envelope, size: encoded.length })
      }
      const ts = out.map((h) =>
        Deliveries.ingest({ seq: h.seq, ord: h.ord, envelope: encodeEnvelope(h.envelope), sinkCount: h.sinks.length, at: h.at, archive: h.archive === true })
      )
      yield* store.write(Deliveries.batch(ts, alloc), { sync: true })
      return out
    })
}

/** Poll `check` until it holds (returns true) or fail after `timeoutMs`. */
export const until = <E, R>(what: string, check: Effect.Effect<boolean, E, R>, timeoutMs = 10_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      if (yield* check) return
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for: ${what}`))
      yield* Effect.sleep("20 millis")
    }
  })
