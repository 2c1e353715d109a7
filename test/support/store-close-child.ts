/**
 * Child of test/store-rocksdb.test.ts: opens a RocksDB store with worker commits, commits
 * synced batches, closes the store's scope, then prints `closed`. Nothing else holds the
 * event loop, so the process only gets there if closing the store does not let it exit early.
 * Usage: node --import tsx test/support/store-close-child.ts DIR
 */
import { Effect } from "effect"
import { put } from "../../src/domain/ops.js"
import { makeRocksDbStore } from "../../src/store/rocksdb.js"

const dir = process.argv[2]!
void Effect.runPromise(
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* makeRocksDbStore(dir, { commitThread: "worker" })
      for (let n = 0; n < 50; n++) yield* store.write([put("default", Buffer.from(`t:close:${n}`), Buffer.from([n]))], { sync: true })
    })
  )
).then(() => process.stdout.write("closed\n"))
