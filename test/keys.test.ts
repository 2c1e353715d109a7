import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import * as Keys from "../src/domain/keys.js"

const ord = fc.integer({ min: 0, max: 0xffff_fffe })
const at = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER })
const seq = fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER })
const sink = fc.integer({ min: 0, max: 0xffff })
const tuple = fc.tuple(ord, at, seq, sink)

const cmpTuple = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]! ? -1 : 1
  return 0
}

describe("keys", () => {
  it("due keys round-trip and byte order equals the order of (ord, at, seq, sink)", () => {
    fc.assert(
      fc.property(tuple, tuple, ([o1, a1, s1, k1], [o2, a2, s2, k2]) => {
        const x = Keys.dueKey(o1, a1, s1, k1)
        const y = Keys.dueKey(o2, a2, s2, k2)
        expect(Keys.decodeDueKey(x)).toEqual({ ord: o1, at: a1, seq: s1, sink: k1 })
        expect(Math.sign(Keys.compare(x, y))).toBe(cmpTuple([o1, a1, s1, k1], [o2, a2, s2, k2]))
        expect(Keys.compare(x, Keys.Families.due.lo)).toBeGreaterThan(0)
        expect(Keys.compare(x, Keys.Families.due.hi)).toBeLessThan(0)
      })
    )
  })
})
