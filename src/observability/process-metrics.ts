/**
 * This process's memory as gauges (product.md "Operations"), from
 * `process.memoryUsage()` every `PROCESS_METRICS_INTERVAL_MS`. The resident
 * set includes RocksDB's native memory (memtables, block caches: bounded by
 * `storeMemoryBound`, docs/storage.md "Memory"), which the V8 heap does not.
 */
import { Duration, Effect, Layer, Metric, Schedule } from "effect"

/** Read period; memory moves slowly and one read costs microseconds. */
export const PROCESS_METRICS_INTERVAL_MS = 5_000

export const residentMemory = Metric.gauge("ankusa_process_resident_memory_bytes", {
  description: "Resident set size of the process (V8 heap, native memory and RocksDB's)"
})
export const heap = Metric.gauge("ankusa_process_heap_bytes", {
  description: "V8 heap by kind: used, total (allocated)"
})
export const externalMemory = Metric.gauge("ankusa_process_external_memory_bytes", {
  description: "Memory of C++ objects bound to JavaScript objects (Buffers and ArrayBuffers included)"
})

const heapBy = { used: Metric.withAttributes(heap, { kind: "used" }), total: Metric.withAttributes(heap, { kind: "total" }) } as const

export const heapOf = (kind: "used" | "total") => heapBy[kind]

/** Read `process.memoryUsage()` once and set the gauges. */
export const publish: Effect.Effect<NodeJS.MemoryUsage> = Effect.suspend(() => {
  const m = process.memoryUsage()
  return Effect.as(
    Effect.all(
      [
        Metric.update(residentMemory, m.rss),
        Metric.update(heapOf("used"), m.heapUsed),
        Metric.update(heapOf("total"), m.heapTotal),
        Metric.update(externalMemory, m.external)
      ],
      { discard: true }
    ),
    m
  )
})

/** The scheduled read, for the layer's scope (the first one at once). */
export const layer = (intervalMs: number = PROCESS_METRICS_INTERVAL_MS): Layer.Layer<never> =>
  Layer.effectDiscard(
    Effect.andThen(publish, publish.pipe(Effect.delay(Duration.millis(intervalMs)), Effect.repeat(Schedule.spaced(Duration.millis(intervalMs))), Effect.forkScoped))
  )
