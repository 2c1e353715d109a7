/**
 * The commit worker: owns no DB of its own. It attaches to the main thread's
 * open RocksDB through `db.handle` (db_open on an open Database only returns
 * its column families) and commits one encoded batch per message, in arrival
 * order, replying `{ id }` or `{ id, error }`. Never closes the DB: the main
 * thread terminates this worker first, then closes it (rocksdb-commit.ts).
 * Plain JavaScript so it runs under node, tsx and vitest without a loader.
 */
import { RocksLevel } from "@nxtedition/rocksdb"
import { parentPort, workerData } from "node:worker_threads"
import { commitEncoded } from "./rocksdb-wire.mjs"

const { handle, names, maxRangeDeleteKeys } = workerData
const port = parentPort

try {
  const db = new RocksLevel(handle)
  await db.open({})
  const columns = names.map((name) => {
    const column = db.columns[name]
    if (column === undefined) throw new Error(`column family ${name} is not open`)
    return column
  })
  port.on("message", ({ id, sync, buffer }) => {
    try {
      commitEncoded(db, columns, buffer, { sync, maxRangeDeleteKeys, names })
      port.postMessage({ id })
    } catch (e) {
      port.postMessage({ id, error: { code: String(e?.code ?? "COMMIT_FAILED"), message: String(e?.message ?? e) } })
    }
  })
  port.postMessage({ ready: true })
} catch (e) {
  port.postMessage({ fatal: String(e?.message ?? e) })
}
