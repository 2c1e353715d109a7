/**
 * What every store layer does at open, over its raw primitives: read the
 * format stamp, refuse a newer store, stamp a fresh one, and write the lo/hi
 * sentinels of the families a store does not have yet (TEN-1 §1 constraint 3,
 * §7: format 3 code opening a format 2 store writes the new families'
 * sentinels and leaves the stamp at 2 for the migration).
 */
import { Effect } from "effect"
import { decodeU32, encodeU32, familiesOf, Meta } from "../domain/keys.js"
import { type Batch, put } from "../domain/ops.js"
import { StoreFormatNewer, type StoreError } from "./store.js"

export const CURRENT_FORMAT = 3

export interface RawStore {
  readonly get: (key: Uint8Array) => Effect.Effect<Uint8Array | undefined, StoreError>
  readonly write: (batch: Batch) => Effect.Effect<void, StoreError>
}

/** Returns the store's format after open. */
export const initialize = (raw: RawStore, supported: number): Effect.Effect<number, StoreError | StoreFormatNewer> =>
  Effect.gen(function* () {
    const stamp = yield* raw.get(Meta.format)
    const found = stamp === undefined ? undefined : decodeU32(stamp)
    if (found !== undefined && found > supported) {
      return yield* Effect.fail(new StoreFormatNewer({ found, supported }))
    }
    const format = found ?? supported
    // Sentinels are written once: when the store is created, and when newer code
    // first opens an older store (only the families that format lacks). Rewriting
    // them on every open would silently heal a lost sentinel that a scan must report.
    const missing = familiesOf(supported).filter((f) => found === undefined || !f.formats.includes(found as 2 | 3))
    const ops: Batch = [
      ...missing.flatMap((f) => [put(f.cf, f.lo, f.sentinelValue), put(f.cf, f.hi, f.sentinelValue)]),
      ...(found === undefined ? [put("default", Meta.format, encodeU32(format))] : [])
    ]
    if (ops.length > 0) yield* raw.write(ops)
    return format
  })
