/** Per-tenant due reads (TEN-1 §5): a bounded page of due rows and a tenant's first due row. */
import { Effect } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import type { Envelope } from "../domain/envelope.js"
import * as K from "../domain/keys.js"
import type { Entry, StoreError, StoreShape } from "../store/store.js"
import { envelopes } from "./hooks.js"

/** Due rows read per page of `dueForTenant`. */
export const DUE_SCAN_PAGE = 256

export interface DueEntry {
  readonly ref: K.DueRef
  readonly value: K.DueValue
}

const decodeDue = (e: Entry): DueEntry => ({ ref: K.decodeDueKey(e.key), value: K.decodeDueValue(e.value) })

/** A page of a tenant's due rows, and whether it holds every row due from the floor (none left past it by now). */
export interface DuePage {
  readonly rows: ReadonlyArray<DueEntry>
  readonly drained: boolean
  /** The first row read and not taken (past the limit or the byte budget): the tenant's next due row from the floor. */
  readonly next?: DueEntry | undefined
}

export const readDue =
  (store: StoreShape) =>
  (ord: number, now: number, floorAt: number, limit: number, byteBudget: number): Effect.Effect<DuePage, StoreError> =>
    Effect.gen(function* () {
      const out: Array<DueEntry> = []
      if (limit <= 0 || byteBudget <= 0) return { rows: out, drained: false }
      if (floorAt > now) return { rows: out, drained: true }
      const range = Deliveries.dueRange(ord, floorAt, now)
      let lo = range.lo
      let bytes = 0
      for (;;) {
        // One row past the limit, read and left: it says whether the tenant drained.
        const want = Math.min(DUE_SCAN_PAGE, limit - out.length + 1)
        const page = yield* store.scan("index", { lo, hi: range.hi }, { limit: want })
        for (const e of page) {
          const d = decodeDue(e)
          if (out.length === limit) return { rows: out, drained: false, next: d }
          // The first row is taken even past the budget, so one oversized row cannot wedge its tenant.
          if (out.length > 0 && bytes + d.value.size > byteBudget) return { rows: out, drained: false, next: d }
          out.push(d)
          bytes += d.value.size
        }
        if (page.length < want) return { rows: out, drained: true }
        lo = K.keyAfter(page[page.length - 1]!.key)
      }
    })

/**
 * Whether a due row may be claimed now, given its hook (undefined when gone): true, or false (refused:
 * it stays due), or a time to move it to (deferred: due again then, kind and attempts kept).
 */
export type Admit = (row: DueEntry, env: Envelope | undefined) => boolean | number

/** A row `admit` deferred, and its new `at`. */
export interface Deferred {
  readonly entry: DueEntry
  readonly at: number
}

/** A page of due rows read with their hooks, `admit` deciding each (`readAdmitted`). */
export interface AdmittedPage {
  readonly rows: ReadonlyArray<DueEntry>
  /** Each row's hook, in `rows` order. */
  readonly envelopes: ReadonlyArray<Envelope | undefined>
  /** Nothing is left past the rows read (those taken and those refused). */
  readonly drained: boolean
  /** The first row read and not taken past the limit or the budget (none after a refusal ended the read). */
  readonly next?: DueEntry | undefined
  /** The first row `admit` refused: it and every refused row after it stay due. */
  readonly firstRefused?: DueEntry | undefined
  /** Rows `admit` refused. */
  readonly refused: number
  /** Rows `admit` deferred (the claim moves them in its write). */
  readonly deferred: ReadonlyArray<Deferred>
  /** The last row read and decided (taken or refused). */
  readonly last?: K.DueRef | undefined
}

/**
 * `readDue` with each row's hook read beside it (one multi-get a page) and `admit` asked of every
 * row in order: a refused row is stepped over and stays due, so a tenant whose first rows wait for
 * a full sink still has its later rows read; the read stops after `refuseMax` refusals, or once
 * `more` says no later row could be admitted.
 */
export const readAdmitted = (store: StoreShape) => {
  const hooks = envelopes(store)
  return (
    ord: number,
    now: number,
    floorAt: number,
    limit: number,
    byteBudget: number,
    admit: Admit,
    /** Asked after a refusal: false when no later row could be admitted either (the read stops there). */
    more: () => boolean,
    refuseMax: number,
    after?: { readonly seq: number; readonly sink: number }
  ): Effect.Effect<AdmittedPage, StoreError> =>
    Effect.gen(function* () {
      const rows: Array<DueEntry> = []
      const envs: Array<Envelope | undefined> = []
      const deferred: Array<Deferred> = []
      if (limit <= 0 || byteBudget <= 0) return { rows, envelopes: envs, drained: false, refused: 0, deferred }
      if (floorAt > now) return { rows, envelopes: envs, drained: true, refused: 0, deferred }
      const range = after === undefined ? Deliveries.dueRange(ord, floorAt, now) : Deliveries.dueRangeAfter(ord, { at: floorAt, ...after }, now)
      let lo = range.lo
      let bytes = 0
      let refused = 0
      let firstRefused: DueEntry | undefined
      let last: K.DueRef | undefined
      const page = (drained: boolean, next?: DueEntry): AdmittedPage => ({ rows, envelopes: envs, drained, next, firstRefused, refused, last, deferred })
      for (;;) {
        const want = Math.min(DUE_SCAN_PAGE, limit - rows.length + 1)
        const raw = yield* store.scan("index", { lo, hi: range.hi }, { limit: want })
        const entries = raw.map(decodeDue)
        const read = yield* hooks([...new Set(entries.map((d) => d.ref.seq))])
        for (const d of entries) {
          if (rows.length === limit) return page(false, d)
          if (rows.length > 0 && bytes + d.value.size > byteBudget) return page(false, d)
          const env = read.get(d.ref.seq)
          last = d.ref
          const a = admit(d, env)
          if (a !== true) {
            // A deferred row is decided (moved by the claim's write); both count against `refuseMax`.
            if (a === false) {
              firstRefused ??= d
              refused++
            } else deferred.push({ entry: d, at: a })
            if (refused + deferred.length >= refuseMax || (a === false && !more())) return page(false)
            continue
          }
          rows.push(d)
          envs.push(env)
          bytes += d.value.size
        }
        if (entries.length < want) return page(true)
        lo = K.keyAfter(raw[raw.length - 1]!.key)
      }
    })
}

export const dueForTenant =
  (store: StoreShape) =>
  (ord: number, now: number, floorAt: number, limit: number, byteBudget: number): Effect.Effect<ReadonlyArray<DueEntry>, StoreError> =>
    Effect.map(readDue(store)(ord, now, floorAt, limit, byteBudget), (p) => p.rows)

/** A tenant's first due row (at or after `floorAt` when given: a seek past the rows below it, and their tombstones). */
export const firstDue =
  (store: StoreShape) =>
  (ord: number, floorAt?: number): Effect.Effect<DueEntry | undefined, StoreError> =>
    store
      .first("index", floorAt === undefined ? Deliveries.tenantDueRange(ord) : Deliveries.tenantDueFrom(ord, floorAt))
      .pipe(Effect.map((e) => (e === undefined ? undefined : decodeDue(e))))
