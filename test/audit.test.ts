import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer } from "effect"
import { TestClock } from "effect/testing"
import { auditUrl } from "../src/domain/audit.js"
import * as Deliveries from "../src/domain/deliveries.js"
import * as A from "../src/lifecycle/audit.js"
import * as Q from "../src/lifecycle/quarantine.js"
import * as Queue from "../src/queue/queue.js"
import * as Replay from "../src/queue/replay.js"
import { Store } from "../src/store/store.js"
import { layerMemory, MemoryDb } from "../src/store/memory.js"
import { aggregate, allocAll, commit, envelopeOf } from "./lifecycle-helpers.js"

const env = (db: MemoryDb, o: Partial<A.AuditOptions> = {}) =>
  Layer.mergeAll(A.layer(o), Q.layer(), Replay.layer.pipe(Layer.provideMerge(Queue.layer))).pipe(Layer.provideMerge(layerMemory({ db })))

/** Dead hooks 1..n of tenant t1 (ord 1). */
const deadHooks = (n: number) =>
  Effect.gen(function* () {
    const store = yield* Store
    yield* store.write(allocAll(2), { sync: false })
    for (let seq = 1; seq <= n; seq++) {
      const envelope = envelopeOf(seq, 1, 0, 1)
      const size = envelope.length
      yield* commit(store, [Deliveries.ingest({ seq, ord: 1, envelope, sinkCount: 1, at: 0, archive: false })])
      yield* commit(store, [Deliveries.claim({ ord: 1, at: 0, seq, sink: 0 }, { size, kind: 0 })])
      yield* commit(store, [Deliveries.deadLetter({ ord: 1, seq, sink: 0 }, { attempts: 1, lastStatus: 410, size, lastAt: 0 }, seq, { sourceId: "src", id: `hook_${seq}` })])
    }
  })

const bad = (tenant: string) => ({ tenant, source: "s", reason: "signature_mismatch", headers: {}, body: Buffer.from("x") })

describe("audit", () => {
  it("an audit row's url has no query string, fragment or user info", () => {
    const table: ReadonlyArray<readonly [string, string]> = [
      ["https://user:pa55@hooks.example.com:8443/in?token=s3cret#x", "https://hooks.example.com:8443/in"],
      ["https://hooks.example.com/in?sig=s3cret", "https://hooks.example.com/in"],
      ["http://[::1]:9/a/b", "http://[::1]:9/a/b"],
      ["https://hooks.example.com", "https://hooks.example.com/"],
      ["not a url ?token=s3cret", ""]
    ]
    for (const [url, kept] of table) expect(auditUrl(url), url).toBe(kept)
  })

  it.effect("admin actions leave audit rows", () =>
    Effect.gen(function* () {
      const db = new MemoryDb()
      yield* Effect.gen(function* () {
        const q = yield* Q.Quarantine
        const audit = yield* A.Audit
        const store = yield* Store
        // Real actions on real rows: a replay of two dead hooks, a purge of the rest.
        yield* deadHooks(4)
        const replayed = yield* A.audited(
          { actor: "ops-t1", tenants: ["t1"], action: "replay", params: { ids: ["hook_1", "hook_2"] } },
          Effect.flatMap(Replay.Replay, (r) => r.replay({ ords: [1], seqs: new Set([1, 2]) }))
        )
        expect(replayed.revived).toBe(2)
        const purged = yield* A.audited(
          { actor: "ops-t1", tenants: ["t1"], action: "purge", params: { kinds: ["dead"] } },
          Effect.flatMap(Queue.Queue, (qu) => qu.purgeTenant(1, ["dead"]))
        )
        expect(purged.dead).toBe(2)
        expect(yield* aggregate(store)).toMatchObject({ dead: 0, pending: 2 })
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
          ["ops-a", "quarantine.delete", ["a"]],
          ["ops-t1", "purge", ["t1"]],
          ["ops-t1", "replay", ["t1"]]
        ])
        expect(all.rows[4]!.params).toEqual({ ids: ["hook_1", "hook_2"] })
        expect(all.rows[2]!.params).toEqual({ tenant: "a" })
        expect((yield* audit.list({ scope: ["t1"], limit: 10 })).rows.map((r) => r.action)).toEqual(["purge", "replay"])
        expect(all.rows[1]!.at - all.rows[2]!.at).toBe(1_000)
        // Scoped: "a" sees its own row only, not the node-wide one nor the one naming "b".
        const scoped = yield* audit.list({ scope: ["a"], limit: 10 })
        expect(scoped.rows.map((r) => r.action)).toEqual(["quarantine.delete"])
        expect((yield* audit.list({ scope: null, tenant: "b", limit: 10 })).rows.map((r) => r.action)).toEqual(["purge"])
        // Paging newest first with a cursor.
        const p1 = yield* audit.list({ scope: null, limit: 2 })
        const p2 = yield* audit.list({ scope: null, limit: 2, ...(p1.cursor === null ? {} : { cursor: p1.cursor }) })
        const p3 = yield* audit.list({ scope: null, limit: 2, ...(p2.cursor === null ? {} : { cursor: p2.cursor }) })
        expect([...p1.rows, ...p2.rows, ...p3.rows].map((r) => r.seq)).toEqual(all.rows.map((r) => r.seq))
        expect(p3.cursor).toBeNull()
      }).pipe(Effect.provide(env(db)))

      // Reopened: seq continues (no row overwritten), and retention prunes the old rows only.
      yield* Effect.gen(function* () {
        const audit = yield* A.Audit
        yield* TestClock.adjust(10_000)
        const row = yield* audit.record({ actor: "root", tenants: ["c"], action: "replay", params: { ids: ["x"] } })
        const all = yield* audit.list({ scope: null, limit: 10 })
        expect(all.rows.length).toBe(6)
        expect(row.seq).toBe(Math.max(...all.rows.slice(1).map((r) => r.seq)) + 1)
        expect(yield* audit.prune).toBe(5)
        expect((yield* audit.list({ scope: null, limit: 10 })).rows.map((r) => r.action)).toEqual(["replay"])
      }).pipe(Effect.provide(env(db, { retention: 5_000 })))
    })
  )
})
