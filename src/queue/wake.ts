/**
 * The pipeline's wake (docs/architecture.md "The pipeline"): a coalescing
 * signal, and the tenants that got due rows since the last tick. The Writer
 * signals it after each commit with the tenants it wrote hooks for, the
 * pipeline after a full tick or freed inflight slots; the tick fiber waits on
 * it between periods and takes the tenants. Signals while nobody waits
 * collapse into one, so a busy Writer costs the tick one extra pass, not one
 * per commit.
 */
import { Context, Effect, Layer, Queue } from "effect"

/** Tenants a wake holds for the next tick at most; past it the tick finds the rest through the markers. */
export const WAKE_HINTS_MAX = 65_536

export interface WakeShape {
  /** Never blocks; any number of signals before the next wait count as one. */
  readonly signal: Effect.Effect<void>
  /**
   * `signal`, naming tenants that have rows due now (the tick serves them without waiting for the
   * marker scan), and the `at` of those rows when the caller knows it: the tick lowers a tenant's
   * scan cursor to it, so a row committed below the cursor is read by the next visit.
   */
  readonly hint: (ords: Iterable<number>, at?: number) => Effect.Effect<void>
  /** Until the next signal, or at once if one came since the last wait (one waiter: the tick). */
  readonly await: Effect.Effect<void>
  /** The tenants hinted since the last take, in hint order, each with the lowest `at` hinted (0 when unknown). */
  readonly takeHints: () => ReadonlyArray<Hint>
  /**
   * The due time of a new row by its destination at `now`, or undefined when no destination is
   * held (the rows are due at once): the pipeline's breakers hold an open destination's rows until
   * its probe (docs/delivery.md "Failing destinations"), and the Writer writes them due then.
   */
  readonly held: (now: number) => Held | undefined
  /** The pipeline's holds (one pipeline a node; a later call replaces an earlier one, undefined ends them). */
  readonly holdBy: (holds: Holds | undefined) => void
}

/** A destination's rows are due at the time it answers; undefined: at once. */
export type Held = (destination: string) => number | undefined

export interface Holds {
  /** No destination is held at or after this time (ms). */
  readonly through: () => number
  /** The destination's due time for a row written at `now`, or undefined: at once. */
  readonly until: (destination: string, now: number) => number | undefined
}

export interface Hint {
  readonly ord: number
  readonly at: number
}

export class Wake extends Context.Service<Wake, WakeShape>()("ankusa/Wake") {}

export const make: Effect.Effect<WakeShape> = Effect.map(Queue.sliding<void>(1), (latch) => {
  let hints = new Map<number, number>()
  let holds: Holds | undefined
  const signal = Effect.asVoid(Queue.offer(latch, undefined))
  return {
    signal,
    hint: (ords, at = 0) =>
      Effect.suspend(() => {
        for (const o of ords) {
          const seen = hints.get(o)
          if (seen !== undefined) {
            if (at < seen) hints.set(o, at)
          } else if (hints.size < WAKE_HINTS_MAX) hints.set(o, at)
        }
        return signal
      }),
    await: Queue.take(latch),
    takeHints: () => {
      if (hints.size === 0) return []
      const out: Array<Hint> = []
      for (const [ord, at] of hints) out.push({ ord, at })
      hints = new Map()
      return out
    },
    held: (now) => {
      const h = holds
      return h !== undefined && now < h.through() ? (destination) => h.until(destination, now) : undefined
    },
    holdBy: (h) => {
      holds = h
    }
  }
})

export const layer: Layer.Layer<Wake> = Layer.effect(Wake, make)
