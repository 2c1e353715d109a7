/**
 * Child of test/archive-crash.test.ts: on a RocksDB store, ingests hooks
 * with the archive on (synced, `ingested <lastSeq>` after each batch) and
 * runs compactor steps (`settled <cursor lastSeq>` after each), until it is
 * killed. With PAUSE=1 it prints `appended` after a block is fsynced and
 * waits before its settle, so a kill there leaves a tail past the cursor.
 * Its start runs the archive's repair like any boot.
 * Usage: node --import tsx test/support/archive-crash-child.ts STORE_DIR ARCHIVE_DIR
 */
import { Effect } from "effect"
import * as Deliveries from "../../src/domain/deliveries.js"
import * as K from "../../src/domain/keys.js"
import * as Tenants from "../../src/domain/tenants.js"
import * as Archive from "../../src/lifecycle/archive.js"
import { Store } from "../../src/store/store.js"
import { makeRocksDbStore } from "../../src/store/rocksdb.js"
import { envelopeOf } from "../lifecycle-helpers.js"
import * as Queue from "../../src/queue/queue.js"

export const PER_BATCH = 25
export const SEGMENT_BYTES = 16 * 1024
export const BLOCK_BYTES = 4 * 1024

const [storeDir, archiveDir] = process.argv.slice(2)
const pause = process.env.PAUSE === "1"

if (import.meta.url === `file://${process.argv[1]}`) {
  void Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const store = yield* makeRocksDbStore(storeDir!)
        yield* store.write([...Tenants.allocate("t1", 1), Tenants.nextOrdOp(2)], { sync: true })
        const archive = yield* Archive.make(
          { dir: archiveDir!, enabled: true, segmentBytes: SEGMENT_BYTES, blockBytes: BLOCK_BYTES, chunk: 40 },
          pause ? { afterAppend: Effect.sync(() => process.stdout.write("appended\n")).pipe(Effect.andThen(Effect.never)) } : {}
        ).pipe(Effect.provideService(Store, store), Effect.provideService(Queue.Queue, Queue.make(store)))
        const last = yield* store.first("hooks", K.familyDataRange(K.Families.hooks), { reverse: true })
        let seq = last === undefined ? 1 : K.decodeHookKey(last.key) + 1
        for (;;) {
          const ts: Array<Deliveries.Transition> = []
          for (let i = 0; i < PER_BATCH; i++, seq++) {
            const envelope = envelopeOf(seq, 1, Date.now(), 1, 50 + (seq % 200))
            ts.push(Deliveries.ingest({ seq, ord: 1, envelope, sinkCount: 1, at: Date.now(), archive: true }))
          }
          yield* store.write(Deliveries.batch(ts), { sync: true })
          process.stdout.write(`ingested ${seq - 1}\n`)
          yield* archive.step
          process.stdout.write(`settled ${(yield* archive.cursor)?.lastSeq ?? 0}\n`)
        }
      })
    )
  ).catch((e) => {
    process.stderr.write(`${String(e)}\n`)
    process.exit(1)
  })
}
