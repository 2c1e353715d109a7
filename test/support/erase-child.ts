/**
 * Child of test/erase-crash.test.ts: opens the erase world on DATA_DIR (which
 * resumes an unfinished erase), starts the erase of TENANT (or finds it),
 * prints `unit <step> <phase>` after every committed unit of work and `done`
 * at the end. With KILL_STEP=s it stops, after printing, at the first unit
 * whose job is at step s (with KILL_PHASE, at that phase with a cursor key,
 * i.e. in the middle of the step), and waits to be killed.
 * Usage: node --import tsx test/support/erase-child.ts DATA_DIR TENANT
 */
import { Effect } from "effect"
import * as Erase from "../../src/lifecycle/erase.js"
import { openWorld, run } from "../erase-world.js"

const [dataDir, tenant] = process.argv.slice(2)
const killStep = process.env.KILL_STEP === undefined ? undefined : Number(process.env.KILL_STEP)
const killPhase = process.env.KILL_PHASE

const afterUnit = (job: { readonly step: number; readonly cursor: { readonly phase: string; readonly key: string | null } | null }) =>
  Effect.gen(function* () {
    process.stdout.write(`unit ${job.step} ${job.cursor?.phase ?? "-"}\n`)
    const here = job.step === killStep && (killPhase === undefined || (job.cursor?.phase === killPhase && job.cursor.key !== null))
    if (here) {
      process.stdout.write("paused\n")
      yield* Effect.never
    }
  })

if (import.meta.url === `file://${process.argv[1]}`) {
  void Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* openWorld(dataDir!, { chunk: 2, inflightTimeoutMs: 150, pollMs: 10, afterUnit })
        const job = yield* run(w, Effect.flatMap(Erase.Erase, (e) => Effect.andThen(e.start(tenant!, "ops"), e.awaitDone(tenant!))))
        process.stdout.write(`done ${JSON.stringify(job.counts)}\n`)
      })
    )
  ).then(
    () => process.exit(0),
    (e) => {
      process.stderr.write(`${String(e)}\n`)
      process.exit(1)
    }
  )
}
