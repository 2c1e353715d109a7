/**
 * `store check` on a live node (docs/api.md `POST /v1/store/check`): the
 * check of check-run.ts on the node's own open store, as a service the edge
 * calls (the edge never reads the store itself). The RocksDB binding offers
 * no snapshot, so the check reads while the node writes and a difference may
 * be a write in flight. Two guards: a counter difference of a tenant whose
 * counters a write merged during the pass is dropped (the store's write
 * marks, src/store/write-marks.ts: the pass read its rows and its counters at
 * different moments); and while a pass finds any difference, another runs (up
 * to `LIVE_CHECK_PASSES`), and only the differences every pass found alike are
 * reported. What either guard drops is counted as `unconfirmed`. One check
 * runs at a time.
 */
import { Context, Data, Effect, Layer, Semaphore } from "effect"
import { Store, type StoreError } from "../../store/store.js"
import type { CheckReport } from "./check.js"
import { type LifecycleReport, lifecycleCorruptions } from "./check-lifecycle.js"
import { runCheck, type StoreCheckResult } from "./check-run.js"

/** Another check is running. */
export class StoreCheckBusy extends Data.TaggedError("StoreCheckBusy")<{}> {}

export interface LiveCheck {
  readonly result: StoreCheckResult
  /** Passes run: 1 when the first found nothing, at most `LIVE_CHECK_PASSES`. */
  readonly passes: number
  /** Differences of the first pass a later one did not find alike (writes in flight). */
  readonly unconfirmed: number
}

export class StoreCheck extends Context.Service<
  StoreCheck,
  { readonly run: Effect.Effect<LiveCheck, StoreError | StoreCheckBusy> }
>()("ankusa/StoreCheck") {}

const keyOf = (d: object) => JSON.stringify(d)

/** The items of `b` that `a` lists alike; past the listing bound in both, `b`'s own count stands. */
const alike = <D extends object>(a: ReadonlyArray<D>, aCount: number, b: ReadonlyArray<D>, bCount: number) => {
  const seen = new Set(a.map(keyOf))
  const kept = b.filter((d) => seen.has(keyOf(d)))
  const overflowed = aCount > a.length && bCount > b.length
  return { kept, count: overflowed ? kept.length + Math.min(aCount - a.length, bCount - b.length) : kept.length }
}

const confirmStore = (a: CheckReport | undefined, b: CheckReport | undefined): CheckReport | undefined => {
  if (a === undefined || b === undefined) return b
  const { kept, count } = alike(a.differences, a.differenceCount, b.differences, b.differenceCount)
  return { ...b, ok: count === 0, differences: kept, differenceCount: count }
}

const confirmLifecycle = (a: LifecycleReport, b: LifecycleReport): LifecycleReport => {
  const { kept, count } = alike(a.differences, a.differenceCount, b.differences, b.differenceCount)
  const leftovers = kept.filter((d) => d.leftover !== undefined).length
  return { ...b, ok: count === 0, differences: kept, differenceCount: count, leftoverCount: Math.min(leftovers, count) }
}

/** The pass without the counter differences of tenants that moved while it read (`moved`). */
export const withoutMoved = (r: StoreCheckResult, moved: (ord: number) => boolean): StoreCheckResult => {
  if (r.store === undefined) return r
  const kept = r.store.differences.filter((d) => !(d.problem === "counter" && d.ord !== undefined && moved(d.ord)))
  const dropped = r.store.differences.length - kept.length
  if (dropped === 0) return r
  // Past the listing bound the unlisted ones stand: they may be of tenants that did not move.
  const count = r.store.differenceCount - dropped
  return { ...r, store: { ...r.store, ok: count === 0, differences: kept, differenceCount: count }, corruptions: r.corruptions - dropped }
}

const found = (r: StoreCheckResult) => (r.store?.differenceCount ?? 0) + r.lifecycle.differenceCount

/** A later pass, keeping only what the earlier ones also found. */
export const confirm = (earlier: StoreCheckResult, later: StoreCheckResult): StoreCheckResult => {
  const store = confirmStore(earlier.store, later.store)
  const lifecycle = confirmLifecycle(earlier.lifecycle, later.lifecycle)
  return {
    ...later,
    store,
    lifecycle,
    corruptions: (store?.differenceCount ?? 0) + lifecycleCorruptions(lifecycle),
    leftovers: lifecycle.leftoverCount
  }
}

/** Passes at most: a difference is reported only if every pass found it alike. */
export const LIVE_CHECK_PASSES = 3

export const make = Effect.gen(function* () {
  const store = yield* Store
  const one = yield* Semaphore.make(1)
  /** One pass, and the differences it found, with those of tenants that moved under it set aside. */
  const pass = Effect.gen(function* () {
    const mark = yield* store.marks.mark
    const r = yield* runCheck(store)
    const settled = yield* store.marks.settled
    return { all: found(r), kept: withoutMoved(r, (ord) => !settled || store.marks.movedSince(ord, mark)) }
  })
  const run = Effect.gen(function* () {
    const first = yield* pass
    let result = first.kept
    let passes = 1
    while (found(result) > 0 && passes < LIVE_CHECK_PASSES) {
      result = confirm(result, (yield* pass).kept)
      passes++
    }
    return { result, passes, unconfirmed: first.all - found(result) }
  })
  return {
    run: Effect.flatMap(
      one.withPermitsIfAvailable(1)(run),
      (r) => (r._tag === "Some" ? Effect.succeed(r.value) : Effect.fail(new StoreCheckBusy()))
    )
  }
})

export const layer: Layer.Layer<StoreCheck, never, Store> = Layer.effect(StoreCheck, make)
