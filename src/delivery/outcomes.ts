/**
 * The pipeline's outcome committer (docs/delivery.md "Outcomes", "Limits"):
 * settled deliveries queue up and one fiber commits them in unsynced batches
 * of up to `commitBatch`, counts them per (sink, outcome), frees their
 * inflight slots and wakes the tick once enough are free.
 */
import { Duration, Effect, Fiber, Queue as Q, Schedule } from "effect"
import * as M from "../observability/delivery-metrics.js"
import { Spans } from "../observability/span-names.js"
import { nowNanos } from "../observability/trace-span.js"
import { batchSpan, tracingOf } from "../observability/tracing.js"
import type { TraceContext } from "../domain/trace-context.js"
import { COMMIT_LINGER_MS, COMMIT_RETRY_MS, type PipelineOptions, type PipelineState, WAKE_FREE_FRACTION } from "./options.js"
import type { Outcome, QueueShape } from "../queue/queue.js"
import type { Fair } from "./fair.js"
import type { HandOff } from "./handoff.js"
import { type KeptPlace, releaseKept } from "./sink-places.js"

export interface Settled {
  /** What becomes of the row (the queue writes its transition). */
  readonly result: Outcome
  /** The claimed row's size, as the claim counted it in `inflightBytes`. */
  readonly bytes: number
  readonly sink: string
  readonly outcome: M.Outcome
  /** Tracing on: the context of the attempt's span, which the commit's span links to. */
  readonly trace?: TraceContext | undefined
  /** A delivered ordered row's sink place, kept for its lane's next head until this commit ends (handoff.ts). */
  readonly place?: KeptPlace | undefined
}

export interface Outcomes {
  /** Queue an outcome for the next commit; never refused (unbounded, bounded by `maxInflight`). */
  readonly settle: (s: Settled) => void
  /** Shutdown, once no call can settle any more: stop the committer and commit every outcome queued. */
  readonly flush: Effect.Effect<void>
}

/** Up to `n` queued items without waiting: none when the queue is empty (a take of at least one would wait). */
const takeQueued = <A>(queue: Q.Queue<A>, n: number): Effect.Effect<Array<A>> =>
  Effect.suspend(() => (n <= 0 || Q.sizeUnsafe(queue) === 0 ? Effect.succeed([]) : Q.takeBetween(queue, 1, n)))

