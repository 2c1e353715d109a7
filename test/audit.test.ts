import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, TestClock } from "effect"
import * as A from "../src/layers/audit.js"
import * as Q from "../src/layers/quarantine.js"
import { layerMemory, MemoryDb } from "../src/layers/store-memory.js"

const env = (db: MemoryDb, o: Partial<A.AuditOptions> = {}) =>
  Layer.mergeAll(A.layer(o), Q.layer()).pipe(Layer.provideMerge(layerMemory({ db })))

const bad = (tenant: string) => ({ tenant, source: "s", reason: "signature_mismatch", headers: {}, body: Buffer.from("x") })

describe("audit", () => {
  it.effect("admin actions leave audit rows", () =>
    Effect.gen(function* () {
      const db = new MemoryDb()
      yield* Effect.gen(function* () {
        const q = yield* Q.Quarantine
        const audit = yield* A.Audit
        yield* q.put(bad("a"))
        yield* q.put(bad("b"))
        // A scoped operator of "a" deletes a's quarantine; a global operator reads the config.
        const n = yield* A.audited(
          { actor: "ops-a", tenants: ["a"], action: "quarantine.delete", params: { tenant: "a" } },
          q.deleteTenant("a")
        )
        expect(n).toBe(1)
        yield* TestClock.adjust(1_000)
        yield* A.audited({ actor: "root", tenants: null, action: "config.read", params: {} }, Effect.succeed({ config: true }))
        // A failed action still leaves the row of its attempt.
        const failed = yield* Effect.exit(
          A.audited({ actor: "root", tenants: ["a", "b"], action: "purge", params: { kinds: ["dead"] } }, Effect.fail("boom"))
        )
        expect(Exit.isFailure(failed)).toBe(true)

        const all = yield* audit.list({ scope: null, limit: 10 })
        expect(all.rows.map((r) => [r.actor, r.action, r.tenants])).toEqual([
          ["root", "purge", ["a", "b"]],
          ["root", "config.read", null],
          ["ops-a", "quarantine.delete", ["a"]]
        ])
        expect(all.rows[2]!.params).toEqual({ tenant: "a" })
        expect(all.rows[1]!.at - all.rows[2]!.at).toBe(1_000)
        // Scoped: "a" sees its own row only, not the node-wide one nor the one naming "b".
        const scoped = yield* audit.list({ scope: ["a"], limit: 10 })
        expect(scoped.rows.map((r) => r.action)).toEqual(["quarantine.delete"])
        expect((yield* audit.list({ scope: null, tenant: "b", limit: 10 })).rows.map((r) => r.action)).toEqual(["purge"])
        // Paging newest first with a cursor.
        const p1 = yield* audit.list({ scope: null, limit: 2 })
        const p2 = yield* audit.list({ scope: null, limit: 2, ...(p1.cursor === null ? {} : { cursor: p1.cursor }) })
        expect([...p1.rows, ...p2.rows].map((r) => r.seq)).toEqual(all.rows.map((r) => r.seq))
        expect(p2.cursor).toBeNull()
      }).pipe(Effect.provide(env(db)))

      // Reopened: seq continues (no row overwritten), and retention prunes the old rows only.
      yield* Effect.gen(function* () {
        const audit = yield* A.Audit
        yield* TestClock.adjust(10_000)
        const row = yield* audit.record({ actor: "root", tenants: ["c"], action: "replay", params: { ids: ["x"] } })
        const all = yield* audit.list({ scope: null, limit: 10 })
        expect(all.rows.length).toBe(4)
        expect(row.seq).toBe(Math.max(...all.rows.slice(1).map((r) => r.seq)) + 1)
        expect(yield* audit.prune).toBe(3)
        expect((yield* audit.list({ scope: null, limit: 10 })).rows.map((r) => r.action)).toEqual(["replay"])
      }).pipe(Effect.provide(env(db, { retention: 5_000 })))
    })
  )
})
