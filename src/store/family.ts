/**
 * Whole-family scans that trust nothing: a scan must start at the family's lo
 * sentinel and reach its hi sentinel, because a binding may report
 * corruption mid-iteration as a clean end of the scan (TEN-1 §1, constraint 3).
 */
import { Effect, Stream } from "effect"
import { asBuffer, compare, type Family, familyRange } from "../domain/keys.js"
import { type Entry, type StoreError, StoreCorrupt, type StoreShape } from "./store.js"

const hex = (k: Uint8Array | undefined) => (k === undefined ? "(none)" : asBuffer(k).toString("hex"))

/** The data rows of a family (sentinels excluded), in key order, checked against both sentinels. */
export const familyRows = (
  store: StoreShape,
  family: Family,
  opts?: { readonly chunk?: number }
): Stream.Stream<Entry, StoreError | StoreCorrupt> =>
  Stream.suspend(() => {
    let seenLo = false
    let seenHi = false
    let last: Uint8Array | undefined
    const corrupt = (message: string) =>
      new StoreCorrupt({ family: family.name, lastKey: hex(last), message: `${family.name}: ${message}` })
    const rows = store.stream(family.cf, familyRange(family), opts?.chunk === undefined ? {} : { chunk: opts.chunk }).pipe(
      Stream.mapEffect((e): Effect.Effect<ReadonlyArray<Entry>, StoreCorrupt> => {
        if (!seenLo) {
          if (compare(e.key, family.lo) !== 0) return Effect.fail(corrupt("scan did not start at the lo sentinel"))
          seenLo = true
          last = e.key
          return Effect.succeed([])
        }
        if (seenHi) return Effect.fail(corrupt("key after the hi sentinel"))
        last = e.key
        if (compare(e.key, family.hi) === 0) {
          seenHi = true
          return Effect.succeed([])
        }
        return Effect.succeed([e])
      }),
      Stream.flattenIterable
    )
    return Stream.concat(
      rows,
      Stream.fromEffect(
        Effect.suspend(() =>
          seenLo && seenHi
            ? Effect.void
            : Effect.fail(corrupt(seenLo ? "scan ended before the hi sentinel" : "lo sentinel missing"))
        )
      ).pipe(Stream.drain)
    )
  })

/** Fold a family's data rows (bounded memory: one chunk at a time). */
export const foldFamily = <A>(
  store: StoreShape,
  family: Family,
  zero: A,
  f: (acc: A, e: Entry) => A
): Effect.Effect<A, StoreError | StoreCorrupt> => Stream.runFold(familyRows(store, family), () => zero, f)
