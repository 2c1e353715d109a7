/**
 * Which tenants' counters the writes that ended since a mark merged: how a
 * reader without snapshots (the live `store check`, src/queue/format/
 * check-service.ts) tells a difference it read between two halves of a
 * moving store from one that was there all along.
 *
 * TEN-1's invariant makes this nearly enough: every transition of a tenant's
 * counted rows (due, inflight, dead, archive obligations) merges that
 * tenant's counters in the same atomic batch, with a non-zero sum (no batch's
 * transitions of one tenant cancel: domain/deliveries.ts). The one
 * counter-neutral transition, `defer` (a due row moved to its open breaker's
 * probe time), deletes the row's old due key, so a deleted due key marks its
 * tenant too: a scan that passed the old key and then meets the new one counts
 * the row twice. So a tenant none of whose counter keys was merged, and none
 * of whose due keys was deleted, by a write that ended after the mark had the
 * same rows and counters throughout. Writes are tracked when they end (whether they applied or
 * failed), and `settled` waits for the writes already sent, so a write in
 * flight when a pass starts or ends is seen.
 *
 * Bounded: one generation per slot, `WRITE_MARK_SLOTS` slots, a tenant in
 * slot `ord % WRITE_MARK_SLOTS`; tenants sharing a slot look moved when
 * either moves (the safe side: their difference is left unconfirmed).
 */
import { Duration, Effect } from "effect"
import { counterKeyOrd, dueKeyOrd, P } from "../domain/keys.js"
import type { Batch, Merge, Op } from "../domain/ops.js"

/** Slots of the tenants' write generations (8 bytes each). */
export const WRITE_MARK_SLOTS = 65_536

/** `settled` gives up after this long (writes stuck behind a stalled disk): then everything counts as moved. */
export const WRITE_MARK_SETTLE_MS = 10_000

/** What a batch moves, from one pass over it (`summarize`): what `track` marks and observers get. */
export interface WriteSummary {
  /** The tenants whose counters it merges or whose due keys it deletes (an ordinal may repeat). */
  readonly ords: ReadonlyArray<number>
  /** It deletes a range of counters: every tenant may have moved. */
  readonly everyone: boolean
  /** Its merges into counters, in batch order. */
  readonly merges: ReadonlyArray<Merge>
}

/**
 * One pass over `batch`: its summary, or the first refusal `check` gives an op (the store's own
 * rules: an unknown family, a merge it cannot apply), so a store checks and summarizes a batch at once.
 */
export function summarize(batch: Batch): WriteSummary
export function summarize(batch: Batch, check: (op: Op) => string | undefined): WriteSummary | string
export function summarize(batch: Batch, check?: (op: Op) => string | undefined): WriteSummary | string {
  const ords: Array<number> = []
  const merges: Array<Merge> = []
  let everyone = false
  for (const op of batch) {
    if (check !== undefined) {
      const why = check(op)
      if (why !== undefined) return why
    }
    if (op.cf === "index") {
      // A due key's ord is its bytes 1 to 4 (keys.ts); a shorter key is none of this family's.
      if (op._tag === "del" && op.key[0] === P.due && op.key.length >= 5) ords.push(dueKeyOrd(op.key))
      continue
    }
    if (op.cf !== "counters") continue
    // A range of counters: every tenant may have moved.
    if (op._tag === "deleteRange") everyone = true
    else {
      ords.push(counterKeyOrd(op.key))
      if (op._tag === "merge") merges.push(op)
    }
  }
  return { ords, everyone, merges }
}

export interface WriteMarks {
  /** The generation now: pass it to `movedSince` later. */
  readonly mark: Effect.Effect<number>
  /** Waits until every write sent so far has ended; false if that took past `WRITE_MARK_SETTLE_MS`. */
  readonly settled: Effect.Effect<boolean>
  /** A write that ended after `mark` merged a counter of `ord` (or of a tenant sharing its slot). */
  readonly movedSince: (ord: number, mark: number) => boolean
  /**
   * Calls `observer` with the counter merges of every batch the store applied, as its write ends
   * and before its caller resumes (the in-memory queued bytes, src/queue/queued-bytes.ts). It must
   * not throw. Returns the function that removes it.
   */
  readonly onCommitted: (observer: (merges: ReadonlyArray<Merge>) => void) => () => void
}

export interface WriteMarksTracker extends WriteMarks {
  /** Run a write through the tracker: counted as sent now, its counter merges marked when it ends. */
  readonly track: <E>(batch: Batch, write: Effect.Effect<void, E>) => Effect.Effect<void, E>
  /** `track` of a batch already summarized (`summarize`). */
  readonly trackSummary: <E>(summary: WriteSummary, write: Effect.Effect<void, E>) => Effect.Effect<void, E>
}

export const makeWriteMarks = (): WriteMarksTracker => {
  const slots = new Float64Array(WRITE_MARK_SLOTS)
  let generation = 0
  // The last generation that moved every tenant (a range delete of counters).
  let everyone = 0
  let sent = 0
  // Tickets of the writes sent and not ended yet.
  const open = new Set<number>()
  const observers = new Set<(merges: ReadonlyArray<Merge>) => void>()
  const committed = (summary: WriteSummary) =>
    Effect.sync(() => {
      for (const f of observers) f(summary.merges)
    })
  const end = (ticket: number, summary: WriteSummary) => {
    open.delete(ticket)
    generation++
    for (const ord of summary.ords) slots[ord % WRITE_MARK_SLOTS] = generation
    if (summary.everyone) everyone = generation
  }
  const settled = Effect.suspend(() => {
    const target = sent
    const deadline = Date.now() + WRITE_MARK_SETTLE_MS
    // Open writes are few (the Writer's batches, the pipeline's commits): a scan of them is cheap.
    const done = () => {
      for (const t of open) if (t < target) return false
      return true
    }
    const wait: Effect.Effect<boolean> = Effect.suspend(() =>
      done() ? Effect.succeed(true) : Date.now() > deadline ? Effect.succeed(false) : Effect.andThen(Effect.sleep(Duration.millis(1)), wait)
    )
    return wait
  })
  const trackSummary = <E>(summary: WriteSummary, write: Effect.Effect<void, E>): Effect.Effect<void, E> =>
    Effect.suspend(() => {
      const ticket = sent++
      open.add(ticket)
      return Effect.ensuring(observers.size === 0 ? write : Effect.tap(write, () => committed(summary)), Effect.sync(() => end(ticket, summary)))
    })
  return {
    mark: Effect.sync(() => generation),
    settled,
    movedSince: (ord, mark) => everyone > mark || slots[ord % WRITE_MARK_SLOTS]! > mark,
    track: (batch, write) => trackSummary(summarize(batch), write),
    trackSummary,
    onCommitted: (observer) => {
      observers.add(observer)
      return () => void observers.delete(observer)
    }
  }
}
