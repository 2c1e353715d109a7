/**
 * Helpers for the ordered-delivery tests on the memory store: hooks with an ordering key ingested
 * as the Writer does it (their ordered destinations' rows wait in their lanes, `Deliveries.ingest`
 * with `lanes`, then `Queue.promote`), bodies `{k, n}` for test/support/ordered-sink.ts.
 */
import { Effect } from "effect"
import * as Deliveries from "../src/domain/deliveries.js"
import { encodeEnvelope, type Envelope } from "../src/domain/envelope.js"
import type * as K from "../src/domain/keys.js"
import type { Op } from "../src/domain/ops.js"
import * as Ordering from "../src/domain/ordering.js"
import { DEFAULT_BREAKER } from "../src/delivery/breaker.js"
import { makeOrdinals, type World } from "./pipeline-world.js"

export interface OrderedHook {
  readonly tenant: string
  /** The ordering key; none: the hook is never held back. */
  readonly k: string | undefined
  /** Its number within the key (the body says it). */
  readonly n: number
  readonly sinks: ReadonlyArray<string>
}

export interface Accepted extends OrderedHook {
  readonly seq: number
  readonly ord: number
}

/** A breaker that never opens in a test's run: failures of one key must not hold the others back through it. */
export const noBreaker = { ...DEFAULT_BREAKER, minCalls: 1_000_000 }

/** Seqs and ordinals as the Writer assigns them; `ordered`: the destinations that order. */
export const makeOrderedIngest = (w: World, ordered: ReadonlySet<string>) => {
  const ordinalOf = makeOrdinals()
  let nextSeq = 1
  return (hooks: ReadonlyArray<OrderedHook>) =>
    Effect.gen(function* () {
      const alloc: Array<Op> = []
      const out: Array<Accepted> = []
      const ts: Array<Deliveries.Transition> = []
      const lanes: Array<K.LaneRef> = []
      const now = Date.now()
      for (const h of hooks) {
        const ord = ordinalOf(h.tenant, alloc)
        const seq = nextSeq++
        const envelope: Envelope = {
          id: `msg_${seq}`,
          tenantId: h.tenant,
          sourceId: "src",
          receivedAt: now,
          contentType: "application/json",
          headers: {},
          sinks: h.sinks,
          idempotencyKey: null,
          ...(h.k === undefined ? {} : { orderingKey: h.k }),
          body: Buffer.from(JSON.stringify({ k: h.k ?? "-", n: h.n }))
        }
        const hookLanes = h.sinks.map((s) => (h.k !== undefined && ordered.has(s) ? Ordering.laneOf(s, h.k) : undefined))
        for (const l of hookLanes) if (l !== undefined) lanes.push({ ord, lane: l })
        ts.push(Deliveries.ingest({ seq, ord, envelope: encodeEnvelope(envelope), sinkCount: h.sinks.length, at: now, lanes: hookLanes, archive: false }))
        out.push({ ...h, seq, ord })
      }
      yield* w.store.write(Deliveries.batch(ts, alloc), { sync: true })
      yield* w.queue.promote(lanes, now)
      return out
    })
}

/** Hooks 1..count of key `k` of `tenant`, for `sinks`. */
export const keyed = (tenant: string, k: string, count: number, sinks: ReadonlyArray<string>): Array<OrderedHook> =>
  Array.from({ length: count }, (_, i) => ({ tenant, k, n: i + 1, sinks }))

/** The numbers 1..n. */
export const upTo = (n: number): Array<number> => Array.from({ length: n }, (_, i) => i + 1)
