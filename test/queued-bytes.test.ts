/**
 * `QueuedBytes` (src/queue/queued-bytes.ts): admission's in-memory copy of
 * every tenant's `bytes` counter, read at start and then moved by every batch
 * the store applies, equals the counters the store holds after any sequence
 * of writes, failed ones included (a failed write moves neither).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Counters from "../src/domain/counters.js"
import { counterKey } from "../src/domain/keys.js"
import type { Op } from "../src/domain/ops.js"
import * as QueuedBytes from "../src/queue/queued-bytes.js"
import { makeMemoryStore, MemoryDb } from "../src/store/memory.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import { Store, type StoreShape } from "../src/store/store.js"

const ORDS = 6
const FIELDS = ["pending", "bytes", "dead"] as const

const delta = fc.record({
  ord: fc.integer({ min: 1, max: ORDS }),
  field: fc.constantFrom(...FIELDS),
  delta: fc.integer({ min: -5_000, max: 5_000 })
})
const batch = fc.record({ deltas: fc.array(delta, { minLength: 1, maxLength: 8 }), fail: fc.boolean() })

const opsOf = (deltas: ReadonlyArray<Counters.Delta>): Array<Op> => Counters.ops(deltas)

/** Every ordinal's `bytes` counter as the store holds it, and as `QueuedBytes` says. */
const compare = (store: StoreShape, figures: QueuedBytes.QueuedBytesShape) =>
  Effect.map(store.getCounters("counters", Array.from({ length: ORDS + 1 }, (_, o) => counterKey(o, Counters.Fields.bytes))), (totals) => ({
    store: totals.map(Number),
    memory: Array.from({ length: ORDS + 1 }, (_, o) => figures.of(o))
  }))

const run = (store: StoreShape, before: ReadonlyArray<Counters.Delta>, after: ReadonlyArray<{ deltas: Array<Counters.Delta>; fail: boolean }>, failNext: (() => void) | undefined) =>
  Effect.scoped(
    Effect.gen(function* () {
      if (before.length > 0) yield* store.write(opsOf(before), { sync: false })
      const figures = yield* QueuedBytes.make.pipe(Effect.provideService(Store, store))
      for (const b of after) {
        if (b.fail && failNext !== undefined) failNext()
        yield* Effect.ignore(store.write(opsOf(b.deltas), { sync: false }))
      }
      return yield* compare(store, figures)
    })
  )

describe("queued bytes", () => {
  it.live("the in-memory queued bytes equal the bytes counters after any sequence of writes", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(fc.array(delta, { maxLength: 20 }), fc.array(batch, { maxLength: 30 }), (before, after) =>
          Effect.runPromise(
            Effect.gen(function* () {
              const db = new MemoryDb()
              const store = yield* makeMemoryStore({ db })
              const r = yield* run(store, before, after, () => void (db.failNextWrite = 1))
              expect(r.memory).toEqual(r.store)
            })
          )
        ),
        { numRuns: 100 }
      )
    ))

  it.live("the in-memory queued bytes equal the bytes counters on RocksDB", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-queued-bytes-"))),
          (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
        )
        const store = yield* makeRocksDbStore(dir)
        const [before, after] = fc.sample(fc.tuple(fc.array(delta, { maxLength: 40 }), fc.array(batch, { maxLength: 60 })), { numRuns: 1, seed: 24 })[0]!
        const r = yield* run(store, before, after, undefined)
        expect(r.memory).toEqual(r.store)
        expect(r.store.some((n) => n !== 0)).toBe(true)
      })
    ))
})
