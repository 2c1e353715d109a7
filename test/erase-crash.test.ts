/**
 * An erase across SIGKILL (TEN-5): a real child on RocksDB
 * (test/support/erase-child.ts) runs the erase and is killed after each of
 * its steps, and once in the middle of the purge and of the hooks step;
 * every restart resumes the job from its persisted cursor. In the end the
 * tenant's rows are gone, the others' are as they were, the counters equal a
 * fold, and the job's counts equal what the tenant had: nothing was counted
 * twice. Then `ankusa store lift-erase` lifts the refusal on the stopped node.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { join } from "node:path"
import { createInterface } from "node:readline"
import * as Counters from "../src/domain/counters.js"
import * as E from "../src/domain/erase.js"
import * as K from "../src/domain/keys.js"
import { runCheck } from "../src/queue/format/check-run.js"
import { runAnkusa } from "./support/node-child.js"
import { countersOf, fill, idsOf, openWorld, ordNames, snapshot } from "./erase-world.js"
import { rmDir, tempDir } from "./lifecycle-helpers.js"

const CHILD = join(import.meta.dirname, "support", "erase-child.ts")
const TENANTS = ["acme", "globex", "initech"]
const ERASED = "globex"

/** Run the child until it pauses where asked (then SIGKILL it) or ends; the lines it printed. */
const runChild = (dir: string, kill: { readonly step: number; readonly phase?: string } | undefined) =>
  Effect.callback<{ readonly lines: ReadonlyArray<string>; readonly killed: boolean }, Error>((resume) => {
    const env: Record<string, string | undefined> = { ...process.env, KILL_STEP: kill === undefined ? undefined : String(kill.step), KILL_PHASE: kill?.phase }
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, dir, ERASED], { stdio: ["ignore", "pipe", "pipe"], env })
    const lines: Array<string> = []
    let stderr = ""
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    createInterface({ input: child.stdout }).on("line", (line) => {
      lines.push(line)
      if (line === "paused") child.kill("SIGKILL")
    })
    child.on("exit", (code, signal) => {
      if (signal === "SIGKILL") resume(Effect.succeed({ lines, killed: true }))
      else if (code === 0) resume(Effect.succeed({ lines, killed: false }))
      else resume(Effect.fail(new Error(`child exited with ${code}: ${stderr}`)))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("erase crash", () => {
  it.live(
    "erase resumes after a kill at every step without double counting",
    () =>
      Effect.acquireUseRelease(
        Effect.sync(() => tempDir("erase-crash")),
        (dir) =>
          Effect.gen(function* () {
            // Filled in-process; the store is closed before the first child opens it.
            const before = yield* Effect.scoped(
              Effect.gen(function* () {
                const w = yield* openWorld(dir)
                yield* fill(w, TENANTS, 6)
                const names = yield* ordNames(w.store)
                const ords = new Map([...names].map(([o, n]) => [n, o]))
                const rows = yield* snapshot(w, names)
                const count = (prefix: string) => rows.filter((r) => r.owner === ERASED && r.id.startsWith(prefix)).length
                return {
                  names,
                  rows,
                  ords,
                  aggregate: yield* countersOf(w.store, Counters.AGGREGATE),
                  erased: yield* countersOf(w.store, ords.get(ERASED)!),
                  others: yield* Effect.forEach(TENANTS.filter((t) => t !== ERASED), (t) => countersOf(w.store, ords.get(t)!)),
                  // Due and inflight rows (the inflight ones are taken back as due, then purged), dead rows, hooks.
                  due: count("index:44") + count("index:46"),
                  dead: count("index:58"),
                  hooks: count("hooks:"),
                  archived: count("archive:")
                }
              })
            )
            expect(before.due * before.dead * before.hooks * before.archived).toBeGreaterThan(0)

            // Killed after step 1 (the job at step 2), after each later step, and inside steps 3 and 4.
            const kills = [
              { step: 2 },
              { step: 3 },
              { step: 3, phase: "due" },
              { step: 4 },
              { step: 4, phase: "hooks" },
              { step: 5 },
              { step: 6 },
              { step: 7 },
              { step: 8 }
            ]
            for (const kill of kills) {
              const r = yield* runChild(dir, kill)
              expect(r.killed, `${JSON.stringify(kill)}: ${r.lines.join(" | ")}`).toBe(true)
            }
            const last = yield* runChild(dir, undefined)
            expect(last.killed).toBe(false)
            expect(last.lines.at(-1)).toMatch(/^done /)

            yield* Effect.scoped(
              Effect.gen(function* () {
                const w = yield* openWorld(dir)
                const job = E.decodeJob(yield* w.store.get("tenants", K.erasureKey(ERASED)))!
                expect(job.step).toBe(E.DONE)
                // Each row was deleted, and counted, once.
                expect(job.counts).toMatchObject({ due: before.due, dead: before.dead, hooks: before.hooks, archived_records: before.archived })
                const after = yield* snapshot(w, before.names)
                expect(idsOf(after, ERASED).length).toBe(2)
                for (const t of TENANTS.filter((t) => t !== ERASED)) expect(idsOf(after, t)).toEqual(idsOf(before.rows, t))
                const report = yield* runCheck(w.store)
                expect(report.corruptions + report.leftovers, JSON.stringify(report)).toBe(0)
                const aggregate = yield* countersOf(w.store, Counters.AGGREGATE)
                for (const f of Counters.FieldNames.filter((f) => f !== "pending" && f !== "inflight")) {
                  expect(aggregate[f], f).toBe(before.aggregate[f] - before.erased[f])
                }
                expect(aggregate.pending + aggregate.inflight).toBe(before.aggregate.pending + before.aggregate.inflight - before.erased.pending - before.erased.inflight)
                const others = yield* Effect.forEach(TENANTS.filter((t) => t !== ERASED), (t) => countersOf(w.store, before.ords.get(t)!))
                expect(others).toEqual(before.others)
              })
            )
            // On the stopped node, `ankusa store lift-erase` lifts the refusal of the finished job: the record goes.
            const lift = runAnkusa(["store", "lift-erase", ERASED, "--data-dir", dir])
            const exit = yield* Effect.promise(() => lift.exited(60_000))
            expect(exit.code, lift.stdout() + lift.stderr()).toBe(0)
            const record = yield* Effect.scoped(Effect.flatMap(openWorld(dir), (w) => w.store.get("tenants", K.erasureKey(ERASED))))
            expect(record).toBeUndefined()
          }),
        (dir) => Effect.sync(() => rmDir(dir))
      ),
    120_000
  )
})
