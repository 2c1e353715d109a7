/**
 * Child of test/store-crash.test.ts: commits synced batches in a loop until it
 * is killed, printing `committed <n>` after each commit succeeds. Batch n puts
 * PUTS hook rows `<<n::64, j::16>>`, one delivery row and one index row, and
 * merges +1, +PUTS and -1 into three counters. It resumes after the batches
 * already in the store (counter 1 holds their number).
 * Usage: node --import tsx test/support/store-crash-child.ts DIR main|worker
 */
import { Effect } from "effect"
import { counterKey, encodeU64 } from "../../src/domain/keys.js"
import { merge, type Op, put } from "../../src/domain/ops.js"
import { makeRocksDbStore } from "../../src/store/rocksdb.js"

export const PUTS = 40

export const hookRow = (n: number, j: number) => {
  const b = Buffer.alloc(10)
  b.writeBigUInt64BE(BigInt(n))
  b.writeUInt16BE(j, 8)
  return b
}
export const counters = [counterKey(1, 1), counterKey(1, 2), counterKey(1, 3)] as const

const batch = (n: number): Array<Op> => [
  ...Array.from({ length: PUTS }, (_, j) => put("hooks", hookRow(n, j), Buffer.alloc(200, n & 0xff))),
  put("deliveries", encodeU64(n), Buffer.from([1])),
  put("index", Buffer.concat([Buffer.from("Z"), encodeU64(n)])),
  merge("counters", counters[0], 1n),
  merge("counters", counters[1], BigInt(PUTS)),
  merge("counters", counters[2], -1n)
]

const [dir, thread] = process.argv.slice(2)
if (import.meta.url === `file://${process.argv[1]}`) {
  void Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const store = yield* makeRocksDbStore(dir!, { commitThread: thread === "main" ? "main" : "worker" })
        const [done] = yield* store.getCounters("counters", [counters[0]])
        for (let n = Number(done) + 1; ; n++) {
          yield* store.write(batch(n), { sync: true })
          process.stdout.write(`committed ${n}\n`)
        }
      })
    )
  ).catch((e) => {
    process.stderr.write(`${String(e)}\n`)
    process.exit(1)
  })
}
