/**
 * TEN-1 §12 `bench/dispatch-tick-bench`: the read side of the dispatch tick,
 * as src/delivery/pipeline.ts runs it with its default options:
 * `activeTenants(now, activeTenants)` in marker order, then `dueForTenant`
 * for each active tenant from a fresh cursor (floor 0, as after a restart)
 * within the tick's row and byte budget (`claimLimit`, `claimBytes`). Nothing
 * is claimed: the claim is one unsynced batch of at most `claimLimit` rows
 * whatever the backlog, and claiming would drain the cells being compared;
 * what could grow with rows or tenants is the reading. Same axes, load and
 * pass rule as the gauges bench (bench/lib/tick-bench.ts).
 * Run: npx tsx bench/dispatch-tick-bench.ts [--quick]
 */
import { Effect } from "effect"
import { Defaults } from "../src/delivery/pipeline.js"
import { runScript } from "./lib/tick-bench.js"

runScript({
  name: "dispatch-tick-bench",
  what: `the dispatch tick's reads: activeTenants(now, ${Defaults.activeTenants}) + dueForTenant per active tenant, ${Defaults.claimLimit} rows per tick (no claim)`,
  make: (_store, queue) =>
    Effect.succeed(
      Effect.gen(function* () {
        const now = Date.now()
        const tenants = yield* queue.activeTenants(now, Defaults.activeTenants)
        let rows = Defaults.claimLimit
        let bytes = Defaults.claimBytes
        for (const t of tenants) {
          if (rows <= 0 || bytes <= 0) break
          const due = yield* queue.dueForTenant(t.ord, now, 0, rows, bytes)
          rows -= due.length
          for (const d of due) bytes -= d.value.size
        }
        return Defaults.claimLimit - rows
      })
    )
})
