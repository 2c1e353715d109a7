/** The per-tenant lock (src/queue/tenant-locks.ts): one holder a tenant, FIFO hand-off, interruption leaves no lock behind. */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { makeTenantLocks } from "../src/queue/tenant-locks.js"

describe("tenant locks", () => {
  it.live("one holder a tenant at a time, handed on in the order they came; another tenant does not wait", () =>
    Effect.gen(function* () {
      const withTenant = makeTenantLocks()
      const log: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const holder = (name: string, wait?: Deferred.Deferred<void>) =>
        withTenant(1, Effect.gen(function* () {
          log.push(`${name}+`)
          if (wait !== undefined) yield* Deferred.await(wait)
          yield* Effect.yieldNow
          log.push(`${name}-`)
        }))
      const a = yield* Effect.forkChild(holder("a", gate))
      yield* Effect.yieldNow
      const b = yield* Effect.forkChild(holder("b"))
      const c = yield* Effect.forkChild(holder("c"))
      yield* Effect.yieldNow
      // Tenant 2 runs while tenant 1's lock is held.
      yield* withTenant(2, Effect.sync(() => log.push("other")))
      expect(log).toEqual(["a+", "other"])
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(a)
      yield* Fiber.join(b)
      yield* Fiber.join(c)
      expect(log).toEqual(["a+", "other", "a-", "b+", "b-", "c+", "c-"])
    }))

  it.live("an interrupted waiter leaves the line, a failing holder releases, and the lock is free after", () =>
    Effect.gen(function* () {
      const withTenant = makeTenantLocks()
      const gate = yield* Deferred.make<void>()
      const ran: Array<string> = []
      const holder = yield* Effect.forkChild(withTenant(7, Deferred.await(gate)))
      yield* Effect.yieldNow
      const waiter = yield* Effect.forkChild(withTenant(7, Effect.sync(() => ran.push("interrupted one"))))
      yield* Effect.yieldNow
      yield* Fiber.interrupt(waiter)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      expect(ran).toEqual([])
      const failed = yield* withTenant(7, Effect.fail("no")).pipe(Effect.flip)
      expect(failed).toBe("no")
      // Free: taken at once.
      yield* withTenant(7, Effect.sync(() => ran.push("after")))
      expect(ran).toEqual(["after"])
    }))
})
