/**
 * The per-tenant in-process lock behind `Queue.withTenant`: a mutex per tenant ordinal (or any
 * key, `makeKeyedLocks`) whose entry lives only while someone holds or waits for it. An uncontended acquire takes it at once, with no
 * semaphore and no fiber suspended (the claim takes one per tenant it visits); a contended one
 * waits in FIFO order and is handed the lock by the release. A waiter interrupted leaves the line,
 * or, handed the lock as it was interrupted, passes it on.
 */
import { Effect } from "effect"

interface Waiter {
  handed: boolean
  resume: () => void
}

export const makeKeyedLocks = <K>() => {
  // A key present is a lock held; its value, the line of waiters.
  const locks = new Map<K, Array<Waiter>>()

  const release = (ord: K) => {
    const line = locks.get(ord)
    if (line === undefined) return
    const next = line.shift()
    if (next === undefined) return void locks.delete(ord)
    // Handed over: the lock stays held, by the next waiter.
    next.handed = true
    next.resume()
  }

  /** Waits in `line` for the lock; handed it, the caller holds it. */
  const wait = (ord: K, line: Array<Waiter>): Effect.Effect<void> => {
    const w: Waiter = { handed: false, resume: () => {} }
    return Effect.callback<void>((resume) => {
      w.resume = () => resume(Effect.void)
      line.push(w)
      return Effect.sync(() => {
        const i = line.indexOf(w)
        if (i >= 0) line.splice(i, 1)
      })
    }).pipe(Effect.onInterrupt(() => Effect.sync(() => w.handed && release(ord))))
  }

  return <A, E, R>(ord: K, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        const line = locks.get(ord)
        if (line === undefined) {
          locks.set(ord, [])
          return Effect.ensuring(restore(effect), Effect.sync(() => release(ord)))
        }
        return Effect.flatMap(restore(wait(ord, line)), () => Effect.ensuring(restore(effect), Effect.sync(() => release(ord))))
      })
    )
}

export const makeTenantLocks = () => makeKeyedLocks<number>()

export type WithTenant = ReturnType<typeof makeTenantLocks>
