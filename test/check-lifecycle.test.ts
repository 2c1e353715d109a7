import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Deliveries from "../src/domain/deliveries.js"
import * as K from "../src/domain/keys.js"
import { del, put } from "../src/domain/ops.js"
import { checkLifecycle } from "../src/queue/format/check-lifecycle.js"
import { makeMemoryStore } from "../src/store/memory.js"
import { allocAll, commit, envelopeOf } from "./lifecycle-helpers.js"

describe("store check (lifecycle)", () => {
  it.effect("store check finds hooks owed by nothing and obligations or rows without their hook", () =>
    Effect.gen(function* () {
      const store = yield* makeMemoryStore()
      yield* store.write(allocAll(1), { sync: false })
      const ingest = (seq: number, archive: boolean) =>
        commit(store, [Deliveries.ingest({ seq, ord: 1, envelope: envelopeOf(seq, 1, 0, 1), sinkCount: 1, at: 0, archive })])
      for (let seq = 1; seq <= 4; seq++) yield* ingest(seq, seq % 2 === 0)
      // Delivered and settled, not yet reclaimed: its ?c marker owes it to reclaim.
      yield* commit(store, [Deliveries.claim({ ord: 1, at: 0, seq: 2, sink: 0 }, { size: envelopeOf(2, 1, 0, 1).length, kind: 0 })])
      yield* commit(store, [Deliveries.delivered({ ord: 1, seq: 2, sink: 0 }, envelopeOf(2, 1, 0, 1).length), Deliveries.archiveSettle(2, 1)])
      const clean = yield* checkLifecycle(store)
      expect(clean.differences).toEqual([])
      expect(clean).toMatchObject({ ok: true, hooks: 4, obligations: 1, rows: 3 })

      // Break it three ways.
      yield* store.write(
        [
          put("hooks", K.hookKey(9), envelopeOf(9, 1, 0, 0)), // a hook with nothing at all
          del("hooks", K.hookKey(4)), // hook 4 still has a row and an obligation
          del("index", K.clearedKey(2)) // hook 2 loses the marker that owed it to reclaim
        ],
        { sync: false }
      )
      const r = yield* checkLifecycle(store)
      expect(r.ok).toBe(false)
      expect(r.differences.map((d) => [d.problem, d.seq])).toEqual([
        ["hook_owed_by_nothing", 2],
        ["hook_owed_by_nothing", 9],
        ["obligation_without_hook", 4],
        ["row_without_hook", 4]
      ])
    })
  )
})
