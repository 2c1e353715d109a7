/**
 * `sinks[].retry` in its two forms (issue 16): the explicit `delaysMs` and the
 * exponential keys. The schedules asserted are the ones docs/configuration.md
 * "Retry policies" states: the test reads that table, so the docs and the
 * code cannot drift apart.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import YAML from "yaml"
import { load } from "../src/config/config.js"
import * as Cfg from "../src/domain/config.js"
import * as Retry from "../src/domain/retry-schedule.js"

const DOC = path.resolve(import.meta.dirname, "../docs/configuration.md")

interface Row {
  readonly policy: Record<string, unknown> | undefined
  readonly delays: ReadonlyArray<number>
  readonly words: string
}

/** The rows of the "Retry policies" table: `retry` (YAML flow, or "not given"), the delays, the words. */
const documentedRows = (): ReadonlyArray<Row> => {
  const doc = fs.readFileSync(DOC, "utf8")
  const section = doc.slice(doc.indexOf("### Retry policies"))
  const table = section.slice(section.indexOf("| `retry` |"), section.indexOf("\n\n", section.indexOf("| `retry` |")))
  return table
    .split("\n")
    .slice(2)
    .map((line) => {
      const [policy, delays, words] = line.split(" | ").map((c) => c.replace(/^\|\s*|\s*\|$/g, "").trim())
      return {
        policy: policy === "not given" ? undefined : (YAML.parse(policy!.replace(/^`|`$/g, "")) as Record<string, unknown>),
        delays: JSON.parse(delays!.replace(/^`|`$/g, "")) as ReadonlyArray<number>,
        words: words!
      }
    })
}

const configWith = (retry: Record<string, unknown> | undefined) => ({
  sinks: [{ name: "a", url: "http://127.0.0.1:9/", ...(retry === undefined ? {} : { retry }) }],
  sources: [{ id: "s", routes: ["a"] }]
})

const decodeRetry = (retry: Record<string, unknown> | undefined) => {
  const r = Cfg.decode(configWith(retry))
  if (Result.isFailure(r)) throw new Error(String(r.failure))
  return r.success.sinks[0]!.retry
}

/** "22 h 42 min 35 s" as milliseconds. */
const durationOf = (words: string): number | undefined => {
  const m = /over ((?:\d+ h ?)?(?:\d+ min ?)?(?:\d+ s)?)/.exec(words)
  if (m === null) return undefined
  const part = (unit: string) => Number(new RegExp(`(\\d+) ${unit}\\b`).exec(m[1]!)?.[1] ?? 0)
  return ((part("h") * 60 + part("min")) * 60 + part("s")) * 1000
}

describe("retry policy", () => {
  it("an exponential retry policy produces its documented schedule", async () => {
    const rows = documentedRows()
    expect(rows.length).toBeGreaterThanOrEqual(5)
    expect(rows.filter((r) => r.policy !== undefined && "maxAttempts" in r.policy).length).toBeGreaterThanOrEqual(3)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-retry-"))
    try {
      for (const row of rows) {
        const what = JSON.stringify(row.policy ?? "not given")
        // The Schema on the parsed document, and the file through the ConfigProviders (values read as strings).
        const decoded = decodeRetry(row.policy)
        expect(decoded.delaysMs, what).toEqual(row.delays)
        const file = path.join(dir, "ankusa.yaml")
        fs.writeFileSync(file, YAML.stringify(configWith(row.policy)))
        const loaded = await Effect.runPromise(load({ file, env: {} }))
        expect(loaded.sinks[0]!.retry.delaysMs, what).toEqual(row.delays)
        expect(loaded.sinks[0]!.retry.jitter, what).toBe(Retry.DEFAULT_JITTER)
        expect(Retry.maxAttempts(decoded), what).toBe(row.delays.length + 1)
        if (row.policy !== undefined && typeof row.policy["maxAttempts"] === "number") {
          expect(Retry.maxAttempts(decoded), what).toBe(row.policy["maxAttempts"])
        }
        // The words' total, where they give one, is the sum of the delays.
        const total = durationOf(row.words)
        if (total !== undefined) expect(row.delays.reduce((a, b) => a + b, 0), `${what}: ${row.words}`).toBe(total)
        // The pipeline's decision follows the list: each retry within the jitter band, then the DLQ.
        row.delays.forEach((base, i) => {
          const d = Retry.next(decoded, { attempt: i + 1, status: 500, retryAfter: undefined, now: 0, random: 0.5 })
          expect(d).toEqual({ _tag: "Retry", delayMs: base, at: base })
        })
        expect(Retry.next(decoded, { attempt: row.delays.length + 1, status: 500, retryAfter: undefined, now: 0, random: 0 })).toEqual({
          _tag: "GiveUp",
          reason: "exhausted"
        })
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
    // The defaults the table names are the code's.
    expect(decodeRetry({ maxAttempts: Retry.DEFAULT_EXPONENTIAL.maxAttempts }).delaysMs).toEqual(Retry.exponentialDelays(Retry.DEFAULT_EXPONENTIAL))
    expect(decodeRetry(undefined).delaysMs).toEqual(Retry.DEFAULT_DELAYS_MS)
  })

  it("a retry policy in both forms, or out of range, is refused naming the key", () => {
    const refused = (retry: Record<string, unknown>) => {
      const r = Cfg.decode(configWith(retry))
      return Result.isFailure(r) ? String(r.failure) : "accepted"
    }
    expect(refused({ delaysMs: [1000], maxAttempts: 3 })).toMatch(/either delaysMs or maxAttempts/)
    expect(refused({ maxAttempts: 0 })).not.toBe("accepted")
    expect(refused({ maxAttempts: 102 })).not.toBe("accepted")
    expect(refused({ factor: 0.5 })).not.toBe("accepted")
    expect(refused({ initialDelayMs: -1 })).not.toBe("accepted")
    expect(refused({ maxAttempts: 3, jitter: 0 })).toBe("accepted")
  })
})
