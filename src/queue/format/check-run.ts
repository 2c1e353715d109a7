/**
 * `store check` as one result, for the CLI (src/programs/store.ts) and a live
 * node (check-service.ts): the format 3 check of counters, markers, mirrors
 * and tenant maps (check.ts) and the lifecycle check (check-lifecycle.ts),
 * each difference classified as corruption or as a leftover of a documented
 * path. A format 2 store (not yet migrated) gets the lifecycle check only:
 * the rest checks what format 3 added.
 */
import { Effect } from "effect"
import type { StoreError, StoreShape } from "../../store/store.js"
import { type CheckReport, checkStore, formatReport } from "./check.js"
import { checkLifecycle, formatLifecycleReport, type LifecycleReport, lifecycleCorruptions } from "./check-lifecycle.js"

export interface StoreCheckResult {
  readonly format: number
  /** The format 3 check; undefined on a format 2 store. */
  readonly store: CheckReport | undefined
  readonly lifecycle: LifecycleReport
  /** Differences that mean corruption (the CLI exits 1 on any). */
  readonly corruptions: number
  /** Differences a documented path leaves (the CLI notes them and exits 0). */
  readonly leftovers: number
}

export const runCheck = (store: StoreShape): Effect.Effect<StoreCheckResult, StoreError> =>
  Effect.gen(function* () {
    const format = yield* store.format
    const report = format >= 3 ? yield* checkStore(store) : undefined
    const lifecycle = yield* checkLifecycle(store)
    return {
      format,
      store: report,
      lifecycle,
      corruptions: (report?.differenceCount ?? 0) + lifecycleCorruptions(lifecycle),
      leftovers: lifecycle.leftoverCount
    }
  })

/** What the CLI prints: both reports, then the verdict. */
export const formatResult = (r: StoreCheckResult): string =>
  [
    r.store === undefined
      ? `store check: format ${r.format}, not yet migrated: counters, tenant maps and the active index are format 3's and are checked once \`ankusa store migrate\` has run`
      : formatReport(r.store),
    formatLifecycleReport(r.lifecycle),
    r.corruptions > 0
      ? `verdict: ${r.corruptions} difference(s) that mean corruption`
      : r.leftovers > 0
        ? `verdict: ok; ${r.leftovers} leftover(s) of a documented path (the notes above), not corruption`
        : "verdict: ok"
  ].join("\n")
