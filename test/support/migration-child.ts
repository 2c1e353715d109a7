/**
 * A migration in a child process, for the SIGKILL case of
 * test/migration.test.ts: `node --import tsx test/support/migration-child.ts DIR STEP_ROWS`
 * prints `step N` after every committed step until the parent kills it.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import * as Migrate from "../../src/queue/format/migrate.js"
import { makeRocksDbStore } from "../../src/store/rocksdb.js"

const [dir, stepRows] = process.argv.slice(2)
if (dir === undefined || stepRows === undefined) throw new Error("usage: migration-child.ts DIR STEP_ROWS")

Effect.scoped(
  Effect.flatMap(makeRocksDbStore(dir), (store) =>
    Migrate.runPending(store, {
      stepRows: Number(stepRows),
      progressIntervalMs: 0,
      onProgress: (p) => Effect.sync(() => process.stdout.write(`step ${p.steps}\n`))
    })
  )
).pipe(NodeRuntime.runMain)
