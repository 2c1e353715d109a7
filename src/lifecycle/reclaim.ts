/**
 * Reclaim (product.md "Archive and reclaim"): a scheduled fiber that walks
 * the `?c` cleared markers and deletes a hook once nothing owes it.
 *
 * The rule: a hook is owed while it has a delivery row (due, inflight or
 * dead: `deliveries <<seq, *>>`) or an archive obligation (`?a <<seq>>`).
 * Every transition that can end the last debt (delivered, orphan drop, the
 * purges, archive settle and drop) puts `?c <<seq>>` in its own batch. For
 * each marker, reclaim reads both; if neither exists it deletes the hook and
 * the marker together, otherwise it leaves the marker alone (it is deleted
 * only with its hook). Why this is safe without a snapshot: once a hook has
 * no row and no obligation nothing can give it one again (rows come only
 * from ingest, which creates the hook, and from other rows of the same
 * hook), so two reads that each see "none" prove "none" from then on. Why
 * the marker is never deleted alone: a delete racing the transition that
 * ends the last debt would remove the marker that transition just put, and
 * the hook would never be reclaimed. Markers of hooks still owed are
 * revisited; the walk keeps an in-memory cursor so each step costs one
 * bounded chunk. Batches are unsynced: a crash only repeats work.
 * (`Deliveries.expand` adds a row to an existing hook; it must only target a
 * hook that still has a row, or run with reclaim stopped.)
 */
import { Context, Duration, Effect, Layer, Metric, Semaphore } from "effect"
import * as K from "../domain/keys.js"
import { del, type Op } from "../domain/ops.js"
import { reclaimHooks, reclaimVisited } from "../observability/lifecycle-metrics.js"
import { Queue } from "../queue/queue.js"
import { scheduled } from "./scheduled.js"
import { Store, type StoreError } from "../store/store.js"

export interface ReclaimOptions {
  readonly interval: Duration.Input
  /** Markers looked at per step (one seek and one point read each, one batch per step). */
  readonly chunk: number
  /** Steps per scheduled tick; the walk resumes where it stopped at the next tick. */
  readonly stepsPerTick: number
}

export const ReclaimDefaults: ReclaimOptions = {
  interval: Duration.seconds(10),
  chunk: 1_000,
  stepsPerTick: 100
}

export interface StepResult {
  readonly visited: number
  readonly reclaimed: number
  /** The walk reached the last marker; the next step starts from the first. */
  readonly wrapped: boolean
}

export interface ReclaimShape {
  /**
   * One chunk of markers from where the last step stopped. `between` runs
   * after the reads and before the write (tests interleave transitions there).
   */
  readonly step: (options?: { readonly between?: Effect.Effect<void, StoreError> }) => Effect.Effect<StepResult, StoreError>
  /** Steps from the first marker to the last (tests, the soak, an operator's flush). */
  readonly pass: Effect.Effect<{ readonly visited: number; readonly reclaimed: number }, StoreError>
  /** The scheduled tick: steps from where the walk stopped, until it wraps or `stepsPerTick`. */
  readonly tick: Effect.Effect<{ readonly visited: number; readonly reclaimed: number }, StoreError>
}

export class Reclaim extends Context.Service<Reclaim, ReclaimShape>()("ankusa/Reclaim") {}

const CLEARED = K.familyDataRange(K.Families.cleared)

export const make = (options: Partial<ReclaimOptions> = {}) =>
  Effect.gen(function* () {
    const o = { ...ReclaimDefaults, ...options }
    const store = yield* Store
    const queue = yield* Queue
    let from: Uint8Array = CLEARED.lo
    const lock = yield* Semaphore.make(1)

    const step: ReclaimShape["step"] = (opts) =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          const page = yield* store.scan("index", { lo: from, hi: CLEARED.hi }, { limit: o.chunk })
          const wrapped = page.length < o.chunk
          from = wrapped ? CLEARED.lo : K.keyAfter(page[page.length - 1]!.key)
          if (page.length === 0) return { visited: 0, reclaimed: 0, wrapped }
          const seqs = page.map((e) => K.decodeClearedKey(e.key))
          const free = yield* queue.unreferenced(seqs)
          const ops: Array<Op> = []
          let reclaimed = 0
          for (let i = 0; i < seqs.length; i++) {
            if (!free[i]) continue
            ops.push(del("hooks", K.hookKey(seqs[i]!)), del("index", page[i]!.key))
            reclaimed++
          }
          if (opts?.between !== undefined) yield* opts.between
          if (ops.length > 0) yield* store.write(ops, { sync: false })
          yield* Metric.update(reclaimVisited, page.length)
          if (reclaimed > 0) yield* Metric.update(reclaimHooks, reclaimed)
          return { visited: page.length, reclaimed, wrapped }
        })
      )

    const steps = (max: number) =>
      Effect.gen(function* () {
        let visited = 0
        let reclaimed = 0
        for (let i = 0; i < max; i++) {
          const r = yield* step()
          visited += r.visited
          reclaimed += r.reclaimed
          if (r.wrapped) break
        }
        return { visited, reclaimed }
      })

    const pass = Effect.suspend(() => {
      from = CLEARED.lo
      return steps(Infinity)
    })

    return { step, pass, tick: steps(o.stepsPerTick) } satisfies ReclaimShape
  })

export const layer = (options: Partial<ReclaimOptions> = {}): Layer.Layer<Reclaim, never, Store | Queue> => Layer.effect(Reclaim, make(options))

/** The scheduled walk: one pass every `interval`; a scoped fiber, interrupted at shutdown. */
export const layerSchedule = (options: Partial<Pick<ReclaimOptions, "interval">> = {}): Layer.Layer<never, never, Reclaim> =>
  scheduled(Reclaim, "reclaim", options.interval ?? ReclaimDefaults.interval, (r) => r.tick)
