/**
 * The dedupe sweep: a scheduled fiber that deletes expired idempotency keys
 * through their expiry index, oldest first, in bounded chunks of unsynced
 * batches (a crash only repeats work). Formats: src/domain/dedupe.ts.
 *
 * Each visited `?e <<at, tenant, 0, key>>` is deleted; its `?u` only if the
 * `?u` still records that same expiry (a key reused after expiry has a new
 * `?u` and a new `?e`, and must keep them). The read of `?u` and the delete
 * are two steps: a Writer commit that reuses the key between them would
 * lose its new `?u` (the key then dedupes nothing until reused again). Pass
 * `exclusive` to run each step where no ingest commit can interleave (the
 * Writer's commit section); see docs/storage.md "Dedupe".
 */
import { Clock, Context, Duration, Effect, Layer, Metric, Semaphore } from "effect"
import * as Dedupe from "../domain/dedupe.js"
import * as K from "../domain/keys.js"
import { del, type Op } from "../domain/ops.js"
import { dedupeSwept } from "../observability/lifecycle-metrics.js"
import { scheduled } from "./scheduled.js"
import { type Entry, Store, type StoreError } from "../store/store.js"

export interface DedupeSweepOptions {
  readonly interval: Duration.Input
  /** Expiry keys visited per batch. */
  readonly chunk: number
  /** Batches per run; the rest waits for the next run. */
  readonly maxChunks: number
  /** Runs each step with no ingest commit in between (identity by default). */
  readonly exclusive?: <A, E>(step: Effect.Effect<A, E>) => Effect.Effect<A, E>
}

export const DedupeSweepDefaults: Omit<DedupeSweepOptions, "exclusive"> = {
  interval: Duration.minutes(1),
  chunk: 1_000,
  maxChunks: 100
}

export interface DedupeSweepShape {
  /** Sweep keys expired at the clock's now; returns how many `?u` were deleted. */
  readonly sweep: Effect.Effect<{ readonly expiries: number; readonly keys: number }, StoreError>
}

export class DedupeSweep extends Context.Service<DedupeSweep, DedupeSweepShape>()("ankusa/DedupeSweep") {}

const EXPIRY_LO = K.familyDataRange(K.Families.expiry).lo

/** The deletes for a chunk of expired `?e` rows, given the current values of their `?u` rows. */
export const sweepOps = (
  expired: ReadonlyArray<Entry>,
  values: ReadonlyArray<Uint8Array | undefined>
): { readonly ops: ReadonlyArray<Op>; readonly keys: number } => {
  const ops: Array<Op> = []
  let keys = 0
  expired.forEach((e, i) => {
    const { at, tenant, key } = K.decodeExpiryKey(e.key)
    ops.push(del("index", e.key))
    const v = values[i]
    const expiry = v === undefined ? undefined : Dedupe.expiryOf(v)
    // An unreadable value is garbage either way; a different expiry is a later reuse of the key.
    if (v !== undefined && (expiry === undefined || expiry === at)) {
      ops.push(del("index", K.dedupeKey(tenant, key)))
      keys++
    }
  })
  return { ops, keys }
}

export const make = (options: Partial<DedupeSweepOptions> = {}) =>
  Effect.gen(function* () {
    const o = { ...DedupeSweepDefaults, ...options }
    const exclusive = options.exclusive ?? (<A, E>(e: Effect.Effect<A, E>) => e)
    const store = yield* Store
    const lock = yield* Semaphore.make(1)

    const step = (now: number) =>
      exclusive(
        Effect.gen(function* () {
          const expired = yield* store.scan("index", { lo: EXPIRY_LO, hi: K.expiryUpTo(now) }, { limit: o.chunk })
          if (expired.length === 0) return { expiries: 0, keys: 0 }
          const values = yield* store.multiGet(
            "index",
            expired.map((e) => {
              const { tenant, key } = K.decodeExpiryKey(e.key)
              return K.dedupeKey(tenant, key)
            })
          )
          const { ops, keys } = sweepOps(expired, values)
          yield* store.write(ops, { sync: false })
          return { expiries: expired.length, keys }
        })
      )

    const sweep = lock.withPermits(1)(
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        let expiries = 0
        let keys = 0
        for (let i = 0; i < o.maxChunks; i++) {
          const r = yield* step(now)
          expiries += r.expiries
          keys += r.keys
          if (r.expiries < o.chunk) break
        }
        if (keys > 0) yield* Metric.update(dedupeSwept, keys)
        return { expiries, keys }
      })
    )

    return { sweep } satisfies DedupeSweepShape
  })

export const layer = (options: Partial<DedupeSweepOptions> = {}): Layer.Layer<DedupeSweep, never, Store> =>
  Layer.effect(DedupeSweep, make(options))

/** The scheduled sweep: a scoped fiber, interrupted at shutdown. */
export const layerSchedule = (options: Partial<Pick<DedupeSweepOptions, "interval">> = {}): Layer.Layer<never, never, DedupeSweep> =>
  scheduled(DedupeSweep, "dedupe sweep", options.interval ?? DedupeSweepDefaults.interval, (s) => s.sweep)
