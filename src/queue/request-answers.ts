/**
 * The `RequestAnswers` service: a request's first 2xx answer kept under its `Idempotency-Key`
 * (the Svix-compatible POSTs, src/http/svix/once.ts), in the tenant's dedupe keys (`?u` version 2
 * and its `?e`, src/domain/dedupe.ts), so the dedupe sweep and TEN-5 erase remove it with the
 * hooks' keys. An answer is kept inside the Writer's commit section, and never for a tenant whose
 * erase has begun: erase's refusal is committed in that section too, so a kept answer is one
 * erase's dedupe step finds.
 */
import { Context, Effect, Layer } from "effect"
import * as Dedupe from "../domain/dedupe.js"
import { dedupeKey } from "../domain/keys.js"
import { Store, type StoreError } from "../store/store.js"
import { makeKeyedLocks } from "./tenant-locks.js"
import { Writer } from "./writer.js"

export interface RequestAnswersShape {
  /** The answer kept for (tenant, key), if it is still in force at `now`. */
  readonly get: (tenant: string, key: string, now: number) => Effect.Effect<Dedupe.Answer | undefined, StoreError>
  /** Keeps `answer` (synced); nothing for an erased tenant or a body over `ANSWER_MAX_BYTES`. */
  readonly keep: (tenant: string, key: string, answer: Dedupe.Answer) => Effect.Effect<void, StoreError>
  /**
   * Runs `effect` alone among the requests of (tenant, key): a second request with the key waits
   * for the first to end, then finds its kept answer. An entry lives while a request holds or
   * waits for it, so there are at most as many as requests in flight (`http.maxConnections`).
   */
  readonly exclusive: <A, E, R>(tenant: string, key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export class RequestAnswers extends Context.Service<RequestAnswers, RequestAnswersShape>()("ankusa/RequestAnswers") {}

export const make = Effect.gen(function* () {
  const store = yield* Store
  const writer = yield* Writer
  const locks = makeKeyedLocks<string>()
  const service: RequestAnswersShape = {
    get: (tenant, key, now) => Effect.map(store.get("index", dedupeKey(tenant, key)), (v) => Dedupe.liveAnswer(v, now)),
    keep: (tenant, key, answer) =>
      answer.body.length > Dedupe.ANSWER_MAX_BYTES
        ? Effect.void
        : writer.exclusive(
            Effect.suspend(() => (writer.erased(tenant) ? Effect.void : store.write(Dedupe.recordAnswer(tenant, key, answer), { sync: true })))
          ),
    exclusive: (tenant, key, effect) => locks(`${tenant}\0${key}`, effect)
  }
  return service
})

export const layer = Layer.effect(RequestAnswers, make)
