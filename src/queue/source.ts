/** `pendingForSource` (TEN-1 §6): a source's due and inflight rows, folded through their hooks' envelopes. */
import { Effect, Stream } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import { decodeEnvelope } from "../domain/envelope.js"
import * as K from "../domain/keys.js"
import type { Entry, Range, StoreError, StoreShape } from "../store/store.js"

/** Rows per hook multi-get of `pendingForSource`. */
export const SOURCE_FOLD_CHUNK = 500

export interface SourcePending {
  readonly pending: number
  readonly scheduled: number
  readonly inflight: number
}

// TEN-1 §6: a fixed-tenant source folds only its tenant's ranges; a shared source is O(backlog).
export const pendingForSource =
  (store: StoreShape) =>
  (sourceId: string, fixedOrd?: number): Effect.Effect<SourcePending, StoreError> =>
    Effect.gen(function* () {
      const [due, inflight] =
        fixedOrd === undefined
          ? [K.familyDataRange(K.Families.due), K.familyDataRange(K.Families.inflight)]
          : [Deliveries.tenantDueRange(fixedOrd), Deliveries.tenantInflightRange(fixedOrd)]
      const fold = (range: Range, f: (e: Entry) => "pending" | "scheduled" | "inflight", seqOf: (k: Uint8Array) => number) =>
        store.stream("index", range, { chunk: SOURCE_FOLD_CHUNK }).pipe(
          Stream.grouped(SOURCE_FOLD_CHUNK),
          Stream.runFoldEffect(() => ({ pending: 0, scheduled: 0, inflight: 0 }), (acc, rows) =>
            Effect.gen(function* () {
              const seqs = [...new Set(rows.map((e) => seqOf(e.key)))]
              const hooks = yield* store.multiGet("hooks", seqs.map(K.hookKey))
              const ofSource = new Set(seqs.filter((_, i) => decodeEnvelope(hooks[i])?.sourceId === sourceId))
              const out = { ...acc }
              for (const e of rows) if (ofSource.has(seqOf(e.key))) out[f(e)]++
              return out
            })
          )
        )
      const a = yield* fold(due, (e) => (K.decodeDueValue(e.value).kind === 0 ? "pending" : "scheduled"), (k) => K.decodeDueKey(k).seq)
      const b = yield* fold(inflight, () => "inflight", (k) => K.decodeInflightKey(k).seq)
      return { pending: a.pending, scheduled: a.scheduled, inflight: b.inflight }
    })
