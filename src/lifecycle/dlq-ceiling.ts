/**
 * The DLQ ceiling: a configured maximum of dead rows. Checked in O(1) from
 * the aggregate counters (TEN-1 §4: `dead`, `bytes`); past it, the oldest
 * dead rows (`?x` order: dead-letter time, seq, sink) are dropped by the
 * queue (`Queue.dropDead`, a purge of dead rows), which deletes `?x` and `?X` together, the delivery
 * row, puts the `?c` marker for reclaim and carries the counter deltas.
 *
 * `maxBytes` is compared with the `bytes` counter, which counts every
 * delivery row (due, inflight and dead): there is no O(1) dead-only byte
 * count. Dead rows are the only rows the gateway drops on its own, so past
 * `maxBytes` it sheds the oldest dead rows until under it or the DLQ is
 * empty; live rows are never touched.
 */
import { Context, Duration, Effect, Layer, Metric } from "effect"
import * as K from "../domain/keys.js"
import { dlqCeilingDropped, withReason } from "../observability/lifecycle-metrics.js"
import { Queue } from "../queue/queue.js"
import { scheduled } from "./scheduled.js"
import { type Entry, Store, type StoreError } from "../store/store.js"

export interface DlqCeilingOptions {
  /** Most dead rows kept (the `dead` counter). */
  readonly maxRows: number
  /** Most queue bytes (the `bytes` counter) before dead rows are shed. */
  readonly maxBytes: number
  readonly interval: Duration.Input
  /** Dead rows read per chunk (one synced batch per tenant in it). */
  readonly chunk: number
  /** Chunks per run; the rest waits for the next run. */
  readonly maxChunks: number
}

export const DlqCeilingDefaults: DlqCeilingOptions = {
  maxRows: 1_000_000,
  maxBytes: 8 * 1024 * 1024 * 1024,
  interval: Duration.minutes(1),
  chunk: 500,
  maxChunks: 100
}

export interface CeilingResult {
  readonly byRows: number
  readonly byBytes: number
}

export interface DlqCeilingShape {
  /** Drop what the ceiling demands now (at most `maxChunks` chunks). */
  readonly enforce: Effect.Effect<CeilingResult, StoreError>
}

export class DlqCeiling extends Context.Service<DlqCeiling, DlqCeilingShape>()("ankusa/DlqCeiling") {}

const DEAD = K.familyDataRange(K.Families.dead)

export const make = (options: Partial<DlqCeilingOptions> = {}) =>
  Effect.gen(function* () {
    const o = { ...DlqCeilingDefaults, ...options }
    const store = yield* Store
    const queue = yield* Queue

    const enforce = Effect.gen(function* () {
      let byRows = 0
      let byBytes = 0
      let lo = DEAD.lo
      for (let chunk = 0; chunk < o.maxChunks; chunk++) {
        const agg = yield* queue.aggregate
        let rowsOver = agg.dead - o.maxRows
        let bytesOver = agg.bytes - o.maxBytes
        if (rowsOver <= 0 && bytesOver <= 0) break
        const page = yield* store.scan("index", { lo, hi: DEAD.hi }, { limit: o.chunk })
        if (page.length === 0) break
        // The oldest rows of the page until both bounds hold, estimated from their delivery rows.
        const rowSizes = yield* queue.deadSizes(page)
        const chosen = new Map<number, Array<Entry>>()
        let i = 0
        for (; i < page.length && (rowsOver > 0 || bytesOver > 0); i++) {
          const e = page[i]!
          const ord = K.decodeDeadValue(e.value).ord
          if (ord === undefined) continue // a format 2 value: store check reports it
          rowsOver--
          bytesOver -= rowSizes[i] ?? 0
          const list = chosen.get(ord) ?? []
          list.push(e)
          chosen.set(ord, list)
        }
        // The next chunk resumes after the last row looked at (rows gone since the scan leave room for newer ones).
        lo = K.keyAfter(page[i - 1]!.key)
        // Attribute each drop to the bound that asked for it: rows first, then bytes.
        let rowsWanted = Math.max(0, agg.dead - o.maxRows)
        for (const [ord, rows] of chosen) {
          const dropped = yield* queue.dropDead(ord, rows)
          const r = Math.min(dropped.length, rowsWanted)
          rowsWanted -= r
          byRows += r
          byBytes += dropped.length - r
        }
        if (i === page.length && page.length < o.chunk) break
      }
      if (byRows > 0) yield* Metric.update(withReason(dlqCeilingDropped, "rows"), byRows)
      if (byBytes > 0) yield* Metric.update(withReason(dlqCeilingDropped, "bytes"), byBytes)
      return { byRows, byBytes }
    })

    return { enforce } satisfies DlqCeilingShape
  })

export const layer = (options: Partial<DlqCeilingOptions> = {}): Layer.Layer<DlqCeiling, never, Store | Queue> =>
  Layer.effect(DlqCeiling, make(options))

/** The scheduled check: a scoped fiber, interrupted at shutdown. */
export const layerSchedule = (options: Partial<Pick<DlqCeilingOptions, "interval">> = {}): Layer.Layer<never, never, DlqCeiling> =>
  scheduled(DlqCeiling, "dlq ceiling", options.interval ?? DlqCeilingDefaults.interval, (c) => c.enforce)
