/**
 * A lifecycle job on a schedule: the service's job run every `every` as a scoped fiber, so
 * shutdown interrupts it; a failed run is logged (`<what> failed`) and the next one runs on time.
 */
import { type Context, type Duration, Effect, Layer, Schedule } from "effect"

export const scheduled = <I, S, R>(
  service: Context.Key<I, S>,
  what: string,
  every: Duration.Input,
  job: (service: S) => Effect.Effect<unknown, unknown, R>
): Layer.Layer<never, never, I | R> =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const s = yield* service
      yield* job(s).pipe(
        Effect.catchCause((cause) => Effect.logWarning(`${what} failed`, cause)),
        Effect.repeat(Schedule.spaced(every)),
        Effect.forkScoped
      )
    })
  )
