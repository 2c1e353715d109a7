/** Logs of failed attempts (docs/delivery.md "Logs"): a retry names its sink, tenant, status and next attempt; a run is bounded. */
import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Logger } from "effect"
import { makeRetryLog, RETRY_LOG_BURST, RETRY_LOG_WINDOW_MS } from "../src/delivery/retry-log.js"
import { jsonLines } from "../src/observability/logger.js"
import { makeIngest, memoryWorld, startPipeline, until } from "./pipeline-world.js"
import { startSink } from "./sink-server.js"

interface Line {
  readonly message: string
  readonly logLevel: string
  readonly annotations: Record<string, unknown>
}

/** Runs `effect` with the JSON logger writing into `lines`. */
const keepingLogs = <A, E, R>(lines: Array<Line>, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.provide(Logger.layer([jsonLines])),
    Effect.provideService(Console.Console, { ...console, log: (l: unknown) => void lines.push(JSON.parse(String(l)) as Line) })
  )

describe("retry logs", () => {
  it.live("a retry is logged with sink, status and next attempt", () =>
    Effect.gen(function* () {
      const lines: Array<Line> = []
      const w = yield* memoryWorld
      const sink = yield* startSink(() => ({ status: 503 }))
      const retry = { delaysMs: [60_000], jitter: 0, maxRetryAfterMs: 60_000 }
      yield* makeIngest(w.store)([{ tenant: "acme", sinks: ["billing"], at: Date.now() }])
      yield* keepingLogs(
        lines,
        Effect.gen(function* () {
          yield* startPipeline(w, { tickMs: 20, sinks: [{ name: "billing", url: sink.url, timeoutMs: 5_000, headers: {}, concurrency: 1, retry }] })
          yield* until("the retry is committed", Effect.map(w.queue.aggregate, (c) => c.scheduled === 1))
        })
      )
      const retries = lines.filter((l) => l.message === "pipeline: attempt failed; retry scheduled")
      expect(retries).toHaveLength(1)
      const f = retries[0]!
      expect(f.logLevel).toBe("INFO")
      expect(f.annotations).toMatchObject({ sink: "billing", tenant: "acme", status: 503, attempt: 1 })
      // The next attempt is the schedule's one delay after the failure (no jitter).
      const next = Date.parse(String(f.annotations["nextAt"]))
      expect(next - Date.now()).toBeGreaterThan(55_000)
      expect(next - Date.now()).toBeLessThanOrEqual(60_000)
    })
  )

  it.effect("a run of failures of one sink is logged up to its bound, then summarised", () =>
    Effect.gen(function* () {
      const lines: Array<Line> = []
      const log = makeRetryLog()
      const at = (now: number, sink: string) =>
        log(now, { sink, tenant: "acme", hookId: "h", status: 0, error: "timeout", attempt: 1, nextAt: now + 5_000 })
      yield* keepingLogs(
        lines,
        Effect.gen(function* () {
          for (let i = 0; i < RETRY_LOG_BURST + 30; i++) yield* at(1_000 + i, "billing")
          // Another sink has a bound of its own.
          yield* at(2_000, "crm")
          // The next window: the summary of the first one, then lines again.
          yield* at(1_000 + RETRY_LOG_WINDOW_MS, "billing")
        })
      )
      const billing = lines.filter((l) => l.annotations["sink"] === "billing")
      expect(billing.filter((l) => l.message === "pipeline: attempt failed; retry scheduled")).toHaveLength(RETRY_LOG_BURST + 1)
      expect(billing.find((l) => l.message === "pipeline: retries not logged one by one")?.annotations).toMatchObject({ retries: 30 })
      expect(billing.find((l) => l.message === "pipeline: attempt failed; retry scheduled")?.annotations).toMatchObject({ error: "timeout" })
      expect(lines.filter((l) => l.annotations["sink"] === "crm")).toHaveLength(1)
    })
  )
})
