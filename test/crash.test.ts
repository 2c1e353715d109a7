/**
 * TEN-1 §12 "Crash" (issue 6): a real `ankusa serve` child process under
 * continuous ingest (many tenants) and delivery, with sinks that succeed,
 * fail (500) and time out, so retries and dead letters happen, is killed
 * with SIGKILL at a random moment, CRASH_KILLS times, and restarted each time
 * on the same data directory. After each kill the store is opened offline, as
 * the restart will open it, and checked: every hook answered 202 has, for
 * each of its sinks, a delivery the sink saw or a due, inflight or dead row
 * under its tenant's ordinal (none lost), and `checkStore` finds every
 * counter equal to the fold and no due row without its marker. Each restart
 * must then boot (recovering the inflight rows) and serve again; the last
 * one is stopped with SIGTERM and its store checked once more.
 *
 * `npm test` runs the short form (3 kills); `npm run test:crash` runs 20
 * (ANKUSA_CRASH_KILLS).
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { storeDirOf } from "../src/programs/store.js"
import { type ServeChild, startServe } from "../bench/lib/serve-child.js"
import { type Acked, crashConfig, inspect, type Sinks, startIngest, startSinks } from "./support/crash-world.js"

/** Kills in one run: 3 in `npm test`, 20 with `npm run test:crash`. */
export const CRASH_KILLS = Number(process.env["ANKUSA_CRASH_KILLS"] ?? 3)
/** A kill lands this long (uniformly at random) after the server is serving under load. */
const KILL_AFTER_MS: readonly [number, number] = [1_000, 3_000]
/** Per kill: a boot plus the load and the offline check. */
const PER_KILL_MS = 60_000

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

it.live(
  "counters equal the index after kill -9",
  () =>
    Effect.scoped(Effect.gen(function* () {
      const dataDir = mkdtempSync(join(tmpdir(), "ankusa-crash-serve-"))
      const sinks: Sinks = yield* Effect.promise(startSinks)
      let server: ServeChild | undefined
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          await server?.kill()
          await sinks.close()
          rmSync(dataDir, { recursive: true, force: true })
        })
      )
      const acked: Array<Acked> = []
      for (let kill = 1; kill <= CRASH_KILLS; kill++) {
        const s = yield* Effect.promise(() => startServe({ dataDir, config: crashConfig(sinks) }))
        server = s
        const ingest = startIngest(s.url, acked)
        const [lo, hi] = KILL_AFTER_MS
        yield* Effect.promise(() => sleep(lo + Math.random() * (hi - lo)))
        yield* Effect.promise(() => s.kill())
        yield* Effect.promise(() => ingest.stop())
        expect(s.stderr()).toBe("")

        const seen = yield* inspect(storeDirOf(dataDir), acked, sinks.delivered)
        const where = `after kill ${kill} of ${CRASH_KILLS} (${acked.length} hooks acknowledged, traces ${JSON.stringify(seen.traces)})`
        expect(seen.lost, `rows of acknowledged hooks with no trace ${where}`).toEqual([])
        expect(seen.report.differences, `store check ${where}`).toEqual([])
        expect(seen.report.ok).toBe(true)
      }
      // The last restart: it boots on what the last kill left, serves, and drains on SIGTERM.
      const last = yield* Effect.promise(() => startServe({ dataDir, config: crashConfig(sinks) }))
      server = last
      expect(yield* Effect.promise(() => fetch(`${last.url}/readyz`).then((r) => r.status))).toBe(200)
      expect(yield* Effect.promise(() => last.stop())).toBe(0)
      const final = yield* inspect(storeDirOf(dataDir), acked, sinks.delivered)
      expect(final.lost).toEqual([])
      expect(final.report.differences).toEqual([])
      // The run did what it claims: hooks were acknowledged, delivered, retried and dead-lettered.
      expect(acked.length).toBeGreaterThan(0)
      expect(final.traces.delivered).toBeGreaterThan(0)
      expect(sinks.attempts.fail).toBeGreaterThan(0)
      expect(sinks.attempts.slow).toBeGreaterThan(0)
      expect(final.traces.dead).toBeGreaterThan(0)
    })),
  { timeout: (CRASH_KILLS + 1) * PER_KILL_MS }
)
