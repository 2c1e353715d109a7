/**
 * The pipeline's wake (docs/architecture.md "The pipeline"): a coalescing
 * signal. The Writer signals it after each successful commit, the pipeline
 * after a full tick or freed inflight slots; the tick fiber waits on it
 * between periods. Signals while nobody waits collapse into one, so a busy
 * Writer costs the tick one extra pass, not one per commit.
 */
import { Context, Effect, Layer, Queue } from "effect"

export interface WakeShape {
  /** Never blocks; any number of signals before the next wait count as one. */
  readonly signal: Effect.Effect<void>
  /** Until the next signal, or at once if one came since the last wait (one waiter: the tick). */
  readonly await: Effect.Effect<void>
}

export class Wake extends Context.Service<Wake, WakeShape>()("ankusa/Wake") {}

export const make: Effect.Effect<WakeShape> = Effect.map(Queue.sliding<void>(1), (latch) => ({
  signal: Effect.asVoid(Queue.offer(latch, undefined)),
  await: Queue.take(latch)
}))

export const layer: Layer.Layer<Wake> = Layer.effect(Wake, make)
