/**
 * `ankusa store …`: the operator's commands on a node's store (TEN-1 §7, §8).
 * - `store migrate [--dry-run]`: run the pending format migrations (what boot
 *   does), with progress; a dry run lists them and changes nothing.
 * - `store fixture PATH [--format 2|3]`: write the standard fixture store as a
 *   `.tar.zst` archive (test/fixtures/store-v2.tar.zst, store-v3.tar.zst).
 * - `store check`: counters against a fold of the families, the layout's
 *   invariants and the lifecycle's (`runCheck`); exit code 1 on a difference
 *   that means corruption, 0 with a note for a leftover of a documented path.
 *   A running node holds the store: its `POST /v1/store/check` runs the same check.
 * The store is `<dataDir>/store` (`storeDirOf`); dataDir comes from the
 * configuration (`--config`, `ANKUSA_DATA_DIR`, `--data-dir`).
 */
import { Console, Data, Effect, Option, Redacted } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Registry from "../domain/migrations/registry.js"
import * as Config from "../config/config.js"
import { formatResult, runCheck } from "../queue/format/check-run.js"
import * as Fixture from "../queue/format/fixture.js"
import * as Migrate from "../queue/format/migrate.js"
import * as Archive from "../store/tarball.js"
import { CURRENT_FORMAT } from "../store/open.js"
import { makeRocksDbStore } from "../store/rocksdb.js"
import { openPostgresStore } from "../store/postgres.js"
import { postgresUrl } from "../domain/config-store.js"
import type { StoreOpenError } from "../store/store.js"

/** Progress lines of `store migrate`, at most one per interval. */
export const CLI_PROGRESS_INTERVAL_MS = 1_000

/** Where a node keeps its RocksDB store inside its data directory. */
export const storeDirOf = (dataDir: string): string => path.join(dataDir, "store")

export { liftErase } from "./store-erase.js"

export class StoreMissing extends Data.TaggedError("StoreMissing")<{ readonly dir: string }> {
  override get message() {
    return `no store at ${this.dir} (no RocksDB CURRENT file); check --data-dir`
  }
}

export class CheckFailed extends Data.TaggedError("CheckFailed")<{ readonly differences: number }> {
  override get message() {
    return `store check found ${this.differences} difference(s) that mean corruption`
  }
}

/** `store check` on a store a running node holds: say how to check it through the node. */
export class CheckNodeRunning extends Data.TaggedError("CheckNodeRunning")<{ readonly dir: string }> {
  override get message() {
    return `store ${this.dir} is open by a running node; check it through the node: POST /v1/store/check with a global admin token (docs/api.md)`
  }
}

const requireStore = (dir: string) =>
  fs.existsSync(path.join(dir, "CURRENT")) ? Effect.void : Effect.fail(new StoreMissing({ dir }))

/**
 * The store's format without fencing it: open it as a format 2 build first
 * (which creates no format 3 column family), so a dry run or a check leaves a
 * format 2 store openable by the release it came from. A store the format 2
 * build does not know was already opened by format 3 code.
 */
export const probeFormat = (dir: string): Effect.Effect<number, StoreOpenError | StoreMissing> =>
  Effect.gen(function* () {
    yield* requireStore(dir)
    return yield* Effect.scoped(
      Effect.flatMap(makeRocksDbStore(dir, { supportedFormat: 2, commitThread: "main" }), (s) => s.format)
    ).pipe(
      Effect.catchTag("StoreFormatNewer", (e) => Effect.succeed(e.found)),
      Effect.catchIf(
        (e) => e._tag === "StoreError" && /column families this build does not know/.test(e.message),
        () => Effect.scoped(Effect.flatMap(makeRocksDbStore(dir, { commitThread: "main" }), (s) => s.format))
      )
    )
  })

/** `store migrate --dry-run`: the lines it prints (one per pending migration). */
export const dryRunLines = (dir: string) =>
  Effect.gen(function* () {
    const format = yield* probeFormat(dir)
    const pending = yield* Migrate.pendingFor(format)
    return pending.map(Registry.describe)
  })

