/**
 * A batch's commit on PostgreSQL, its outcome always known before the caller hears of it. A
 * connection lost or a timeout while a statement was out leaves its outcome unknown: the server
 * may have committed it and the answer been lost (a primary killed after its standby's flush, a
 * socket reset). A caller that took that for a failure would send its transitions again, and the
 * counter merges (additive upserts) would count twice. So each batch inserts a token of its own
 * into `applied` (postgres-schema.ts) in its statement, and an unknown outcome is settled by
 * inserting the same token alone, marked poisoned (`poison`): it goes in only if the batch did not
 * commit, and then the batch never can (it would fail on the key); if the batch did, its row stays
 * unmarked and says so.
 *
 * Settled within RESOLVE_MS: applied answers as a success, absent as the first error (a retry is
 * safe). Not settled by then (the database still unreachable): the store keeps the token and
 * refuses every write until it settles it; found applied then, the caller was told of a failure
 * for a batch that committed, and the process exits (exit 70) so that a restart rebuilds its state
 * from the store (docs/storage.md "PostgreSQL").
 *
 * An unsynced commit is acknowledged before the server flushes it, so a crash of the server, or a
 * failover to a standby that had not received it, can lose it while this process lives on with
 * state that assumed it (a claim lost, then its outcome's counter deltas applied: the counters no
 * longer a fold of the rows). So each commit confirms, in its own statement, the tokens of every
 * unsynced commit acknowledged and not yet confirmed by a commit that succeeded (`confirm`,
 * postgres-schema.ts): a commit that sees them is in no history without them, and a synced one
 * makes them durable. Commits in flight together all carry them, so none that depends on a lost
 * one can apply. One that finds one missing fails whole, and the process exits (exit 70) to
 * rebuild from the store.
 * Tokens left unconfirmed for CONFIRM_MS (nothing else committed) are confirmed by a synced commit
 * of a token alone, so none is older than the prune's APPLIED_KEEP_MS while the database answers.
 */
import { randomBytes } from "node:crypto"
import { Duration, Effect, Schedule } from "effect"
import type { Batch } from "../domain/ops.js"
import { batchStatement } from "./postgres-batch.js"
import { errorKind } from "./postgres-health.js"
import { appliedTableOf, LOST_SQLSTATE } from "./postgres-schema.js"
import { StoreError } from "./store.js"

/** How long a commit whose outcome is unknown is settled for before the store refuses writes. */
export const RESOLVE_MS = 5_000
export const RESOLVE_POLL_MS = 100
/** Tokens older than this are deleted: far longer than any settling takes. */
export const APPLIED_KEEP_MS = 10 * 60_000
export const APPLIED_PRUNE_MS = 60_000
/**
 * The exit code of a process whose state and the store's disagree: told of a failure for a batch
 * that committed, or told of a commit the database then lost.
 */
export const EXIT_STORE_DIVERGED = 70
/** Unsynced commits acknowledged and unconfirmed this long, with nothing else sent, are confirmed by a synced commit. */
export const CONFIRM_MS = 1_000

/** A batch that PostgreSQL aborted as a deadlock victim is sent again at most this many times. */
export const POSTGRES_DEADLOCK_RETRIES = 3

const codeOf = (e: unknown): string => {
  const code = (e as { reason?: { cause?: { code?: unknown } } } | undefined)?.reason?.cause?.code
  return typeof code === "string" ? code : ""
}

const isDeadlock = (e: unknown) => errorKind(e) === "deadlock"

const messageOf = (e: unknown): string => {
  const cause = (e as { reason?: { cause?: { message?: unknown } } } | undefined)?.reason?.cause?.message
  return `${typeof cause === "string" ? cause : ""} ${String((e as { message?: unknown } | undefined)?.message ?? "")} ${codeOf(e)}`
}

/** A connection that was never made: no statement left, nothing in doubt. */
const NOT_SENT = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|Connection timed out|connect ETIMEDOUT/

/** Whether the statement may have reached the server: only then is its outcome in doubt. */
const inDoubt = (e: unknown) => {
  const kind = errorKind(e)
  return (kind === "connection" || kind === "timeout") && !NOT_SENT.test(messageOf(e))
}

