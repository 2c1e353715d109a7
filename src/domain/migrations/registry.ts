/**
 * The store migrations, by (from, to), and the runner's meta rows (TEN-1 §7, §8).
 * Pure: which migrations a store at format `found` needs, and the keys and
 * values the runner writes around them. The steps themselves (reads, then a
 * pure batch) are wired in `src/queue/format/migrate.ts`.
 *
 * Meta rows (default column family) while a migration `from → to` runs:
 * - `m:migrating:<to>` = `<<startedAt::64>>` (ms): the marker of an
 *   interrupted migration, and its start time, fixed once so a resumed run
 *   classifies rows the same way;
 * - `m:cursor:migrate:<from>-<to>` = the step's cursor (opaque here).
 * The final step's batch puts `m:format` = to and deletes both.
 */
import * as K from "../keys.js"
import { type Batch, del, type Op, put } from "../ops.js"
import * as TenantKeys from "./tenant-keys.js"

export interface MigrationInfo {
  readonly from: number
  readonly to: number
  readonly name: string
  readonly description: string
}

export const Registry: ReadonlyArray<MigrationInfo> = [
  { from: TenantKeys.FROM, to: TenantKeys.TO, name: TenantKeys.NAME, description: TenantKeys.DESCRIPTION }
]

/** The chain of migrations from `found` up to `target`, or the first format with no way up. */
export const plan = (
  found: number,
  target: number
): { readonly _tag: "ok"; readonly steps: ReadonlyArray<MigrationInfo> } | { readonly _tag: "gap"; readonly at: number } => {
  const steps: Array<MigrationInfo> = []
  let at = found
  while (at < target) {
    const m = Registry.find((r) => r.from === at)
    if (m === undefined) return { _tag: "gap", at }
    steps.push(m)
    at = m.to
  }
  return { _tag: "ok", steps }
}

/** What `store migrate --dry-run` prints for a pending migration. */
export const describe = (m: MigrationInfo): string => `${m.from} -> ${m.to}: ${m.description}`

export const migratingKey = (m: MigrationInfo): Uint8Array => K.Meta.migrating(m.to)
export const cursorKey = (m: MigrationInfo): Uint8Array => K.Meta.cursor(`migrate:${m.from}-${m.to}`)

export const encodeStartedAt = (at: number): Uint8Array => K.encodeU64(at)
export const decodeStartedAt = (v: Uint8Array): number => K.decodeU64(v)

/** Put at the start of a migration, in its own synced write. */
export const beginOps = (m: MigrationInfo, startedAt: number): Batch => [
  put("default", migratingKey(m), encodeStartedAt(startedAt))
]

/** Appended to a step's batch: the cursor, or (final step) the stamp with the marker and cursor gone. */
export const commitOps = (m: MigrationInfo, cursor: Uint8Array | "done"): ReadonlyArray<Op> =>
  cursor === "done"
    ? [put("default", K.Meta.format, K.encodeU32(m.to)), del("default", migratingKey(m)), del("default", cursorKey(m))]
    : [put("default", cursorKey(m), cursor)]
