/**
 * The read half of migration 2 → 3 (TEN-1 §7): one step reads up to `rows`
 * old rows from the cursor on (seeking to `lastOldKey`, never the family
 * start), one multi-get of their hooks (unique by seq), one of the dead rows'
 * delivery rows, one of the tenants' `?n` rows and `m:next_ord`, then builds
 * the batch with the pure `TenantKeys.build`.
 */
import { Effect } from "effect"
import * as K from "../domain/keys.js"
import * as TenantKeys from "../domain/migrations/tenant-keys.js"
import type { Batch } from "../domain/ops.js"
import type { StoreError, StoreShape } from "./store.js"

export interface StepResult {
  readonly ops: Batch
  /** The next cursor, or "done" when this step's batch finishes the migration. */
  readonly cursor: Uint8Array | "done"
  /** Old rows read (and moved or rewritten). */
  readonly rows: number
  readonly phase: TenantKeys.Phase
  readonly allocated: number
  readonly nextOrd: number
}

export const step = (
  store: StoreShape,
  cursorBytes: Uint8Array | undefined,
  opts: { readonly startedAt: number; readonly rows: number }
): Effect.Effect<StepResult, StoreError> =>
  Effect.gen(function* () {
    const first = TenantKeys.decodeCursor(cursorBytes)
    let cur = first
    const rows: Array<TenantKeys.OldRow> = []
    // Fill the step from consecutive phases; an empty phase costs one seek.
    while (cur.phase !== 5 && rows.length < opts.rows) {
      const phase = cur.phase
      const r = TenantKeys.scanRange(cur)
      const asked = opts.rows - rows.length
      const page = yield* store.scan(r.cf, r, { limit: asked })
      for (const e of page) rows.push(TenantKeys.decodeRow(phase, e.key, e.value))
      cur = TenantKeys.advance(cur, page.length, asked, page[page.length - 1]?.key)
    }
    const seqs = TenantKeys.hookSeqs(rows)
    const hookValues = seqs.length === 0 ? [] : yield* store.multiGet("hooks", seqs.map(K.hookKey))
    const hooks = new Map(seqs.map((s, i) => [s, hookValues[i]]))
    const refs = TenantKeys.deliveryRefs(rows)
    const rowValues = refs.length === 0 ? [] : yield* store.multiGet("deliveries", refs.map((r) => K.deliveryKey(r.seq, r.sink)))
    const deliveries = new Map(refs.map((r, i) => [TenantKeys.refId(r), rowValues[i]]))
    const tenants = TenantKeys.tenantsOf(rows, hooks)
    const ordValues = tenants.length === 0 ? [] : yield* store.multiGet("tenants", tenants.map(K.tenantOrdKey))
    const ords = new Map(tenants.map((t, i) => [t, ordValues[i]]))
    const nextOrd = yield* store.get("default", K.Meta.nextOrd)
    const out = TenantKeys.build({ rows, hooks, deliveries, ords, nextOrd, startedAt: opts.startedAt, next: cur })
    return {
      ops: out.ops,
      cursor: cur.phase === 5 ? "done" : TenantKeys.encodeCursor(cur),
      rows: out.moved,
      phase: first.phase,
      allocated: out.allocated.length,
      nextOrd: out.nextOrd
    } satisfies StepResult
  })
