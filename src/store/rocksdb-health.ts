/**
 * The RocksDB store's health (`StoreShape.health`): DB-wide properties read
 * with the binding's synchronous `getProperty`, and the store directory's
 * files by kind, listed and stat'ed with async fs so the event loop never
 * waits on the disk. The binding reads properties of the default column
 * family only, so only DB-wide ones are used here.
 */
import type { RocksLevel } from "@nxtedition/rocksdb"
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { type StoreDisk, type StoreError, storeErrorOf as fail, type StoreHealth } from "./store.js"

/** Files of the store directory one health read lists and stats at most (docs/configuration.md). */
export const STORE_DISK_MAX_FILES = 100_000
/** stat calls in flight at once: libuv's default thread pool size, so other fs work queues behind at most one round. */
export const STORE_DISK_STAT_CONCURRENCY = 4

/** DB-wide integer properties (RocksDB's DB-level internal stats; not per column family). */
export const Properties = {
  writeStopped: "rocksdb.is-write-stopped",
  delayedWriteRate: "rocksdb.actual-delayed-write-rate",
  backgroundErrors: "rocksdb.background-errors",
  runningCompactions: "rocksdb.num-running-compactions",
  runningFlushes: "rocksdb.num-running-flushes"
} as const

/** An unknown property reads as "": fail naming it rather than report 0. */
const count = (db: RocksLevel, name: string): number => {
  const v = db.getProperty(name)
  if (!/^\d+$/.test(v)) throw new Error(`${name} = ${JSON.stringify(v)}: not a count`)
  return Number(v)
}

export const kindOf = (file: string): "sst" | "wal" | "other" =>
  file.endsWith(".sst") ? "sst" : file.endsWith(".log") ? "wal" : "other"

/** Bytes of `dir`'s regular files by kind, at most `maxFiles` of them (not recursive). */
export const diskUsage = (dir: string, maxFiles: number = STORE_DISK_MAX_FILES): Effect.Effect<StoreDisk, StoreError> =>
  Effect.tryPromise({
    try: async () => {
      const names: Array<string> = []
      let truncated = false
      for await (const e of await fs.opendir(dir, { bufferSize: 256 })) {
        if (!e.isFile()) continue
        if (names.length >= maxFiles) {
          truncated = true
          break
        }
        names.push(e.name)
      }
      const bytes = { sst: 0, wal: 0, other: 0 }
      let files = 0
      let next = 0
      const worker = async () => {
        while (next < names.length) {
          const name = names[next++]!
          try {
            // Not `+= await`: that reads the sum before the await and loses the other workers' adds.
            const { size } = await fs.stat(path.join(dir, name))
            bytes[kindOf(name)] += size
            files++
          } catch (e) {
            // Compactions delete SSTs and old WALs go: a file listed a moment ago may be gone.
            if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
          }
        }
      }
      await Promise.all(Array.from({ length: STORE_DISK_STAT_CONCURRENCY }, worker))
      return { ...bytes, files, truncated }
    },
    catch: fail("health")
  })

export const readHealth = (db: RocksLevel, dir: string): Effect.Effect<StoreHealth, StoreError> =>
  Effect.gen(function* () {
    const p = yield* Effect.try({
      try: () => ({
        writeStopped: count(db, Properties.writeStopped) !== 0,
        delayedWriteRate: count(db, Properties.delayedWriteRate),
        backgroundErrors: count(db, Properties.backgroundErrors),
        runningCompactions: count(db, Properties.runningCompactions),
        runningFlushes: count(db, Properties.runningFlushes)
      }),
      catch: fail("health")
    })
    return { ...p, disk: yield* diskUsage(dir) }
  })