export const migrate = (dir: string, opts: { readonly dryRun: boolean; readonly maxTenants?: number; readonly stepRows?: number }) =>
  Effect.gen(function* () {
    if (opts.dryRun) {
      const lines = yield* dryRunLines(dir)
      if (lines.length === 0) yield* Console.log(`store ${dir} is at format ${CURRENT_FORMAT}: nothing to migrate`)
      for (const l of lines) yield* Console.log(l)
      return
    }
    yield* requireStore(dir)
    const report = yield* Effect.scoped(
      Effect.flatMap(makeRocksDbStore(dir), (store) =>
        Migrate.runPending(store, {
          ...(opts.maxTenants === undefined ? {} : { maxTenants: opts.maxTenants }),
          ...(opts.stepRows === undefined ? {} : { stepRows: opts.stepRows }),
          progressIntervalMs: CLI_PROGRESS_INTERVAL_MS,
          onProgress: (p) =>
            Console.log(`${p.from} -> ${p.to}: ${p.rows} rows moved in ${p.steps} steps, ${p.rowsPerSecond} rows/s (phase ${p.phase})${p.done ? ", done" : ""}`)
        })
      )
    )
    if (report.runs.length === 0) yield* Console.log(`store ${dir} is at format ${report.format}: nothing to migrate`)
    for (const r of report.runs) {
      const rate = r.elapsedMs > 0 ? Math.round((r.rows * 1000) / r.elapsedMs) : r.rows
      yield* Console.log(`migrated ${r.from} -> ${r.to}${r.resumed ? " (resumed)" : ""}: ${r.rows} rows in ${r.steps} steps, ${r.elapsedMs} ms, ${rate} rows/s`)
    }
    if (report.overage > 0) yield* Console.error(`warning: ${report.tenants} tenants, ${report.overage} past tenants.max`)
  })

/** Write the standard fixture store of `format` to `file` as `.tar.zst`. */
export const fixture = (file: string, format: 2 | 3) =>
  Effect.gen(function* () {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-fixture-"))
    const hooks = Fixture.standardHooks(format)
    yield* Effect.gen(function* () {
      // The store is closed (scope ended) before its files are archived.
      yield* Effect.scoped(
        Effect.flatMap(makeRocksDbStore(dir, { supportedFormat: format, commitThread: "main" }), (store) =>
          format === 2 ? Fixture.writeV2(store, hooks, { sync: true }) : Fixture.writeV3(store, hooks, { sync: true })
        )
      )
      const bytes = yield* Archive.pack(dir, file)
      yield* Console.log(`wrote ${file}: format ${format} store, ${hooks.length} hooks, ${bytes} bytes`)
    }).pipe(Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))))
  })

/** A format 2 store is opened as a format 2 build, so checking it changes nothing (it stays openable by its release). */
export const check = (dir: string) =>
  Effect.gen(function* () {
    const format = yield* probeFormat(dir)
    const result = yield* Effect.scoped(
      Effect.flatMap(
        makeRocksDbStore(dir, { commitThread: "main", ...(format < CURRENT_FORMAT ? { supportedFormat: format } : {}) }),
        runCheck
      )
    )
    yield* Console.log(formatResult(result))
    if (result.corruptions > 0) return yield* Effect.fail(new CheckFailed({ differences: result.corruptions }))
  }).pipe(Effect.catchTag("StoreLocked", () => Effect.fail(new CheckNodeRunning({ dir }))))

/**
 * `store check` on PostgreSQL (`store.kind: postgres`): the same check over the database. No lock
 * keeps a running node out, so a node writing meanwhile shows as differences: check a running
 * node through `POST /v1/store/check`, which accounts for the writes in flight.
 */
export const checkPostgres = (url: string, schema: string) =>
  Effect.gen(function* () {
    const result = yield* Effect.scoped(Effect.flatMap(openPostgresStore({ url: Redacted.make(url), schema }), runCheck))
    yield* Console.log(formatResult(result))
    if (result.corruptions > 0) return yield* Effect.fail(new CheckFailed({ differences: result.corruptions }))
  })

/** The store (directory, or database) and the tenant limit from the configuration (`--config`, `--data-dir`). */
export const resolve = (config: Option.Option<string>, dir: Option.Option<string>) =>
  Effect.map(Config.load({ file: Option.getOrUndefined(config), dataDir: Option.getOrUndefined(dir) }), (c) => ({
    dir: storeDirOf(c.dataDir),
    maxTenants: c.tenants.max,
    postgres: c.store.kind === "postgres" ? { url: postgresUrl(c.store, process.env), schema: c.store.postgres.schema } : undefined
  }))