/** Starts the committer fiber in the layer's scope; `wake` asks the tick to claim the freed slots. */
export const makeOutcomes = (
  o: PipelineOptions,
  queue: QueueShape,
  state: PipelineState,
  fair: Fair,
  wake: Effect.Effect<void>,
  handOff: { readonly current?: HandOff | undefined } = {}
) =>
  Effect.gen(function* () {
    // Where the counters write (the metric registry of this layer's context).
    const context = yield* Effect.context<never>()
    const outcomes = yield* Q.unbounded<Settled>()

    // Counter updaters, built once per (sink, outcome) instead of per batch. Bounded: only the
    // configured sinks (and "unknown") are cached, times four outcomes; other names are built per use.
    const configured = new Set(o.sinks.map((s) => s.name))
    const cached = new Map<string, (n: number) => void>()
    const counter = (sink: string, outcome: M.Outcome) => {
      if (!configured.has(sink) && sink !== "unknown") return M.outcomeRecorder(sink, outcome, context)
      const k = `${outcome}\u0000${sink}`
      let m = cached.get(k)
      if (m === undefined) cached.set(k, m = M.outcomeRecorder(sink, outcome, context))
      return m
    }

    const count = (items: ReadonlyArray<Settled>): void => {
      // One increment per (sink, outcome) of the batch, not per row.
      const counts = new Map<string, { readonly sink: string; readonly outcome: M.Outcome; n: number }>()
      for (const i of items) {
        const k = `${i.outcome}\u0000${i.sink}`
        const g = counts.get(k)
        if (g === undefined) counts.set(k, { sink: i.sink, outcome: i.outcome, n: 1 })
        else g.n += 1
      }
      for (const g of counts.values()) counter(g.sink, g.outcome)(g.n)
    }

    const tracing = yield* tracingOf
    /** The commit's write as the batch's span (tracing on), linked to the attempts it settles. */
    const settle = (items: ReadonlyArray<Settled>) => {
      const places: Array<KeptPlace> = []
      for (const i of items) if (i.place !== undefined) places.push(i.place)
      const written = Effect.suspend(() => {
        const results = items.map((i) => i.result)
        // A head settling may hand its lane's next one straight to its sink (handoff.ts); each attempt asks anew.
        const h = handOff.current
        if (h === undefined || !results.some((r) => r.lane !== undefined && r._tag !== "Retry")) return queue.settle(results)
        const attempt = h(results.map((r) => r.ref.ord), places)
        return queue.settle(results, attempt.take).pipe(Effect.onExit((exit) => attempt.done(exit._tag === "Success")))
      })
      if (tracing === undefined) return written
      const span = batchSpan(tracing, Spans.outcome, items.map((i) => i.trace))
      if (span === undefined) return written
      return Effect.onExit(written, (exit) => Effect.sync(() => span.end(nowNanos(), exit)))
    }

    const commit = (items: ReadonlyArray<Settled>): Effect.Effect<void> =>
      settle(items).pipe(
        Effect.tapError((e) => Effect.logError("pipeline: outcome commit failed; retrying", e.message)),
        Effect.retry({ while: () => !state.stopping, schedule: Schedule.spaced(Duration.millis(COMMIT_RETRY_MS)) }),
        Effect.matchEffect({
          onFailure: (e) => Effect.logError("pipeline: outcomes left inflight for boot recovery", { rows: items.length, error: e.message }),
          onSuccess: () => Effect.sync(() => count(items))
        }),
        Effect.ensuring(Effect.suspend(() => {
          // The kept places no hand-off took go back to their sinks.
          for (const i of items) if (i.place !== undefined) releaseKept(i.place)
          state.inflight -= items.length
          for (const i of items) state.inflightBytes -= i.bytes
          for (const i of items) fair.released(i.result.ref.ord, 1)
          // Slots freed: claim again without waiting out the tick period (docs/delivery.md "Dispatch tick").
          const free = Math.min(o.maxInflight - state.inflight, state.room())
          const wakeAt = Math.max(1, Math.floor(Math.min(o.maxInflight, state.capacity()) * WAKE_FREE_FRACTION))
          return free >= wakeAt ? wake : Effect.void
        }))
      )

    // A batch once taken is committed; only the wait for the first outcome is interruptible. A batch
    // short of `commitBatch` waits COMMIT_LINGER_MS for the outcomes of calls ending meanwhile: one
    // write (and one message to the commit thread) per few outcomes rather than per one or two; but
    // not when every claimed row's outcome is in it already.
    const commitStep = Effect.uninterruptibleMask((restore) =>
      restore(Q.take(outcomes)).pipe(
        Effect.flatMap((first) =>
          Q.size(outcomes).pipe(
            // No linger when no other claimed row is left to settle (nothing could join the batch): a lone key's next hook waits for this commit.
            Effect.flatMap((n) => (n + 1 < o.commitBatch && state.inflight > n + 1 ? Effect.sleep(Duration.millis(COMMIT_LINGER_MS)) : Effect.void)),
            Effect.andThen(takeQueued(outcomes, o.commitBatch - 1)),
            Effect.flatMap((rest) => commit([first, ...rest]))
          )
        )
      )
    )

    const committer = yield* Effect.forkScoped(Effect.forever(commitStep))

    return {
      settle: (s) => {
        Q.offerUnsafe(outcomes, s)
      },
      flush: Effect.gen(function* () {
        yield* Fiber.interrupt(committer)
        const rest = yield* Q.clear(outcomes)
        for (let i = 0; i < rest.length; i += o.commitBatch) yield* commit(rest.slice(i, i + o.commitBatch))
      })
    } satisfies Outcomes
  })
