import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Metric } from "effect"
import { TestClock } from "effect/testing"
import * as Dedupe from "../src/domain/dedupe.js"
import * as K from "../src/domain/keys.js"
import * as Sweep from "../src/lifecycle/dedupe-sweep.js"
import { dedupeSwept } from "../src/observability/lifecycle-metrics.js"
import { Store } from "../src/store/store.js"
import { layerMemory } from "../src/store/memory.js"
import * as Wake from "../src/queue/wake.js"
import { type IngestRequest, layer as writerLayer, Writer } from "../src/queue/writer.js"
import * as Answers from "../src/queue/request-answers.js"
import { aggregate, rowsOf } from "./lifecycle-helpers.js"

const WINDOW = 60_000

const req = (tenantId: string, idempotencyKey: string | null, body = "{}"): IngestRequest => ({
  tenantId,
  sourceId: "src",
  sinks: ["s0", "s1"],
  body: Buffer.from(body),
  contentType: "application/json",
  headers: {},
  idempotencyKey,
  archive: false
})

const env = Layer.mergeAll(writerLayer({ dedupeWindowMs: WINDOW }).pipe(Layer.provide(Wake.layer)), Sweep.layer({ chunk: 2 })).pipe(Layer.provideMerge(layerMemory()))
const withAnswers = Answers.layer.pipe(Layer.provideMerge(env))

const keysOf = Effect.gen(function* () {
  const store = yield* Store
  const u = (yield* rowsOf(store, K.Families.dedupe)).map((e) => K.decodeDedupeKey(e.key))
  const e = (yield* rowsOf(store, K.Families.expiry)).map((e) => K.decodeExpiryKey(e.key))
  return { u, e }
})

describe("dedupe", () => {
  it.effect("a duplicate idempotency key inside the window queues nothing", () =>
    Effect.gen(function* () {
      const writer = yield* Writer
      const store = yield* Store
      const first = yield* writer.submit(req("acme", "order-1", '{"n":1}'))
      expect(first.duplicate).toBe(false)
      const before = yield* aggregate(store)
      const hooks = (yield* rowsOf(store, K.Families.hooks)).length
      const due = (yield* rowsOf(store, K.Families.due)).length

      // Inside the window (up to its last millisecond): the first answer, nothing queued.
      for (const wait of [1_000, WINDOW - 1_000 - 1]) {
        yield* TestClock.adjust(wait)
        const again = yield* writer.submit(req("acme", "order-1", '{"n":2}'))
        expect(again).toEqual({ id: first.id, seq: first.seq, duplicate: true })
      }
      expect(yield* aggregate(store)).toEqual(before)
      expect((yield* rowsOf(store, K.Families.hooks)).length).toBe(hooks)
      expect((yield* rowsOf(store, K.Families.due)).length).toBe(due)

      // The key is per tenant: another tenant's same key queues.
      const other = yield* writer.submit(req("globex", "order-1"))
      expect(other.duplicate).toBe(false)
      expect((yield* aggregate(store)).pending).toBe(before.pending + 2)
    }).pipe(Effect.provide(env))
  )

  it.effect("an expired dedupe key is swept", () =>
    Effect.gen(function* () {
      const writer = yield* Writer
      const sweep = yield* Sweep.DedupeSweep
      const store = yield* Store
      const sweptBefore = (yield* Metric.value(dedupeSwept)).count

      // Five keys at t=0 and one at t=30s.
      for (let i = 0; i < 5; i++) yield* writer.submit(req("acme", `k${i}`))
      yield* TestClock.adjust(30_000)
      yield* writer.submit(req("acme", "late"))
      expect((yield* keysOf).u.length).toBe(6)

      // Nothing is swept before its expiry.
      expect((yield* sweep.sweep).keys).toBe(0)
      expect((yield* keysOf).u.length).toBe(6)

      // Past the first five's expiry: k0 is reused (a new hook, a new ?u and ?e), then the sweep runs.
      yield* TestClock.adjust(WINDOW - 30_000)
      const reused = yield* writer.submit(req("acme", "k0"))
      expect(reused.duplicate).toBe(false)
      const r = yield* sweep.sweep
      // Chunks of 2: all five old expiries visited; four ?u deleted; k0's new ?u kept.
      expect(r).toEqual({ expiries: 5, keys: 4 })
      const left = yield* keysOf
      expect(left.u.map((k) => k.key).sort()).toEqual(["k0", "late"])
      expect(left.e.map((k) => k.key).sort()).toEqual(["k0", "late"])
      const k0 = Dedupe.decodeValue((yield* store.get("index", K.dedupeKey("acme", "k0")))!)!
      expect(k0.seq).toBe(reused.seq)
      expect((yield* Metric.value(dedupeSwept)).count - sweptBefore).toBe(4)
      // The kept key still dedupes inside its new window; a swept key queues anew.
      expect((yield* writer.submit(req("acme", "k0"))).duplicate).toBe(true)
      expect((yield* writer.submit(req("acme", "k1"))).duplicate).toBe(false)

      // Past every window: all swept.
      yield* TestClock.adjust(WINDOW * 2)
      yield* sweep.sweep
      expect(yield* keysOf).toEqual({ u: [], e: [] })
    }).pipe(Effect.provide(env))
  )

  it.effect("a kept request answer is swept at its expiry and never read as a hook's key", () =>
    Effect.gen(function* () {
      const answers = yield* Answers.RequestAnswers
      const writer = yield* Writer
      const sweep = yield* Sweep.DedupeSweep
      const body = Buffer.from('{"id":"ep_1"}')
      yield* answers.keep("acme", "req:a", { status: 201, expiresAt: WINDOW, body })
      expect(yield* answers.get("acme", "req:a", 0)).toMatchObject({ status: 201, expiresAt: WINDOW })
      expect(Buffer.from((yield* answers.get("acme", "req:a", 0))!.body).toString()).toBe('{"id":"ep_1"}')
      // The Writer reads only a hook's key: a hook sent with the same key is a new hook.
      expect((yield* writer.submit(req("acme", "req:b"))).duplicate).toBe(false)
      yield* answers.keep("acme", "req:b", { status: 204, expiresAt: WINDOW, body: new Uint8Array(0) })
      expect((yield* writer.submit(req("acme", "req:b"))).duplicate).toBe(false)
      // A body over the bound is not kept.
      yield* answers.keep("acme", "req:big", { status: 200, expiresAt: WINDOW, body: new Uint8Array(Dedupe.ANSWER_MAX_BYTES + 1) })
      expect(yield* answers.get("acme", "req:big", 0)).toBeUndefined()
      // Out of force at its expiry, and swept with its expiry row.
      expect(yield* answers.get("acme", "req:a", WINDOW)).toBeUndefined()
      yield* TestClock.adjust(WINDOW * 2)
      yield* sweep.sweep
      expect(yield* keysOf).toEqual({ u: [], e: [] })
    }).pipe(Effect.provide(withAnswers))
  )
})
