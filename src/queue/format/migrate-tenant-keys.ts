/**
 * The read half of migration 2 → 3 (TEN-1 §7): one step reads up to `rows`
 * old rows from the cursor on (seeking to `lastOldKey`, never the family
 * start), one multi-get of the hooks whose ordinal this run does not know
 * yet (unique by seq), one of the dead rows' delivery rows, one of the `?n`
 * rows of tenants this run has not resolved yet and (once per run)
 * `m:next_ord`, then builds the batch with the pure `TenantKeys.build`.
 *
 * A run keeps the ordinals it resolved or allocated in memory, by tenant and
 * by hook: nothing else allocates while it runs (nothing serves yet) and a
 * hook's tenant never changes, so they are exact. The runner
 * drops the run (and its memory) when a write fails; a resumed run starts
 * empty and reads what the committed steps allocated.
 */
import { Effect } from "effect"
import * as K from "../../domain/keys.js"
import * as TenantKeys from "../../domain/migrations/tenant-keys.js"
import type { Batch } from "../../domain/ops.js"
import * as Tenants from "../../domain/tenants.js"
import type { StoreError, StoreShape } from "../../store/store.js"

/** Bound on a run's tenant → ord memory; cleared whole when full (a miss is one multi-get). */
export const RUN_CACHE_ENTRIES = Tenants.CACHE_ENTRIES

/** Seqs per page of a run's hook → ord memory (a page is a Uint32Array: 256 KiB). */
export const HOOK_PAGE_SEQS = 65_536
/** Bound on that memory's pages (64 pages: 16 MiB, 4,194,304 seqs); past it the oldest page is dropped. */
export const HOOK_CACHE_PAGES = 64

/**
 * The ordinal of each hook a run has resolved, by seq: a hook's rows sit in
 * several phases (due, inflight, dead, archive), and without this memory each
 * phase reads and decodes the hook again. Seqs are dense, so pages of ord + 1
 * (0: unknown) hold them compactly.
 */
export interface HookOrds {
  readonly get: (seq: number) => number | undefined
  readonly set: (seq: number, ord: number) => void
}

export const hookOrds = (pages = HOOK_CACHE_PAGES): HookOrds => {
  const byPage = new Map<number, Uint32Array>()
  return {
    get: (seq) => {
      const v = byPage.get(Math.floor(seq / HOOK_PAGE_SEQS))?.[seq % HOOK_PAGE_SEQS]
      return v === undefined || v === 0 ? undefined : v - 1
    },
    set: (seq, ord) => {
      const p = Math.floor(seq / HOOK_PAGE_SEQS)
      let page = byPage.get(p)
      if (page === undefined) {
        if (byPage.size >= pages) byPage.delete(byPage.keys().next().value!)
        page = new Uint32Array(HOOK_PAGE_SEQS)
        byPage.set(p, page)
      }
      page[seq % HOOK_PAGE_SEQS] = ord + 1
    }
  }
}

export interface RunState {
  readonly ords: Map<string, number>
  readonly hooks: HookOrds
  /** `m:next_ord` after the last step built, once read. */
  nextOrd: number | undefined
}

export const runState = (): RunState => ({ ords: new Map(), hooks: hookOrds(), nextOrd: undefined })

export interface StepResult {
  readonly ops: Batch
  /** The next cursor, or "done" when this step's batch finishes the migration. */
  readonly cursor: Uint8Array | "done"
  /** Old rows moved or rewritten. */
  readonly rows: number
  readonly phase: TenantKeys.Phase
  readonly allocated: number
}

/** Build the next step. `state` is updated as if the batch commits (the runner stops if it does not). */
export const step = (
  store: StoreShape,
  cursorBytes: Uint8Array | undefined,
  opts: { readonly startedAt: number; readonly rows: number },
  state: RunState = runState()
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
    const seqs = TenantKeys.hookSeqs(rows).filter((seq) => state.hooks.get(seq) === undefined)
    const hooks = seqs.length === 0 ? [] : yield* store.multiGet("hooks", seqs.map(K.hookKey))
    const tenants = TenantKeys.tenantsBySeq(seqs, hooks, (t) => state.ords.has(t))
    const refs = TenantKeys.deliveryRefs(rows)
    const rowValues = refs.length === 0 ? [] : yield* store.multiGet("deliveries", refs.map((r) => K.deliveryKey(r.seq, r.sink)))
    const deliveries = new Map(refs.map((r, i) => [TenantKeys.refId(r), rowValues[i]]))

    const names = TenantKeys.tenantsOf(tenants)
    const misses = names.filter((t) => !state.ords.has(t))
    const missed = misses.length === 0 ? [] : yield* store.multiGet("tenants", misses.map(K.tenantOrdKey))
    const ords = new Map<string, number | undefined>(names.map((t) => [t, state.ords.get(t)]))
    misses.forEach((t, i) => ords.set(t, TenantKeys.decodeOrd(missed[i])))
    const nextOrd = state.nextOrd ?? Tenants.nextOrdOf(yield* store.get("default", K.Meta.nextOrd))

    const out = TenantKeys.build({ rows, tenants, ordOfHook: state.hooks.get, deliveries, ords, nextOrd, startedAt: opts.startedAt, next: cur })
    if (state.ords.size + out.resolved.size > RUN_CACHE_ENTRIES) state.ords.clear()
    for (const [t, ord] of out.resolved) state.ords.set(t, ord)
    for (const [seq, t] of tenants) state.hooks.set(seq, out.resolved.get(t)!)
    state.nextOrd = out.nextOrd
    return {
      ops: out.ops,
      cursor: cur.phase === 5 ? "done" : TenantKeys.encodeCursor(cur),
      rows: out.moved,
      phase: first.phase,
      allocated: out.allocated.length
    } satisfies StepResult
  })
