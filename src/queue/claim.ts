/**
 * The claim (TEN-1 §5, §6): due → inflight for the tenants a tick chose, each read under its
 * tenant's lock (a claim reads due rows and then deletes them), all claims in one batch.
 */
import { Effect } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import type { Envelope } from "../domain/envelope.js"
import type * as K from "../domain/keys.js"
import type { StoreError, StoreShape } from "../store/store.js"
import { type Admit, type Deferred, type DueEntry, readAdmitted, readDue } from "./due.js"
import type { WithTenant } from "./tenant-locks.js"

export interface ClaimRequest {
  readonly ord: number
  /** The tenant's scan floor (its `at` cursor; 0 when none). */
  readonly floorAt: number
  /** Rows this tenant may take at most (its share of the tick). */
  readonly limit: number
  /** Bytes this tenant may take at most (its first row is taken even past it); the tick's `bytes` still caps all. */
  readonly bytes?: number
  /** With an admission: the read starts after this row of `floorAt` (the last one a visit decided), not at `floorAt`. */
  readonly floorAfter?: { readonly seq: number; readonly sink: number } | undefined
}

export interface ClaimedVisit {
  readonly ord: number
  /** Claimed rows in `at` order; empty when nothing was due from the floor. */
  readonly rows: ReadonlyArray<DueEntry>
  /** Nothing more of this tenant is due by now past these rows. */
  readonly drained: boolean
  /** The tenant's next due row after these (read, not claimed); undefined when drained. */
  readonly next: DueEntry | undefined
  /** With an admission: each claimed row's hook (in `rows` order), and what it refused. */
  readonly admitted?: {
    readonly envelopes: ReadonlyArray<Envelope | undefined>
    /** The first row refused (it and the later refused ones stay due), the count, and the last row decided. */
    readonly firstRefused: DueEntry | undefined
    readonly refused: number
    readonly last: K.DueRef | undefined
    /** Rows moved to a later `at` in the claim's write (their destination's breaker is open). */
    readonly deferred: number
  }
}

/**
 * A claim's admission (the pipeline's sinks), one per tenant visited: `admit` is asked of each row
 * with its hook; after a refusal the read goes on while `more` says a later row could be admitted,
 * for `refuseMax` refusals at most. A visit is not started while `more` of the last said no.
 */
export interface Admission {
  readonly visit: (ord: number) => { readonly admit: Admit; readonly more: () => boolean }
  /** Whether any row could be admitted at all (some sink has room). */
  readonly open: () => boolean
  readonly refuseMax: number
}

/**
 * Claims up to `rows` rows and `bytes` bytes over `requests`, in their order, each tenant capped by
 * its own `limit`; a request met with no budget left is not visited. The locks are taken one
 * tenant after the other and held until the one write, so no other transition of these tenants
 * sees a row read here and not yet claimed.
 */
export const claimDue =
  (store: StoreShape, withTenant: WithTenant, fenced: ReadonlySet<number> = new Set()) =>
  (now: number, requests: ReadonlyArray<ClaimRequest>, rows: number, bytes: number, admission?: Admission): Effect.Effect<Array<ClaimedVisit>, StoreError> => {
    const read = readDue(store)
    const readWith = readAdmitted(store)
    const visits: Array<ClaimedVisit> = []
    const deferred: Array<Deferred> = []
    const visit = (i: number, rowsLeft: number, bytesLeft: number): Effect.Effect<void, StoreError> => {
      const r = requests[i]
      if (r === undefined || rowsLeft <= 0 || bytesLeft <= 0) {
        const claimed = visits.flatMap((v) => v.rows)
        if (claimed.length === 0 && deferred.length === 0) return Effect.void
        const moved = deferred.map((d) => Deliveries.defer(d.entry.ref, d.entry.value, d.at))
        return store.write(Deliveries.batch([...claimed.map((d) => Deliveries.claim(d.ref, d.value)), ...moved]), { sync: false })
      }
      const limit = Math.min(r.limit, rowsLeft)
      const budget = Math.min(r.bytes ?? bytesLeft, bytesLeft)
      const next = (taken: ReadonlyArray<DueEntry>) => {
        let used = 0
        for (const d of taken) used += d.value.size
        return visit(i + 1, rowsLeft - taken.length, bytesLeft - used)
      }
      if (admission !== undefined) {
        // No sink has room: the tenants left are not read (they keep their turn).
        if (!admission.open()) return visit(requests.length, rowsLeft, bytesLeft)
        return withTenant(
          r.ord,
          Effect.suspend(() => {
            // TEN-5: an erasing tenant's rows are not claimed, with an admission too (under its lock, see Queue.fence).
            if (fenced.has(r.ord)) return Effect.succeed({ rows: [], drained: true, next: undefined, envelopes: [], firstRefused: undefined, refused: 0, last: undefined, deferred: [] })
            const a = admission.visit(r.ord)
            return readWith(r.ord, now, r.floorAt, limit, budget, a.admit, a.more, admission.refuseMax, r.floorAfter)
          }).pipe(
            Effect.flatMap((due) => {
              deferred.push(...due.deferred)
              visits.push({
                ord: r.ord,
                rows: due.rows,
                drained: due.drained,
                next: due.next,
                admitted: { envelopes: due.envelopes, firstRefused: due.firstRefused, refused: due.refused, last: due.last, deferred: due.deferred.length }
              })
              return next(due.rows)
            })
          )
        )
      }
      return withTenant(
        r.ord,
        // TEN-5: an erasing tenant's rows are not claimed (checked under its lock, see Queue.fence).
        Effect.suspend(() => (fenced.has(r.ord) ? Effect.succeed({ rows: [], drained: true, next: undefined }) : read(r.ord, now, r.floorAt, limit, budget))).pipe(
          Effect.flatMap((due) => {
            visits.push({ ord: r.ord, rows: due.rows, drained: due.drained, next: due.next })
            return next(due.rows)
          })
        )
      )
    }
    return visit(0, rows, bytes).pipe(Effect.as(visits))
  }

/**
 * Claimed rows back to due as they were (`at`, kind), in one batch: a tick that failed after claiming them.
 * Rows of a tenant whose inflight rows an erase took back (`taken`, Queue.takeBack) are dropped, as in settle.
 */
export const unclaim =
  (store: StoreShape, taken: ReadonlySet<number> = new Set()) =>
  (rows: ReadonlyArray<DueEntry>): Effect.Effect<void, StoreError> =>
    Effect.suspend(() => {
      const kept = taken.size === 0 ? rows : rows.filter((d) => !taken.has(d.ref.ord))
      return kept.length === 0 ? Effect.void : store.write(Deliveries.batch(kept.map((d) => Deliveries.unclaim(d.ref, d.value))), { sync: false })
    })
