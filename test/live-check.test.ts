/**
 * `store check` on a live node reads a moving store without snapshots
 * (src/queue/format/check-service.ts): the store's write marks
 * (src/store/write-marks.ts) tell a counter difference read while its tenant
 * moved from one that was there all along.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import * as Counters from "../src/domain/counters.js"
import * as Deliveries from "../src/domain/deliveries.js"
import * as K from "../src/domain/keys.js"
import { merge } from "../src/domain/ops.js"
import * as CheckService from "../src/queue/format/check-service.js"
import { makeMemoryStore } from "../src/store/memory.js"
import { Store, type StoreShape } from "../src/store/store.js"
import { makeWriteMarks, WRITE_MARK_SLOTS } from "../src/store/write-marks.js"
import { allocAll, commit, envelope } from "./queue-helpers.js"

const pendingOf = (ord: number, n: number) => merge("counters", K.counterKey(ord, Counters.Fields.pending), BigInt(n))

describe("live store check", () => {
  it.live("a write in flight at the mark is waited for, and only its tenants have moved", () =>
    Effect.gen(function* () {
      const marks = makeWriteMarks()
      const mark = yield* marks.mark
      const slow = yield* Effect.forkChild(marks.track([pendingOf(7, 1)], Effect.sleep("60 millis")))
      yield* Effect.sleep("5 millis")
      // Not ended yet: not moved yet; settled waits for it.
      expect(marks.movedSince(7, mark)).toBe(false)
      const t0 = Date.now()
      expect(yield* marks.settled).toBe(true)
      expect(Date.now() - t0).toBeGreaterThanOrEqual(40)
      yield* Fiber.join(slow)
      expect(marks.movedSince(7, mark)).toBe(true)
      expect(marks.movedSince(8, mark)).toBe(false)
      // A tenant sharing the slot looks moved too (the safe side).
      expect(marks.movedSince(7 + WRITE_MARK_SLOTS, mark)).toBe(true)
      // A later mark sees nothing since.
      expect(marks.movedSince(7, yield* marks.mark)).toBe(false)
    })
  )

  it.effect("a due row deferred to its breaker's probe time marks its tenant as moved, though no counter is merged", () =>
    Effect.gen(function* () {
      const marks = makeWriteMarks()
      const mark = yield* marks.mark
      const batch = Deliveries.batch([Deliveries.defer({ ord: 7, at: 1_000, seq: 3, sink: 0 }, { size: 10, kind: 0 }, 9_000)])
      expect(batch.some((op) => op.cf === "counters")).toBe(false)
      yield* marks.track(batch, Effect.void)
      expect(marks.movedSince(7, mark)).toBe(true)
      expect(marks.movedSince(8, mark)).toBe(false)
    })
  )

  it.effect("a counter difference of a tenant that moved during the pass is unconfirmed; one that did not is reported", () =>
    Effect.gen(function* () {
      const base = yield* makeMemoryStore()
      yield* base.write(allocAll(2), { sync: false })
      for (const ord of [1, 2]) {
        yield* commit(base, [Deliveries.ingest({ seq: ord, ord, envelope: envelope({ id: `h${ord}`, tenant: `t${ord}` }), sinkCount: 1, at: 0, archive: false })])
      }
      // Tenant 1's counter is wrong before the check starts: corruption.
      yield* base.write([pendingOf(1, 5)], { sync: false })
      // Tenant 2's goes wrong by a write that lands while the first pass reads.
      let landed = false
      const store: StoreShape = {
        ...base,
        stream: (cf, range, opts) => {
          if (!landed && cf === "counters") {
            landed = true
            Effect.runSync(base.write([pendingOf(2, 3)], { sync: false }))
          }
          return base.stream(cf, range, opts)
        }
      }
      const service = yield* Effect.provide(CheckService.StoreCheck, CheckService.layer.pipe(Layer.provide(Layer.succeed(Store, store))))
      const live = yield* service.run
      expect(landed).toBe(true)
      const counters = (live.result.store?.differences ?? []).filter((d) => d.problem === "counter" && d.ord !== Counters.AGGREGATE)
      expect(counters).toEqual([{ problem: "counter", family: "counters", ord: 1, field: "pending", expected: 1, found: 6 }])
      expect(live.result.corruptions).toBeGreaterThan(0)
      expect(live.unconfirmed).toBeGreaterThan(0)
    })
  )
})
