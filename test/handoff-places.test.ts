/**
 * When a kept place may pass to its lane's next head (src/delivery/sink-places.ts `passable`,
 * docs/delivery.md "The hand-off"): a pure function of the sink's places, over a table of cases.
 */
import { describe, expect, it } from "@effect/vitest"
import { DEFAULT_BREAKER, makeBreaker } from "../src/delivery/breaker.js"
import { HANDOFF_RUNS_WHILE_PARKED, hold, type KeptPlace, makePlaces, park, passable, type PlacedSink } from "../src/delivery/sink-places.js"

const NOW = 1_000_000

/** A sink of 2 calls and 4 waiting (6 places), `a` (ord 1) holding `held`, and `parked` tenants parked on it. */
const sinkWith = (held: number, parked: ReadonlyArray<{ readonly ord: number; readonly held: number }>): PlacedSink => {
  const places = makePlaces(2, 4)
  hold(places, 1, held)
  for (const p of parked) {
    if (p.held > 0) hold(places, p.ord, p.held)
    park(places, p.ord, NOW)
  }
  return { places, breaker: makeBreaker(DEFAULT_BREAKER), running: 0, retired: false, options: { name: "o" } }
}

const kept = (sink: PlacedSink, runs: number): KeptPlace => ({ ord: 1, sink, runs, passed: false, released: false })

describe("the hand-off's places", () => {
  it("a kept place passes while nobody is parked; while a tenant is parked, within its tenant's share and at most HANDOFF_RUNS_WHILE_PARKED times in a row", () => {
    expect(HANDOFF_RUNS_WHILE_PARKED).toBe(2)
    const cases: ReadonlyArray<{ readonly held: number; readonly parked: ReadonlyArray<{ ord: number; held: number }>; readonly runs: number; readonly passes: boolean }> = [
      // Nobody parked: any run, any count.
      { held: 6, parked: [], runs: 0, passes: true },
      { held: 6, parked: [], runs: 50, passes: true },
      // b parked holding none: two contenders, a share of 3 places.
      { held: 3, parked: [{ ord: 2, held: 0 }], runs: 0, passes: true },
      { held: 3, parked: [{ ord: 2, held: 0 }], runs: 1, passes: true },
      { held: 3, parked: [{ ord: 2, held: 0 }], runs: 2, passes: false },
      { held: 4, parked: [{ ord: 2, held: 0 }], runs: 0, passes: false },
      { held: 6, parked: [{ ord: 2, held: 0 }], runs: 0, passes: false },
      // Five tenants parked, none holding: a share of one place.
      { held: 1, parked: [2, 3, 4, 5, 6].map((ord) => ({ ord, held: 0 })), runs: 1, passes: true },
      { held: 2, parked: [2, 3, 4, 5, 6].map((ord) => ({ ord, held: 0 })), runs: 0, passes: false },
      // b parked while holding 2: still two contenders.
      { held: 3, parked: [{ ord: 2, held: 2 }], runs: 0, passes: true }
    ]
    for (const c of cases) expect(passable(kept(sinkWith(c.held, c.parked), c.runs), NOW), JSON.stringify(c)).toBe(c.passes)
  })

  it("a place passed, given back, on a retired sink or an open breaker does not pass", () => {
    const s = sinkWith(1, [])
    expect(passable({ ...kept(s, 0), passed: true }, NOW)).toBe(false)
    expect(passable({ ...kept(s, 0), released: true }, NOW)).toBe(false)
    expect(passable(kept({ ...s, retired: true }, 0), NOW)).toBe(false)
    expect(passable(kept({ ...s, breaker: { ...s.breaker, state: "open" } }, 0), NOW)).toBe(false)
  })
})
