import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import * as Retry from "../src/domain/retry-schedule.js"

const schedule = fc.record({
  delaysMs: fc.array(fc.integer({ min: 0, max: 86_400_000 }), { minLength: 0, maxLength: 12 }),
  jitter: fc.double({ min: 0, max: 0.99, noNaN: true }),
  maxRetryAfterMs: fc.integer({ min: 0, max: 86_400_000 })
})
const now = fc.integer({ min: 0, max: 4_000_000_000_000 })
const random = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })
const status = fc.oneof(fc.constant(0), fc.integer({ min: 100, max: 599 }).filter((s) => s !== 410))

describe("retry schedule", () => {
  it("the default schedule spans about a day", () => {
    const total = Retry.DEFAULT_DELAYS_MS.reduce((a, b) => a + b, 0)
    expect(total).toBeGreaterThan(20 * 3600_000)
    expect(total).toBeLessThan(28 * 3600_000)
    expect(Retry.maxAttempts(Retry.defaultSchedule)).toBe(Retry.DEFAULT_DELAYS_MS.length + 1)
  })

  it("each retry waits its step within the jitter band, and the attempt after the last step gives up", () => {
    fc.assert(
      fc.property(schedule, now, random, status, (s, t, r, st) => {
        for (let attempt = 1; attempt <= s.delaysMs.length + 1; attempt++) {
          const d = Retry.next(s, { attempt, status: st, retryAfter: undefined, now: t, random: r })
          const base = s.delaysMs[attempt - 1]
          if (base === undefined) {
            expect(d).toEqual({ _tag: "GiveUp", reason: "exhausted" })
          } else {
            expect(d._tag).toBe("Retry")
            if (d._tag !== "Retry") return
            expect(d.at).toBe(t + d.delayMs)
            expect(d.delayMs).toBeGreaterThanOrEqual(Math.floor(base * (1 - s.jitter)) - 1)
            expect(d.delayMs).toBeLessThanOrEqual(Math.ceil(base * (1 + s.jitter)) + 1)
          }
        }
      })
    )
  })

  it("410 Gone gives up at once whatever the attempt", () => {
    fc.assert(
      fc.property(schedule, fc.integer({ min: 1, max: 20 }), now, random, (s, attempt, t, r) => {
        expect(Retry.next(s, { attempt, status: 410, retryAfter: "1", now: t, random: r })).toEqual({ _tag: "GiveUp", reason: "gone" })
      })
    )
  })

  it("Retry-After is a clamped lower bound on the wait and never adds attempts", () => {
    fc.assert(
      fc.property(schedule, now, random, status, fc.integer({ min: 0, max: 200_000 }), (s, t, r, st, secs) => {
        const attempt = 1
        const plain = Retry.next(s, { attempt, status: st, retryAfter: undefined, now: t, random: r })
        const withRa = Retry.next(s, { attempt, status: st, retryAfter: String(secs), now: t, random: r })
        if (plain._tag === "GiveUp") {
          expect(withRa).toEqual(plain)
          return
        }
        expect(withRa._tag).toBe("Retry")
        if (withRa._tag !== "Retry") return
        expect(withRa.delayMs).toBe(Math.max(plain.delayMs, Math.min(secs * 1000, s.maxRetryAfterMs)))
      })
    )
    const gaveUp = Retry.next({ delaysMs: [10], jitter: 0, maxRetryAfterMs: 60_000 }, { attempt: 2, status: 503, retryAfter: "5", now: 0, random: 0.5 })
    expect(gaveUp).toEqual({ _tag: "GiveUp", reason: "exhausted" })
  })

  it("Retry-After reads delta seconds and HTTP dates, and ignores junk", () => {
    const t = Date.parse("2024-05-01T12:00:00Z")
    expect(Retry.parseRetryAfter("120", t)).toBe(120_000)
    expect(Retry.parseRetryAfter(" 0 ", t)).toBe(0)
    expect(Retry.parseRetryAfter("Wed, 01 May 2024 12:01:30 GMT", t)).toBe(90_000)
    expect(Retry.parseRetryAfter("Wed, 01 May 2024 11:00:00 GMT", t)).toBe(0)
    expect(Retry.parseRetryAfter("-5", t)).toBeUndefined()
    expect(Retry.parseRetryAfter("1.5", t)).toBeUndefined()
    expect(Retry.parseRetryAfter("soon", t)).toBeUndefined()
    expect(Retry.parseRetryAfter("", t)).toBeUndefined()
    const s = { delaysMs: [1000], jitter: 0, maxRetryAfterMs: 60_000 }
    const d = Retry.next(s, { attempt: 1, status: 429, retryAfter: "Wed, 01 May 2024 13:00:00 GMT", now: t, random: 0 })
    expect(d).toEqual({ _tag: "Retry", delayMs: 60_000, at: t + 60_000 })
  })

  it("jitter is uniform over the band: the extremes of the draw reach its ends", () => {
    expect(Retry.jittered(10_000, 0.2, 0)).toBe(8_000)
    expect(Retry.jittered(10_000, 0.2, 0.5)).toBe(10_000)
    expect(Retry.jittered(10_000, 0.2, 0.999999)).toBe(12_000)
  })
})
