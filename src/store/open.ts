/**
 * What every store layer does at open, over its raw primitives: read the
 * format stamp, refuse a newer store, stamp a fresh one, and write the lo/hi
 * sentinels of the families a store does not have yet (TEN-1 §1 constraint 3,
 * §7: format 3 code opening a format 2 store writes the new families'
 * sentinels and leaves the stamp at 2 for the migration), including those
 * added to the store's own format after it was created (`ADDED_FAMILIES`).
 */
import { Effect } from "effect"
import { decodeU32, encodeU32, type Family, Families, familiesOf, Meta } from "../domain/keys.js"
import { type Batch, type ColumnFamily, put } from "../domain/ops.js"
import { StoreFormatNewer, type StoreError } from "./store.js"

export const CURRENT_FORMAT = 3

export interface RawStore {
  readonly get: (cf: ColumnFamily, key: Uint8Array) => Effect.Effect<Uint8Array | undefined, StoreError>
  readonly write: (batch: Batch) => Effect.Effect<void, StoreError>
}

/**
 * Families added to a format after stores of that format existed (docs/storage.md, "Families
 * added to format 3"). Such a store has no sentinels for them: the first open by a build that
 * knows the family writes both with `m:family:<name>` in one batch, and once that key exists it
 * never writes them again, so a sentinel lost later is still reported by a scan.
 */
export const ADDED_FAMILIES: ReadonlyArray<Family> = [
  Families.tenant_limits,
  Families.endpoints,
  Families.erasures,
  Families.waiting,
  Families.heads
]

const ADDED_MARK = new Uint8Array([1])

const sentinelOps = (f: Family): Batch => [
  put(f.cf, f.lo, f.sentinelValue),
  put(f.cf, f.hi, f.sentinelValue),
  ...(ADDED_FAMILIES.includes(f) ? [put("default", Meta.family(f.name), ADDED_MARK)] : [])
]

/** Added families of `format` this store never got: no lo sentinel and no `m:family:<name>`. */
const addedMissing = (raw: RawStore, format: number) =>
  Effect.filter(
    ADDED_FAMILIES.filter((f) => f.formats.includes(format as 2 | 3)),
    (f) =>
      Effect.map(
        Effect.all([raw.get(f.cf, f.lo), raw.get("default", Meta.family(f.name))]),
        ([lo, mark]) => lo === undefined && mark === undefined
      )
  )

/** Returns the store's format after open. */
export const initialize = (raw: RawStore, supported: number): Effect.Effect<number, StoreError | StoreFormatNewer> =>
  Effect.gen(function* () {
    const stamp = yield* raw.get("default", Meta.format)
    const found = stamp === undefined ? undefined : decodeU32(stamp)
    if (found !== undefined && found > supported) {
      return yield* Effect.fail(new StoreFormatNewer({ found, supported }))
    }
    const format = found ?? supported
    // Sentinels are written once: when the store is created, when newer code first opens
    // an older store (only the families that format lacks), and when a build first opens a
    // store of its own format created before one of ADDED_FAMILIES. Rewriting them on every
    // open would silently heal a lost sentinel that a scan must report.
    const missing = familiesOf(supported).filter((f) => found === undefined || !f.formats.includes(found as 2 | 3))
    const added = found === supported ? yield* addedMissing(raw, found) : []
    const ops: Batch = [
      ...[...missing, ...added].flatMap(sentinelOps),
      ...(found === undefined ? [put("default", Meta.format, encodeU32(format))] : [])
    ]
    if (ops.length > 0) yield* raw.write(ops)
    return format
  })
