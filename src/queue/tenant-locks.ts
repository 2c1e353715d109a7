/** The per-tenant in-process lock behind `Queue.withTenant`. */
import { Effect, Semaphore } from "effect"

/** A keyed lock whose entries live only while someone holds or waits for them. */
export const makeTenantLocks = () => {
  const locks = new Map<number, { readonly sem: Semaphore.Semaphore; users: number }>()
  return <A, E, R>(ord: number, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      let lock = locks.get(ord)
      if (lock === undefined) {
        lock = { sem: Semaphore.makeUnsafe(1), users: 0 }
        locks.set(ord, lock)
      }
      const held = lock
      held.users++
      return held.sem.withPermits(1)(effect).pipe(
        Effect.ensuring(
          Effect.sync(() => {
            held.users--
            if (held.users === 0) locks.delete(ord)
          })
        )
      )
    })
}

export type WithTenant = ReturnType<typeof makeTenantLocks>
