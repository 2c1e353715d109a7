/** Hook reads for the other wings: the envelopes of claimed rows, and the tenants of hooks named by id. */
import { Effect } from "effect"
import { decodeEnvelope, type Envelope, tenantOf } from "../domain/envelope.js"
import * as K from "../domain/keys.js"
import type { StoreError, StoreShape } from "../store/store.js"

/** The envelope of each hook (undefined when gone or undecodable), one multi-get. */
export const envelopes =
  (store: StoreShape) =>
  (seqs: ReadonlyArray<number>): Effect.Effect<Map<number, Envelope | undefined>, StoreError> =>
    seqs.length === 0
      ? Effect.succeed(new Map())
      : store.multiGet("hooks", seqs.map(K.hookKey)).pipe(Effect.map((hooks) => new Map(seqs.map((s, i) => [s, decodeEnvelope(hooks[i])]))))

/** The tenants owning those of `seqs` whose hooks still exist. */
export const tenantsOfHooks =
  (store: StoreShape) =>
  (seqs: ReadonlyArray<number>): Effect.Effect<Set<string>, StoreError> =>
    Effect.map(envelopes(store)(seqs), (m) => {
      const out = new Set<string>()
      for (const env of m.values()) if (env !== undefined) out.add(tenantOf(env))
      return out
    })
