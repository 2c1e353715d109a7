/**
 * delivery-bench's PostgreSQL floor: the claim and settle batches of a drain, written by a plain
 * script (pg-floor.ts). The batches are what TEN-1's transitions write (delivery-floor.ts
 * `transitionsLoop`: claims of the defaults' shape, outcomes settled as delivered), recorded on
 * a memory store; the script then writes the queued hooks (not measured), the warm-up's batches,
 * and the measured batches to a fresh database, one statement each, unsynced as the pipeline's
 * claims and settles are. CPU a delivery: this process plus every PostgreSQL process.
 */
import { Effect, Layer } from "effect"
import type { Batch } from "../../src/domain/ops.js"
import { Queue } from "../../src/queue/queue.js"
import * as QueueLayer from "../../src/queue/queue.js"
import { makeMemoryStore } from "../../src/store/memory.js"
import { Store, type StoreShape } from "../../src/store/store.js"
import { type StoreAloneShape, transitionsLoop } from "./delivery-floor.js"
import { type FloorCost, measureWithPg, plainWriter } from "./pg-floor.js"
import { builder, dueHooks } from "./queued-store.js"

export const pgTransitionsFloor = (url: string, postmaster: number, shape: StoreAloneShape): Effect.Effect<FloorCost & { readonly batches: number }, unknown> =>
  Effect.scoped(
    Effect.gen(function* () {
      const memory = yield* makeMemoryStore()
      const recorded = { setup: [] as Array<Batch>, warmup: [] as Array<Batch>, measured: [] as Array<Batch> }
      let phase: keyof typeof recorded = "setup"
      let synced = 0
      const store: StoreShape = {
        ...memory,
        write: (batch, o) => {
          recorded[phase].push(batch)
          if (o.sync && phase !== "setup") synced++
          return memory.write(batch, o)
        }
      }
      const b = yield* builder(store, { sinks: ["sink"], bodyBytes: shape.bodyBytes })
      const ords = Array.from({ length: shape.tenants }, (_, i) => i + 1)
      yield* b.add(dueHooks(ords, shape.warmup + shape.rows, Date.now() - 1_000, 60_000))
      const queue = yield* Effect.provide(Queue, QueueLayer.layer.pipe(Layer.provide(Layer.succeed(Store, store))))
      const drain = transitionsLoop(queue, shape, ords)
      phase = "warmup"
      yield* drain(shape.warmup)
      phase = "measured"
      const rows = yield* drain(shape.rows)
      if (synced > 0) return yield* Effect.die(new Error(`the drain's claims and settles are unsynced, yet ${synced} were synced`))
      const w = yield* plainWriter(url, "off")
      for (const batch of [...recorded.setup, ...recorded.warmup]) yield* w.write(batch)
      yield* w.exec("CHECKPOINT")
      const cost = yield* Effect.promise(() =>
        measureWithPg(postmaster, rows, () => Effect.runPromise(Effect.forEach(recorded.measured, w.write, { discard: true })))
      )
      return { ...cost, batches: recorded.measured.length }
    })
  )
