/**
 * Erasing a tenant (TEN-5) on RocksDB: every row of the tenant goes from
 * every family and every archive segment, no row of another tenant changes,
 * and the counters stay equal to a fold. (The HTTP refusal, the kill-resume
 * and the physical bound have their own files.)
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Counters from "../src/domain/counters.js"
import * as K from "../src/domain/keys.js"
import { put } from "../src/domain/ops.js"
import * as Audit from "../src/lifecycle/audit.js"
import * as Erase from "../src/lifecycle/erase.js"
import { checkStore } from "../src/queue/format/check.js"
import { runCheck } from "../src/queue/format/check-run.js"
import * as Tenants from "../src/queue/tenants.js"
import { countersOf, fill, idsOf, openWorld, ordNames, run, snapshot } from "./erase-world.js"
import { rmDir, tempDir } from "./lifecycle-helpers.js"

const TENANTS = ["acme", "globex", "initech"]
const ERASED = "globex"

const withWorld = <A, E>(f: (dir: string) => Effect.Effect<A, E, never>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => tempDir("erase")),
    f,
    (dir) => Effect.sync(() => rmDir(dir))
  )

describe("erase", () => {
  it.live(
    "erase removes every row of the tenant and no row of another",
    () =>
      withWorld((dir) =>
        Effect.scoped(
          Effect.gen(function* () {
            const w = yield* openWorld(dir, { chunk: 3, inflightTimeoutMs: 200, pollMs: 20 })
            yield* fill(w, TENANTS, 12)
            const names = yield* ordNames(w.store)
            const before = yield* snapshot(w, names)
            // The fold sees the tenant in every family the erase must clear, the archive included.
            const mine = before.filter((r) => r.owner === ERASED).map((r) => r.id.split(":")[0] + ":" + r.id.split(":")[1]!.slice(0, 2))
            for (const where of ["hooks", "deliveries", "counters", "tenants:74", "tenants:6e", "tenants:6c", "tenants:65", "index:44", "index:46", "index:58", "index:78", "index:61", "index:75", "index:65", "index:71", "index:63", "archive"]) {
              expect(mine.some((m) => m.startsWith(where)), where).toBe(true)
            }
            const job = yield* run(w, Effect.flatMap(Erase.Erase, (e) => Effect.andThen(e.start(ERASED, "ops"), e.awaitDone(ERASED))))
            expect(job.step).toBe(8)
            expect(job.counts).toMatchObject({ endpoints: 2, quarantine: 1, inflight_taken_back: 1 })
            const after = yield* snapshot(w, names)
            const ord = [...names].find(([, n]) => n === ERASED)![0]
            // Of the tenant, only its tombstone `?t` (empty) and its erase record are left.
            expect(idsOf(after, ERASED)).toEqual(
              [`tenants:74${ord.toString(16).padStart(8, "0")}=`, after.find((r) => r.id.startsWith(`tenants:72${Buffer.from(ERASED).toString("hex")}=`))!.id].sort()
            )
            for (const other of TENANTS.filter((t) => t !== ERASED)) expect(idsOf(after, other)).toEqual(idsOf(before, other))
            // Node rows: only the archive cursor, the audit row of the erase and the sentinels of nothing new.
            const nodeBefore = new Set(idsOf(before.map((r) => ({ ...r, owner: r.owner ?? "node" })), "node"))
            const nodeNew = idsOf(after.map((r) => ({ ...r, owner: r.owner ?? "node" })), "node").filter((id) => !nodeBefore.has(id))
            expect(nodeNew.every((id) => id.startsWith("audit:") || id.startsWith("default:6d3a637572736f723a61726368697665"))).toBe(true)
            const audit = yield* run(w, Effect.flatMap(Audit.Audit, (a) => a.list({ scope: null, limit: 10 })))
            expect(audit.rows[0]).toMatchObject({ action: "tenant.erase", actor: "ops", tenants: [ERASED] })
            yield* run(w, Effect.flatMap(Tenants.Tenants, (t) => Effect.flip(t.ord(ERASED))))
          })
        )
      ),
    60_000
  )

  it.live(
    "counters of the other tenants and the node aggregate stay equal to a fold after an erase",
    () =>
      withWorld((dir) =>
        Effect.scoped(
          Effect.gen(function* () {
            const w = yield* openWorld(dir, { chunk: 4, inflightTimeoutMs: 200, pollMs: 20 })
            yield* fill(w, TENANTS, 10)
            const names = yield* ordNames(w.store)
            const ords = new Map([...names].map(([o, n]) => [n, o]))
            const checked = yield* checkStore(w.store)
            expect(checked.differences).toEqual([])
            const aggregate = yield* countersOf(w.store, Counters.AGGREGATE)
            const erased = yield* countersOf(w.store, ords.get(ERASED)!)
            expect(erased.pending + erased.inflight + erased.dead + erased.archive_pending).toBeGreaterThan(0)
            const others = new Map(yield* Effect.forEach(TENANTS.filter((t) => t !== ERASED), (t) => Effect.map(countersOf(w.store, ords.get(t)!), (c) => [t, c] as const)))

            yield* run(w, Effect.flatMap(Erase.Erase, (e) => Effect.andThen(e.start(ERASED, "ops"), e.awaitDone(ERASED))))

            // `store check` (counters against the fold, tenant maps with the tombstone, the lifecycle) finds nothing.
            const report = yield* runCheck(w.store)
            expect(report.corruptions + report.leftovers, JSON.stringify(report)).toBe(0)
            for (const [t, c] of others) expect(yield* countersOf(w.store, ords.get(t)!)).toEqual(c)
            // The aggregate lost exactly what the erased tenant held (the inflight row taken back counts as pending, then purged).
            const now = yield* countersOf(w.store, Counters.AGGREGATE)
            for (const f of ["dead", "bytes", "archive_pending"] as const) expect(now[f]).toBe(aggregate[f] - erased[f])
            expect(now.pending + now.scheduled + now.inflight).toBe(aggregate.pending + aggregate.scheduled + aggregate.inflight - erased.pending - erased.scheduled - erased.inflight)
            // Its counter rows are gone, not zeroed.
            const raw = yield* w.store.multiGet("counters", Counters.keysOf(ords.get(ERASED)!))
            expect(raw.every((v) => v === undefined)).toBe(true)
            // The check knows the tombstone: a finished erase whose `?t` names the tenant again is a difference.
            yield* w.store.write([put("tenants", K.tenantKey(ords.get(ERASED)!), Buffer.from(ERASED))], { sync: true })
            expect((yield* checkStore(w.store)).differences.map((d) => d.problem)).toContain("erase_without_tombstone")
          })
        )
      ),
    60_000
  )
})
