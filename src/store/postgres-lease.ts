/**
 * The lease of a PostgreSQL store (docs/architecture.md "High availability"): one row in the
 * store's schema (postgres-schema.ts `leaseDdl`), read and written on a connection of its own so
 * that its session advisory lock lives as long as the node's hold. Expiry is on the server's clock
 * (`clock_timestamp()`), so no two nodes' clocks are compared. Safety does not rest on the lock:
 * it is the fast path by which a standby sees that the holder's session ended (a killed node);
 * a paused node keeps its session, and then only the expiry hands the lease on. Every batch after
 * `fence(epoch)` carries the fence (postgres-batch.ts), which fails once the epoch moved on.
 */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql/SqlClient"
import { LEASE_LOCK_KEY, leaseTableOf } from "./postgres-schema.js"
import type { LeaseOps, StoreError } from "./store.js"

type Values = ReadonlyArray<ReadonlyArray<unknown>>

export const makeLease = (
  sql: SqlClient,
  schema: string,
  fail: (op: string) => (e: unknown) => StoreError,
  setFence: (epoch: bigint) => void
): LeaseOps => {
  const table = leaseTableOf(schema)
  const run = (op: string, text: string, params: ReadonlyArray<unknown> = []): Effect.Effect<Values, StoreError> =>
    sql.unsafe(text, params).values.pipe(Effect.mapError(fail(op)))
  // Whether this session holds the advisory lock; a failed statement may mean a new session: asked again.
  let locked = false
  const lock = (op: string) =>
    Effect.gen(function* () {
      if (locked) return true
      const [row] = yield* run(op, `SELECT pg_try_advisory_lock(${LEASE_LOCK_KEY})`)
      locked = row?.[0] === true
      return locked
    }).pipe(Effect.tapError(() => Effect.sync(() => void (locked = false))))

  return {
    tryAcquire: (holder, leaseMs) =>
      Effect.gen(function* () {
        // The lock is free: whoever held the lease has no session left (or never locked: a takeover by expiry not yet locked).
        const free = yield* lock("lease")
        const rows = yield* run(
          "lease",
          `UPDATE ${table} SET epoch = epoch + 1, holder = $1, expires_at = clock_timestamp() + $2::int * interval '1 millisecond'
           WHERE id = 1 AND (expires_at < clock_timestamp() OR holder IS NULL OR $3::boolean) RETURNING epoch`,
          [holder, leaseMs, free]
        )
        return rows[0] === undefined ? undefined : BigInt(rows[0][0] as string | number | bigint)
      }),
    renew: (holder, epoch, leaseMs) =>
      Effect.gen(function* () {
        yield* lock("lease")
        const rows = yield* run(
          "lease",
          `UPDATE ${table} SET expires_at = clock_timestamp() + $3::int * interval '1 millisecond' WHERE id = 1 AND epoch = $1::bigint AND holder = $2 RETURNING epoch`,
          [epoch.toString(), holder, leaseMs]
        )
        return rows.length > 0
      }),
    release: (holder, epoch) =>
      Effect.gen(function* () {
        yield* run("lease", `UPDATE ${table} SET holder = NULL, expires_at = '-infinity' WHERE id = 1 AND epoch = $1::bigint AND holder = $2`, [epoch.toString(), holder])
        if (locked) yield* run("lease", `SELECT pg_advisory_unlock(${LEASE_LOCK_KEY})`)
        locked = false
      }),
    fence: (epoch) => Effect.sync(() => setFence(epoch))
  }
}
