/**
 * The lifecycle part of `store check`: nothing is kept that nothing owes,
 * and nothing is owed that is gone.
 * - every hook has a delivery row, an archive obligation, or a `?c` marker
 *   (reclaim will look at it); otherwise it is "owed by nothing" and would
 *   never be reclaimed;
 * - every obligation `?a <<seq>>` and every delivery row has its hook.
 * Sentinel-checked walks, one chunk of rows and one batch of point reads at
 * a time; differences kept up to `CHECK_MAX_DIFFERENCES` (the rest counted).
 */
import { Effect, Stream } from "effect"
import * as K from "../../domain/keys.js"
import { CHECK_CHUNK, CHECK_MAX_DIFFERENCES } from "./check.js"
import type { StoreError, StoreShape } from "../../store/store.js"
import { familyRows } from "../../store/family.js"

export type LifecycleProblem =
  | "hook_owed_by_nothing" // no delivery row, no obligation, no ?c marker
  | "obligation_without_hook" // ?a whose hook is gone
  | "row_without_hook" // a delivery row whose hook is gone
  | "bad_row" // a key that does not decode
  | "corrupt" // a family scan failed its sentinel check

export interface LifecycleDifference {
  readonly problem: LifecycleProblem
  readonly family: string
  readonly seq?: number
  readonly found?: string
}

export interface LifecycleReport {
  readonly ok: boolean
  readonly hooks: number
  readonly obligations: number
  readonly rows: number
  readonly differences: ReadonlyArray<LifecycleDifference>
  readonly differenceCount: number
}

export const checkLifecycle = (store: StoreShape): Effect.Effect<LifecycleReport, StoreError> =>
  Effect.gen(function* () {
    const differences: Array<LifecycleDifference> = []
    let differenceCount = 0
    const report = (d: LifecycleDifference) => {
      differenceCount++
      if (differences.length < CHECK_MAX_DIFFERENCES) differences.push(d)
    }
    const counts = { hooks: 0, obligations: 0, rows: 0 }

    const walk = (family: K.Family, decode: (k: Uint8Array) => number, f: (seqs: ReadonlyArray<number>) => Effect.Effect<void, StoreError>) =>
      familyRows(store, family, { chunk: CHECK_CHUNK }).pipe(
        Stream.grouped(CHECK_CHUNK),
        Stream.runForEach((c) => {
          const seqs: Array<number> = []
          for (const e of c) {
            try {
              seqs.push(decode(e.key))
            } catch (err) {
              report({ problem: "bad_row", family: family.name, found: String(err) })
            }
          }
          return f(seqs)
        }),
        Effect.catchTag("StoreCorrupt", (e) => Effect.sync(() => report({ problem: "corrupt", family: family.name, found: e.message })))
      )

    const hooksOf = (seqs: ReadonlyArray<number>) =>
      store.multiGet("hooks", seqs.map(K.hookKey)).pipe(Effect.map((vs) => vs.map((v) => v !== undefined)))

    // Hooks: owed by a row, an obligation, or queued for reclaim.
    yield* walk(K.Families.hooks, K.decodeHookKey, (seqs) =>
      Effect.gen(function* () {
        counts.hooks += seqs.length
        const obligations = yield* store.multiGet("index", seqs.map(K.archiveKey))
        const markers = yield* store.multiGet("index", seqs.map(K.clearedKey))
        for (let i = 0; i < seqs.length; i++) {
          if (obligations[i] !== undefined || markers[i] !== undefined) continue
          const row = yield* store.first("deliveries", K.range(K.deliveryPrefix(seqs[i]!)))
          if (row === undefined) report({ problem: "hook_owed_by_nothing", family: "hooks", seq: seqs[i]! })
        }
      })
    )

    // Obligations: their hook exists.
    yield* walk(K.Families.archive, K.decodeArchiveKey, (seqs) =>
      Effect.gen(function* () {
        counts.obligations += seqs.length
        const present = yield* hooksOf(seqs)
        seqs.forEach((seq, i) => {
          if (!present[i]) report({ problem: "obligation_without_hook", family: "archive", seq })
        })
      })
    )

    // Delivery rows: their hook exists (one read per distinct seq of a chunk).
    yield* walk(K.Families.deliveries, (k) => K.decodeDeliveryKey(k).seq, (seqs) =>
      Effect.gen(function* () {
        counts.rows += seqs.length
        const distinct = [...new Set(seqs)]
        const present = yield* hooksOf(distinct)
        distinct.forEach((seq, i) => {
          if (!present[i]) report({ problem: "row_without_hook", family: "deliveries", seq })
        })
      })
    )

    return { ok: differenceCount === 0, ...counts, differences, differenceCount }
  })

/** One line per difference, for the CLI (after `formatReport` of check.ts). */
export const formatLifecycleReport = (r: LifecycleReport): string => {
  const head = r.ok
    ? `lifecycle check: ok (${r.hooks} hooks, ${r.obligations} obligations, ${r.rows} delivery rows)`
    : `lifecycle check: ${r.differenceCount} difference(s)`
  const lines = r.differences.map((d) =>
    [d.problem, `family=${d.family}`, d.seq === undefined ? "" : `seq=${d.seq}`, d.found === undefined ? "" : `found=${d.found}`]
      .filter((s) => s !== "")
      .join(" ")
  )
  if (r.differenceCount > r.differences.length) lines.push(`… and ${r.differenceCount - r.differences.length} more`)
  return [head, ...lines].join("\n")
}
