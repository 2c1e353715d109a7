/**
 * The migration runner `Migrate` (TEN-1 §7, §8). A registry of steps by
 * (from, to); at boot, before anything serves, it runs every migration from
 * the store's format up to this build's: it puts `m:migrating:<to>` (with the
 * start time) in its own synced write, then commits each step's ops together
 * with the step's cursor in ONE synced write, and in the final step's batch
 * puts the format stamp and deletes the marker and the cursor. A run killed
 * at any point resumes from the last committed cursor with the same start time.
 */
import { Cause, Clock, Context, Data, Deferred, Effect, Exit, Fiber, Layer, Ref } from "effect"
import * as K from "../../domain/keys.js"
import * as Registry from "../../domain/migrations/registry.js"
import type { MigrationInfo } from "../../domain/migrations/registry.js"
import * as TenantKeys from "../../domain/migrations/tenant-keys.js"
import type { Op } from "../../domain/ops.js"
import * as Tenants from "../../domain/tenants.js"
import * as TenantKeysStep from "./migrate-tenant-keys.js"
import { CURRENT_FORMAT } from "../../store/open.js"
import { Store, type StoreError, type StoreShape } from "../../store/store.js"

/** How often (at most) progress is reported during a migration, besides its end. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 5_000

/** The store's format has no migration path up to this build's. */
export class MigrationGap extends Data.TaggedError("MigrationGap")<{
  readonly found: number
  readonly at: number
  readonly target: number
}> {
  override get message() {
    return `no migration from store format ${this.at} (store is at ${this.found}, this build needs ${this.target})`
  }
}

export type MigrateError = StoreError | MigrationGap

export interface Progress {
  readonly from: number
  readonly to: number
  readonly steps: number
  /** Old rows moved (or rewritten) so far in this run. */
  readonly rows: number
  readonly elapsedMs: number
  readonly rowsPerSecond: number
  /** Phase of the last step (migration specific; e.g. "due"). */
  readonly phase: string
  readonly done: boolean
}

export interface MigrationRun {
  readonly from: number
  readonly to: number
  readonly steps: number
  readonly rows: number
  readonly elapsedMs: number
  /** The run picked up an interrupted migration (its marker was present). */
  readonly resumed: boolean
  readonly complete: boolean
}

export interface MigrateReport {
  /** Format found at open. */
  readonly found: number
  /** Format after the run. */
  readonly format: number
  readonly runs: ReadonlyArray<MigrationRun>
  /** Ordinals allocated in the store (`m:next_ord - 1`). */
  readonly tenants: number
  /** Tenants past `tenants.max` (the migration never refuses existing rows; TEN-1 §7). */
  readonly overage: number
}

export interface MigrateOptions {
  /** Old rows per step (default `TenantKeys.STEP_ROWS`, 1,000). */
  readonly stepRows?: number
  /** `tenants.max` (default 1,000,000): only for the overage log. */
  readonly maxTenants?: number
  readonly onProgress?: (p: Progress) => Effect.Effect<void>
  readonly progressIntervalMs?: number
  /** Stop after this many steps in this run (tests of resumption). */
  readonly maxSteps?: number
}

interface StepContext {
  readonly startedAt: number
  readonly rows: number
}
interface StepOutcome {
  readonly ops: ReadonlyArray<Op>
  readonly cursor: Uint8Array | "done"
  readonly rows: number
  readonly phase: string
}
/** A run of one migration: builds the step that starts at a cursor (it may keep memory across its steps). */
type StepFn = (cursor: Uint8Array | undefined) => Effect.Effect<StepOutcome, StoreError>

/** The steps of each registered migration, by name (`Registry.Registry` lists them by (from, to)). */
const Steps: Readonly<Record<string, (store: StoreShape, ctx: StepContext) => StepFn>> = {
  [TenantKeys.NAME]: (store, ctx) => {
    const state = TenantKeysStep.runState()
    return (cursor) =>
      TenantKeysStep.step(store, cursor, ctx, state).pipe(
        Effect.map((r) => ({ ops: r.ops, cursor: r.cursor, rows: r.rows, phase: TenantKeys.phaseName(r.phase) }))
      )
  }
}

/** The default progress report: one log line. */
export const logProgress = (p: Progress): Effect.Effect<void> =>
  Effect.logInfo(
    `store migration ${p.from} -> ${p.to}: ${p.rows} rows moved in ${p.steps} steps, ${p.rowsPerSecond} rows/s, phase ${p.phase}${p.done ? ", done" : ""}`
  )

/** Migrations this build would run on a store at `found` (what `store migrate --dry-run` lists). */
export const pendingFor = (found: number, target = CURRENT_FORMAT): Effect.Effect<ReadonlyArray<MigrationInfo>, MigrationGap> => {
  const p = Registry.plan(found, target)
  return p._tag === "ok" ? Effect.succeed(p.steps) : Effect.fail(new MigrationGap({ found, at: p.at, target }))
}

