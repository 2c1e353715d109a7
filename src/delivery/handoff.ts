/**
 * The hand-off (docs/delivery.md "The hand-off"): an outcome commit that settles a lane's head
 * offers the pipeline the lane's next head, and the pipeline takes it when its tenant's delivered
 * row kept a place on the same destination: the row is then claimed in the settle's own batch
 * (`?W` → `?F`, no due row, no marker, no tick) and handed to its sink once the batch is written,
 * on the place it was passed. A row not taken is promoted due, and the round claims it as any.
 *
 * So a hand-off never takes a place nor a slot its tenant did not hold: while a tenant is parked on
 * its sink, the place passes only within its tenant's share and a few times in a row (sink-places.ts
 * `passable`: else the round decides who gets it), and the row takes the inflight slot of a row of
 * its tenant settling in the same batch, within the tenant's limits (fair.ts `handOff`) and
 * `maxInflightBytes`.
 */
import { Clock, Effect } from "effect"
import type { Envelope } from "../domain/envelope.js"
import type { QueueShape, TakeHeads } from "../queue/queue.js"
import type { Claimed, SinkCalls } from "./calls.js"
import type { Fair } from "./fair.js"
import type { PipelineOptions, PipelineState } from "./options.js"
import { hold, type KeptPlace, passable } from "./sink-places.js"
import type { LimitsOf } from "./tick.js"

interface Taken {
  readonly c: Claimed
  readonly env: Envelope
  readonly place: KeptPlace
}

/** One commit attempt's hand-off: `take` for the settle, then `done` with whether its write succeeded. */
export interface HandOffAttempt {
  readonly take: TakeHeads
  readonly done: (written: boolean) => Effect.Effect<void>
}

/**
 * `settling`: the tenant of each row the commit settles (each frees one inflight slot a hand-off may
 * reuse); `kept`: the places its delivered rows on ordered destinations kept (each passed to one
 * head of their tenant for their destination).
 */
export type HandOff = (settling: ReadonlyArray<number>, kept: ReadonlyArray<KeptPlace>) => HandOffAttempt

export const makeHandOff = (
  o: PipelineOptions,
  queue: QueueShape,
  state: PipelineState,
  fair: Fair,
  calls: SinkCalls,
  limitsOf: LimitsOf
): HandOff => (settling, kept) => {
  const freed = new Map<number, number>()
  for (const ord of settling) freed.set(ord, (freed.get(ord) ?? 0) + 1)
  let taken: Array<Taken> = []

  const take: TakeHeads = (heads) =>
    Effect.gen(function* () {
      // Only heads whose tenant kept a place that may pass: no other head costs a read.
      const now = yield* Clock.currentTimeMillis
      const offered = state.stopping ? [] : heads.filter((h) => kept.some((k) => k.ord === h.row.ord && passable(k, now)))
      if (offered.length === 0) return heads.map(() => false)
      const envs = yield* queue.envelopes([...new Set(offered.map((h) => h.row.seq))])
      const ords = [...new Set(offered.map((h) => h.row.ord))]
      const read = yield* limitsOf(ords)
      const limits = new Map(ords.map((ord, i) => [ord, read[i]!]))
      return heads.map((h) => {
        const { ord, seq, sink } = h.row
        const env = envs.get(seq)
        const name = env?.sinks[sink]
        const free = freed.get(ord) ?? 0
        if (state.stopping || env === undefined || name === undefined || free <= 0) return false
        if (state.inflightBytes + h.size > o.maxInflightBytes) return false
        const place = kept.find((k) => k.ord === ord && k.sink.options.name === name && passable(k, now))
        if (place === undefined || !fair.handOff(ord, free, now, limits.get(ord)!)) return false
        place.passed = true
        freed.set(ord, free - 1)
        state.inflight += 1
        state.inflightBytes += h.size
        taken.push({ c: { entry: { ref: { ord, at: now, seq, sink }, value: { size: h.size, kind: 0 } }, ref: { ord, seq, sink }, runs: place.runs + 1 }, env, place })
        return true
      })
    })

  /** Written: each row to its sink; not: each place, slot and count given back (the retry asks again). */
  const done = (written: boolean): Effect.Effect<void> =>
    Effect.suspend(() => {
      const rows = taken
      taken = []
      const uncount = (t: Taken) => {
        fair.released(t.c.ref.ord, 1)
        state.inflight -= 1
        state.inflightBytes -= t.c.entry.value.size
      }
      if (!written) {
        for (const t of rows) {
          t.place.passed = false
          freed.set(t.c.ref.ord, (freed.get(t.c.ref.ord) ?? 0) + 1)
          uncount(t)
        }
        return Effect.void
      }
      return Effect.forEach(rows, (t) => {
        if (!t.place.sink.retired) return calls.route(t.c, t.env) ?? Effect.void
        // A reload replaced its sink since: the place goes back, the row back to due (as a claim's row given back).
        hold(t.place.sink.places, t.c.ref.ord, -1)
        uncount(t)
        return queue.unclaim([t.c.entry]).pipe(Effect.catchCause(() => Effect.logError("pipeline: handed-off row not given back; left inflight for boot recovery")))
      }, { discard: true })
    })

  return { take, done }
}
