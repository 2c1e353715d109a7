/**
 * Issue 39's memory a tenant can grow (docs/delivery.md "Logs", docs/api.md "Endpoints"): the
 * attempt log and the retry log's windows are bounded in bytes, and a deleted or disabled
 * endpoint's attempts are dropped through the `Endpoints` service's changes. Memory store.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as AttemptLog from "../src/delivery/attempt-log.js"
import { makeRetryLog, RETRY_LOG_WINDOW_MS, windowBytes } from "../src/delivery/retry-log.js"
import { endpointDestination } from "../src/domain/fanout.js"
import * as Audit from "../src/lifecycle/audit.js"
import { Endpoints } from "../src/queue/endpoints.js"
import * as EndpointsService from "../src/queue/endpoints.js"
import { layerMemory } from "../src/store/memory.js"
import { Store } from "../src/store/store.js"

const KiB = 1024
const failed = (i: number, body: string): AttemptLog.AttemptEntry => ({ at: i, hookId: `h_${i}`, status: 500, latencyMs: 1, outcome: "failed", error: null, body })

describe("memory bounds (issue 39)", () => {
  it.effect("the attempt log is bounded in bytes and forgets a deleted endpoint", () =>
    Effect.gen(function* () {
      // Bounded in bytes: 2,000 failing destinations of 4 KiB bodies against a 1 MiB bound.
      const body = "x".repeat(4 * KiB)
      const bounded = AttemptLog.make(100, 10_000, 1024 * KiB)
      const one = AttemptLog.entryBytes(failed(0, body))
      for (let d = 0; d < 2_000; d++) for (let i = 0; i < 3; i++) bounded.record(`endpoint:e${d}`, failed(i, body), 1)
      expect(bounded.bytes()).toBeLessThanOrEqual(1024 * KiB)
      expect(bounded.bytes()).toBeGreaterThan(1024 * KiB - 3 * one)
      // The least recently written went first; the newest are whole.
      expect(bounded.recent("endpoint:e0", 10)).toEqual([])
      expect(bounded.recent("endpoint:e1999", 10)).toHaveLength(3)
      // One destination's ring replaces its oldest entries and its bytes stay counted exactly.
      const ring = AttemptLog.make(4, 10, 1024 * KiB)
      for (let i = 0; i < 50; i++) ring.record("s", failed(i, body))
      expect(ring.bytes()).toBe([46, 47, 48, 49].reduce((n, i) => n + AttemptLog.entryBytes(failed(i, body)), 0))
      expect(ring.recent("s", 10).map((e) => e.at)).toEqual([49, 48, 47, 46])

      // A deleted or disabled endpoint's log goes with it, through the Endpoints service's change.
      const ctx = yield* Layer.build(Layer.provideMerge(AttemptLog.layer, Layer.provideMerge(EndpointsService.layer, layerMemory())))
      const log = Context.get(ctx, AttemptLog.AttemptLog)
      const endpoints = Context.get(ctx, Endpoints)
      const audit = yield* Audit.make().pipe(Effect.provideService(Store, Context.get(ctx, Store)))
      const stage = (action: "endpoint.create" | "endpoint.update" | "endpoint.delete") => (e: { readonly id: string }) =>
        audit.stage({ actor: "test", tenants: ["acme"], action, params: { id: e.id } })
      const a = yield* endpoints.create(7, { url: "https://a.example/hook" }, 10, stage("endpoint.create"))
      const b = yield* endpoints.create(7, { url: "https://b.example/hook" }, 10, stage("endpoint.create"))
      const c = yield* endpoints.create(7, { url: "https://c.example/hook" }, 10, stage("endpoint.create"))
      for (const e of [a, b, c]) for (let i = 0; i < 5; i++) log.record(endpointDestination(e.id), failed(i, body), 7)
      log.record("shared-sink", failed(0, body))
      const before = log.bytes()
      yield* endpoints.remove(7, a.id, stage("endpoint.delete"))
      expect(log.recent(endpointDestination(a.id), 10)).toEqual([])
      yield* endpoints.update(7, b.id, { disabled: true }, stage("endpoint.update"))
      expect(log.recent(endpointDestination(b.id), 10)).toEqual([])
      // The others are kept, and the bytes went down by what was dropped.
      expect(log.recent(endpointDestination(c.id), 10)).toHaveLength(5)
      expect(log.recent("shared-sink", 10)).toHaveLength(1)
      expect(log.bytes()).toBe(before - 10 * one)
    }).pipe(Effect.scoped)
  )

  it.effect("the retry log's windows are bounded in bytes, the ended ones dropped first", () =>
    Effect.gen(function* () {
      const max = 50 * windowBytes("endpoint:ep_000000")
      const log = makeRetryLog(max)
      const fields = (sink: string) => ({ sink, tenant: "t", hookId: "h", status: 500, error: undefined, attempt: 1, nextAt: 0 })
      for (let i = 0; i < 1_000; i++) yield* log(i, fields(`endpoint:ep_${String(i).padStart(6, "0")}`))
      expect(log.bytes()).toBeLessThanOrEqual(max)
      expect(log.windows()).toBe(50)
      // Past the window every earlier one has ended: one new destination drops them all.
      yield* log(1_000 + RETRY_LOG_WINDOW_MS, fields("endpoint:ep_late00"))
      expect(log.windows()).toBe(1)
    })
  )
})
