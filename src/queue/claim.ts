/**
 * The claim (TEN-1 §5, §6): due → inflight for the tenants a tick chose, each read under its
 * tenant's lock (a claim reads due rows and then deletes them), all claims in one batch.
 */
import { Effect } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import type { StoreError, StoreShape } from "../store/store.js"
import { type DueEntry, readDue } from "./due.js"
import type { WithTenant } from "./tenant-locks.js"

export interface ClaimRequest {
  readonly ord: number
  /** The tenant's scan floor (its `at` cursor; 0 when none). */
  readonly floorAt: number
  /** Rows this tenant may take at most (its share of the tick). */
  readonly limit: number
  /** Bytes this tenant may take at most (its first row is taken even past it); the tick's `bytes` still caps all. */
  readonly bytes?: number
}

export interface ClaimedVisit {
  readonly ord: number
  /** Claimed rows in `at` order; empty when nothing was due from the floor. */
  readonly rows: ReadonlyArray<DueEntry>
  /** Nothing more of this tenant is due by now past these rows. */
  readonly drained: boolean
  /** The tenant's next due row after these (read, not claimed); undefined when drained. */
  readonly next: DueEntry | undefined
}

/**
 * Claims up to `rows` rows and `bytes` bytes over `requests`, in their order, each tenant capped by
 * its own `limit`; a request met with no budget left is not visited. The locks are taken one
 * tenant after the other and held until the one write, so no other transition of these tenants
 * sees a row read here and not yet claimed.
 */
export const claimDue =
  (store: StoreShape, withTenant: WithTenant) =>
  (now: number, requests: ReadonlyArray<ClaimRequest>, rows: number, bytes: number): Effect.Effect<Array<ClaimedVisit>, StoreError> => {
    const read = readDue(store)
    const visits: Array<ClaimedVisit> = []
    const visit = (i: number, rowsLeft: number, bytesLeft: number): Effect.Effect<void, StoreError> => {
      const r = requests[i]
      if (r === undefined || rowsLeft <= 0 || bytesLeft <= 0) {
        const claimed = visits.flatMap((v) => v.rows)
        return claimed.length === 0 ? Effect.void : store.write(Deliveries.batch(claimed.map((d) => Deliveries.claim(d.ref, d.value))), { sync: false })
      }
      return withTenant(
        r.ord,
        Effect.suspend(() => read(r.ord, now, r.floorAt, Math.min(r.limit, rowsLeft), Math.min(r.bytes ?? bytesLeft, bytesLeft))).pipe(
          Effect.flatMap((due) => {
            visits.push({ ord: r.ord, rows: due.rows, drained: due.drained, next: due.next })
            let used = 0
            for (const d of due.rows) used += d.value.size
            return visit(i + 1, rowsLeft - due.rows.length, bytesLeft - used)
          })
        )
      )
    }
    return visit(0, rows, bytes).pipe(Effect.as(visits))
  }
