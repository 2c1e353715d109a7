import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { fixedCodec } from "../src/domain/key-codec.js"
import * as Keys from "../src/domain/keys.js"
import type { FixedLayout, Width } from "../src/domain/layouts.js"

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

  it("a counter key's ordinal is read in place as decodeCounterKey reads it", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffff_ffff }), fc.integer({ min: 0, max: 0xff }), (o, field) => {
        const k = Keys.counterKey(o, field)
        expect(Keys.counterKeyOrd(k)).toBe(o)
        expect(Keys.counterKeyOrd(k)).toBe(Keys.decodeCounterKey(k).ord)
      })
    )
  })
})

const WIDTH_MAX: Record<Width, number> = { 1: 0xff, 2: 0xffff, 4: 0xffff_ffff, 8: Number.MAX_SAFE_INTEGER }
// Strictly inside each field's range, so that no key is equal to a sentinel.
const fieldValue = (w: Width) => fc.integer({ min: 1, max: WIDTH_MAX[w] - 1 })
const tenantId = fc.string({ minLength: 1, maxLength: 12 }).filter((s) => !s.includes("\0"))
const dedupeKeyText = fc.string({ maxLength: 12 })

const between = (k: Uint8Array, f: Keys.Family) => {
  expect(Keys.compare(k, f.lo)).toBeGreaterThan(0)
  expect(Keys.compare(k, f.hi)).toBeLessThan(0)
}

const fixedFamilies = Object.values(Keys.Families).filter((f) => f.layout._tag === "fixed")
const layoutsInUse = [...new Set(fixedFamilies.map((f) => f.layout as FixedLayout))]

describe("key layouts", () => {
  for (const layout of layoutsInUse) {
    const families = fixedFamilies.filter((f) => f.layout === layout)
    it(`${layout.name} keys round-trip, sort by their fields and lie between the sentinels (${families.map((f) => f.name).join(", ")})`, () => {
      const values = fc.tuple(...layout.widths.map(fieldValue))
      for (const family of families) {
        const codec = fixedCodec(family, layout as unknown as FixedLayout<Array<number>>)
        fc.assert(
          fc.property(values, values, (a, b) => {
            const x = codec.encode(...a)
            const y = codec.encode(...b)
            expect(x.length).toBe((family.prefix === undefined ? 0 : 1) + layout.width)
            expect(Object.values(codec.decode(x))).toEqual(a)
            expect(codec.first(x)).toBe(a[0])
            expect(Math.sign(Keys.compare(x, y))).toBe(cmpTuple(a, b))
            between(x, family)
            // A lead of the first n fields sorts at or below every key that starts with them.
            const n = layout.widths.length - 1
            expect(Keys.compare(codec.lead(...a.slice(0, n)), x)).toBeLessThanOrEqual(0)
            // The widths the leads use are the ones the writer wrote.
            expect(Buffer.from(codec.lead(...a))).toEqual(Buffer.from(x))
          })
        )
      }
    })
  }

  it("tenantKey keys round-trip and a tenant's keys share its lead", () => {
    fc.assert(
      fc.property(tenantId, dedupeKeyText, (tenant, key) => {
        const k = Keys.dedupeKey(tenant, key)
        expect(Keys.decodeDedupeKey(k)).toEqual({ tenant, key })
        expect(Buffer.from(k).subarray(0, Keys.dedupeTenantPrefix(tenant).length)).toEqual(Buffer.from(Keys.dedupeTenantPrefix(tenant)))
        between(k, Keys.Families.dedupe)
      })
    )
  })

  it("atTenantKey keys round-trip and sort by time first", () => {
    const at = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER - 1 })
    fc.assert(
      fc.property(at, at, tenantId, dedupeKeyText, (a1, a2, tenant, key) => {
        const x = Keys.expiryKey(a1, tenant, key)
        expect(Keys.decodeExpiryKey(x)).toEqual({ at: a1, tenant, key })
        if (a1 !== a2) expect(Math.sign(Keys.compare(x, Keys.expiryKey(a2, tenant, key)))).toBe(a1 < a2 ? -1 : 1)
        expect(Keys.compare(x, Keys.expiryUpTo(a1))).toBeLessThan(0)
        between(x, Keys.Families.expiry)
      })
    )
  })

  it("utf8 keys round-trip", () => {
    fc.assert(
      fc.property(tenantId, (id) => {
        const k = Keys.tenantOrdKey(id)
        expect(Keys.decodeTenantOrdKey(k)).toBe(id)
        between(k, Keys.Families.tenant_ords)
      })
    )
  })

  it("families of one layout share a codec but not their keys", () => {
    fc.assert(
      fc.property(tuple, ([o, a, s, k]) => {
        const due = Keys.dueKey(o, a, s, k)
        const dead = Keys.deadByTenantKey(o, a, s, k)
        expect(Buffer.from(due).subarray(1)).toEqual(Buffer.from(dead).subarray(1))
        expect(Keys.decodeDeadByTenantKey(dead)).toEqual(Keys.decodeDueKey(due))
        expect(() => Keys.decodeDueKey(dead)).toThrow(/corrupt due key/)
        expect(Keys.familyOf("index", due)).toBe("due")
        expect(Keys.familyOf("index", dead)).toBe("dead_by_tenant")
      })
    )
  })

  it("a codec is only bound to a family of its layout", () => {
    expect(() => fixedCodec(Keys.Families.due, Keys.Layouts.seq)).toThrow(/does not have layout seq/)
  })
})
