/** Per-tenant due reads (TEN-1 §5): a bounded page of due rows and a tenant's first due row. */
import { Effect } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import * as K from "../domain/keys.js"
import type { Entry, StoreError, StoreShape } from "../store/store.js"

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