const runOne = (
  store: StoreShape,
  m: MigrationInfo,
  opts: MigrateOptions,
  budget: { steps: number }
): Effect.Effect<MigrationRun, StoreError> =>
  Effect.gen(function* () {
    const make = Steps[m.name]
    if (make === undefined) return yield* Effect.die(new Error(`migration ${m.name} is registered without a step`))
    const marker = yield* store.get("default", Registry.migratingKey(m))
    let startedAt: number
    if (marker === undefined) {
      startedAt = yield* Clock.currentTimeMillis
      yield* store.write(Registry.beginOps(m, startedAt), { sync: true })
    } else {
      startedAt = Registry.decodeStartedAt(marker)
      yield* Effect.logInfo(`resuming store migration ${Registry.describe(m)}`)
    }
    const next = make(store, { startedAt, rows: opts.stepRows ?? TenantKeys.STEP_ROWS })
    const interval = opts.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS
    const t0 = yield* Clock.currentTimeMillis
    let lastReport = t0
    let steps = 0
    let rows = 0
    let done = false
    let r = budget.steps > 0 ? yield* next(yield* store.get("default", Registry.cursorKey(m))) : undefined
    while (r !== undefined) {
      // Only what the loop needs after the write: the step's ops are garbage once encoded, not
      // kept alive (and promoted by the GC) while the next step is built.
      const current = { cursor: r.cursor, rows: r.rows, phase: r.phase }
      // TEN-1 §1 constraint 4: the step's ops and its cursor (or the stamp) in one synced write.
      const write = yield* Effect.forkChild(store.write([...r.ops, ...Registry.commitOps(m, current.cursor)], { sync: true }))
      r = undefined
      budget.steps--
      // Build the next step while this one commits (its reads never touch what this write changes,
      // and its ordinals come from the run's memory); a failed write ends the run.
      const following =
        current.cursor === "done" || budget.steps <= 0 ? undefined : yield* Effect.yieldNow.pipe(Effect.andThen(Effect.exit(next(current.cursor))))
      yield* Fiber.join(write)
      steps++
      rows += current.rows
      done = current.cursor === "done"
      const now = yield* Clock.currentTimeMillis
      if (done || now - lastReport >= interval) {
        lastReport = now
        const elapsedMs = now - t0
        yield* (opts.onProgress ?? logProgress)({
          from: m.from,
          to: m.to,
          steps,
          rows,
          elapsedMs,
          rowsPerSecond: elapsedMs > 0 ? Math.round((rows * 1000) / elapsedMs) : rows,
          phase: current.phase,
          done
        })
      }
      r = following === undefined ? undefined : yield* following
    }
    const elapsedMs = (yield* Clock.currentTimeMillis) - t0
    return { from: m.from, to: m.to, steps, rows, elapsedMs, resumed: marker !== undefined, complete: done }
  })

/** Run every pending migration on an open store (format 3 code opens format 2 stores only for this). */
export const runPending = (store: StoreShape, opts: MigrateOptions = {}): Effect.Effect<MigrateReport, MigrateError> =>
  Effect.gen(function* () {
    const found = yield* store.format
    const plan = yield* pendingFor(found)
    const budget = { steps: opts.maxSteps ?? Number.POSITIVE_INFINITY }
    const runs: Array<MigrationRun> = []
    for (const m of plan) {
      const run = yield* runOne(store, m, opts, budget)
      runs.push(run)
      if (!run.complete) break
    }
    const format = yield* store.format
    const tenants = Tenants.countOf(yield* store.get("default", K.Meta.nextOrd))
    const max = opts.maxTenants ?? Tenants.DEFAULT_MAX_TENANTS
    const overage = Math.max(0, tenants - max)
    if (overage > 0 && runs.length > 0) {
      // TEN-1 §7: the migration keeps every existing tenant; the cap applies to new ones at ingest.
      yield* Effect.logWarning(`store holds ${tenants} tenants, ${overage} past tenants.max (${max}); new tenants will be refused`)
    }
    return { found, format, runs, tenants, overage }
  })

// ---------------------------------------------------------------------------
// The service: boot runs migrations in a scoped fiber; serve awaits it before
// starting anything that writes, and /readyz reads `ready`.

export type MigrateStatus =
  | { readonly _tag: "running"; readonly progress: Progress | undefined }
  | { readonly _tag: "done"; readonly report: MigrateReport }
  | { readonly _tag: "failed"; readonly message: string }

export class Migrate extends Context.Service<
  Migrate,
  {
    /** True once every pending migration has committed (false while running or after a failure). */
    readonly ready: Effect.Effect<boolean>
    readonly status: Effect.Effect<MigrateStatus>
    /** Wait for the boot migrations; fails as they failed. */
    readonly await: Effect.Effect<MigrateReport, MigrateError>
  }
>()("ankusa/Migrate") {}

export const layer = (opts: MigrateOptions = {}): Layer.Layer<Migrate, never, Store> =>
  Layer.effect(
    Migrate,
    Effect.gen(function* () {
      const store = yield* Store
      const status = yield* Ref.make<MigrateStatus>({ _tag: "running", progress: undefined })
      const result = yield* Deferred.make<MigrateReport, MigrateError>()
      const onProgress = (p: Progress) =>
        Ref.set(status, { _tag: "running", progress: p }).pipe(
          Effect.andThen((opts.onProgress ?? logProgress)(p))
        )
      yield* runPending(store, { ...opts, onProgress }).pipe(
        Effect.exit,
        Effect.tap((exit) =>
          Ref.set(
            status,
            Exit.isSuccess(exit) ? { _tag: "done", report: exit.value } : { _tag: "failed", message: Cause.pretty(exit.cause) }
          )
        ),
        Effect.flatMap((exit) => Deferred.done(result, exit)),
        Effect.forkScoped
      )
      return {
        ready: Effect.map(Ref.get(status), (s) => s._tag === "done"),
        status: Ref.get(status),
        await: Deferred.await(result)
      }
    })
  )