export interface CommitDeps {
  readonly schema: string
  /** One statement on the pool, timed; the client's error as it is. */
  readonly run: (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<unknown, unknown>
  /** The same, its rows as arrays of values. */
  readonly query: (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>, unknown>
  readonly fail: (op: string) => (e: unknown) => StoreError
  readonly committed: () => void
  readonly fence: () => bigint | undefined
}

export const makeCommits = (deps: CommitDeps) => {
  // A random half and a counter: unique across the processes that share a store.
  const prefix = BigInt(randomBytes(4).readUInt32BE(0) >>> 1) << 32n
  let next = 0
  const token = () => prefix | BigInt((next = (next + 1) >>> 0))
  const doubts: Array<bigint> = []
  /**
   * The tokens of unsynced commits acknowledged and not yet confirmed by a commit that succeeded:
   * every commit sent carries them all (one in flight with another may fail).
   */
  const unconfirmed = new Set<bigint>()
  /** Whether a commit was sent since the confirmer's last look. */
  let sent = false
  const applied = appliedTableOf(deps.schema)

  const diverged = (why: string): Effect.Effect<never> =>
    Effect.logError(`store: ${why}; exiting so that a restart rebuilds from the store`).pipe(
      Effect.andThen(Effect.sync(() => process.exit(EXIT_STORE_DIVERGED))),
      Effect.andThen(Effect.never)
    )

  /**
   * `absent` (the batch did not commit, and now never can), `applied`, or `unknown`. The token goes
   * in marked poisoned unless the batch's is there (its row lock waits for a batch still in
   * flight); the row's mark says which came first. Idempotent: a poison whose own answer is lost
   * reads its own mark the next time.
   */
  const poison = (t: bigint) =>
    deps
      .query(
        `INSERT INTO ${applied} (token, poisoned) VALUES ($1::bigint, true) ON CONFLICT (token) DO UPDATE SET poisoned = ${applied}.poisoned RETURNING poisoned`,
        [t.toString()]
      )
      .pipe(
        Effect.map((rows) => (rows[0]?.[0] === true ? ("absent" as const) : rows[0]?.[0] === false ? ("applied" as const) : ("unknown" as const))),
        Effect.catch(() => Effect.succeed("unknown" as const))
      )

  const settle = (t: bigint, deadline: number): Effect.Effect<"absent" | "applied" | "unknown"> =>
    Effect.flatMap(poison(t), (r) =>
      r !== "unknown" || Date.now() >= deadline ? Effect.succeed(r) : Effect.andThen(Effect.sleep(Duration.millis(RESOLVE_POLL_MS)), settle(t, deadline))
    )

  /** The tokens left in doubt, settled before any new batch: a write waits behind them. */
  const clearDoubts: Effect.Effect<void, StoreError> = Effect.suspend(() => {
    if (doubts.length === 0) return Effect.void
    return Effect.flatMap(poison(doubts[0]!), (r) => {
      if (r === "absent") {
        doubts.shift()
        return clearDoubts
      }
      if (r === "unknown") return Effect.fail(new StoreError({ op: "write", message: "a commit's outcome is still unknown: the database is unreachable" }))
      return diverged("a batch reported as failed was committed")
    })
  })

  /** Commits `batch` (an empty one commits its token alone), confirming the unsynced commits acknowledged before it. */
  const send = (batch: Batch, sync: boolean): Effect.Effect<void, StoreError> =>
    Effect.andThen(
      clearDoubts,
      Effect.suspend(() => {
        const t = token()
        const confirming = [...unconfirmed]
        const stmt = batchStatement(deps.schema, batch, sync, deps.fence(), t, confirming)
        if (stmt === undefined) return Effect.void
        sent = true
        const done = Effect.sync(() => {
          deps.committed()
          // Committed after seeing them: in no history without them (and a synced commit made them durable).
          for (const c of confirming) unconfirmed.delete(c)
          // An unsynced one is the next commits' to confirm.
          if (!sync) unconfirmed.add(t)
        })
        // Not committed: the tokens it was to confirm are still the next commits'.
        const undone = (e: unknown) => Effect.fail(deps.fail("write")(e))
        const attempt = (left: number): Effect.Effect<void, StoreError> =>
          deps.run(stmt.sql, stmt.params).pipe(
            Effect.andThen(done),
            Effect.catch((e) => {
              if (codeOf(e) === LOST_SQLSTATE) return diverged(`the database lost commits it had acknowledged (${messageOf(e).trim()})`)
              if (left > 0 && isDeadlock(e)) return attempt(left - 1)
              if (!inDoubt(e)) return undone(e)
              return Effect.flatMap(settle(t, Date.now() + RESOLVE_MS), (r) => {
                // Seen by the settling's own synced write: as durable as that write.
                if (r === "applied") return done
                if (r === "unknown") doubts.push(t)
                return undone(e)
              })
            })
          )
        return attempt(POSTGRES_DEADLOCK_RETRIES)
      })
    )

  const commit = (batch: Batch, sync: boolean): Effect.Effect<void, StoreError> => (batch.length === 0 ? Effect.void : send(batch, sync))

  /** Every CONFIRM_MS: tokens unconfirmed with nothing sent since the last look get a synced commit of their own (errors ignored: the next look tries again). */
  const confirmer = Effect.suspend(() => {
    const idle = !sent && unconfirmed.size > 0
    sent = false
    return idle ? Effect.ignore(send([], true)) : Effect.void
  }).pipe(Effect.repeat(Schedule.spaced(Duration.millis(CONFIRM_MS))), Effect.asVoid)

  /** Deletes the tokens older than APPLIED_KEEP_MS, every APPLIED_PRUNE_MS (errors ignored: the next run tries again). */
  const prune = deps
    .run(`DELETE FROM ${applied} WHERE at < now() - make_interval(secs => $1::double precision)`, [APPLIED_KEEP_MS / 1000])
    .pipe(Effect.ignore, Effect.repeat(Schedule.spaced(Duration.millis(APPLIED_PRUNE_MS))), Effect.asVoid)

  return { commit, prune, confirmer }
}
