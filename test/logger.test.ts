/** The JSON log lines operators parse: a string message, structured fields beside it. */
import { describe, expect, it } from "@effect/vitest"
import { Console, Effect, Logger } from "effect"
import { jsonLines, splitMessage } from "../src/observability/logger.js"

describe("logs", () => {
  it("every log message is a string with structured fields beside it", () => {
    expect(splitMessage(["pipeline: row dead-lettered", { tenant: "acme", sink: "billing" }])).toEqual({
      message: "pipeline: row dead-lettered",
      fields: { tenant: "acme", sink: "billing" }
    })
    expect(splitMessage("stopped")).toEqual({ message: "stopped", fields: {} })
    expect(splitMessage(["rows", 3])).toEqual({ message: "rows 3", fields: {} })
  })

  it.effect("a log with fields is one JSON line whose message is the text", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      // The logger writes through the Console service: one that keeps the lines.
      const keeping: Console.Console = { ...console, log: (line: unknown) => void lines.push(String(line)) }
      yield* Effect.logInfo("pipeline: row dead-lettered", { tenant: "acme", status: 410 }).pipe(
        Effect.annotateLogs({ sink: "billing" }),
        Effect.provide(Logger.layer([jsonLines])),
        Effect.provideService(Console.Console, keeping)
      )
      expect(lines.length).toBe(1)
      const line = JSON.parse(lines[0]!) as { message: unknown; logLevel: string; annotations: Record<string, unknown> }
      expect(line.message).toBe("pipeline: row dead-lettered")
      expect(line.logLevel).toBe("INFO")
      expect(line.annotations).toEqual({ tenant: "acme", status: 410, sink: "billing" })
    })
  )
})
