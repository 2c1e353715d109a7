/**
 * The store's own health as gauges (product.md "Operations"): write stalls,
 * background work and errors, and the bytes on disk by kind, from
 * `Store.health`, read by a scheduled fiber of its own (a failed read is
 * logged; the next runs on time). docs/api.md "Store health" says what
 * each means and when to alert.
 */
import { Duration, Effect, Layer, Metric, Schedule } from "effect"
import { Store, type StoreError, type StoreHealth } from "../store/store.js"

export interface StoreHealthOptions {
  /** Read period (ms); `serve` passes `gauges.intervalMs`. */
  readonly intervalMs: number
}

export const Defaults = { intervalMs: 15_000 } as const satisfies StoreHealthOptions

export const writeStopped = Metric.gauge("ankusa_store_write_stopped", {
  description: "1 while RocksDB stops writes (a write stall), else 0"
})
export const delayedWriteRate = Metric.gauge("ankusa_store_delayed_write_rate_bytes", {
  description: "Bytes a second RocksDB slows writes to; 0 when writes are not delayed"
})
export const backgroundErrors = Metric.gauge("ankusa_store_background_errors", {
  description: "RocksDB background (flush or compaction) errors since the store opened"
})
export const runningCompactions = Metric.gauge("ankusa_store_running_compactions", {
  description: "RocksDB compactions running now"
})
export const runningFlushes = Metric.gauge("ankusa_store_running_flushes", {
  description: "RocksDB memtable flushes running now"
})
export const diskBytes = Metric.gauge("ankusa_store_disk_bytes", {
  description: "Bytes of the store directory's files by kind: sst, wal, other"
})
export const diskFiles = Metric.gauge("ankusa_store_disk_files", {
  description: "Files of the store directory counted by the last health read"
})

export const diskBytesOf = (kind: "sst" | "wal" | "other") => Metric.withAttributes(diskBytes, { kind })

/** Set every gauge from one reading. */
export const publish = (h: StoreHealth): Effect.Effect<void> =>
  Effect.all(
    [
      Metric.update(writeStopped, h.writeStopped ? 1 : 0),
      Metric.update(delayedWriteRate, h.delayedWriteRate),
      Metric.update(backgroundErrors, h.backgroundErrors),
      Metric.update(runningCompactions, h.runningCompactions),
      Metric.update(runningFlushes, h.runningFlushes),
      Metric.update(diskBytesOf("sst"), h.disk.sst),
      Metric.update(diskBytesOf("wal"), h.disk.wal),
      Metric.update(diskBytesOf("other"), h.disk.other),
      Metric.update(diskFiles, h.disk.files)
    ],
    { discard: true }
  )

/** Read the store's health once and set the gauges. */
export const tick: Effect.Effect<StoreHealth, StoreError, Store> = Effect.flatMap(Store, (s) => s.health).pipe(Effect.tap(publish))

/** The scheduled read, for the layer's scope. */
export const layer = (options: Partial<StoreHealthOptions> = {}): Layer.Layer<never, never, Store> =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const intervalMs = options.intervalMs ?? Defaults.intervalMs
      if (!Number.isInteger(intervalMs) || intervalMs < 1) return yield* Effect.die(new Error(`storeHealth.intervalMs = ${intervalMs} must be >= 1`))
      const store = yield* Store
      let warned = false
      const once = tick.pipe(
        Effect.provideService(Store, store),
        Effect.tap((h) =>
          h.disk.truncated && !warned
            ? Effect.andThen(
                Effect.sync(() => (warned = true)),
                Effect.logWarning("store health: the store directory has more files than one read lists; disk bytes are of the first ones").pipe(
                  Effect.annotateLogs({ files: h.disk.files })
                )
              )
            : Effect.void
        ),
        Effect.catchCause((cause) => Effect.logError("store health: read failed", cause))
      )
      // The first read before the layer is up, so the gauges are there from boot.
      yield* once
      yield* once.pipe(Effect.delay(Duration.millis(intervalMs)), Effect.repeat(Schedule.spaced(Duration.millis(intervalMs))), Effect.forkScoped)
    })
  )
