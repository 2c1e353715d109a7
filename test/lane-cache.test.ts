/**
 * The ordered lanes' successors' cache (src/queue/lane-cache.ts): its bounds, its packed rows, and
 * what it says of a lane once its remembered rows are used up. Pure; lanes.ts's use of it is
 * checked by test/ordered-lanes.test.ts against the store.
 */
import { describe, expect, it } from "@effect/vitest"
import * as K from "../src/domain/keys.js"
import { makeLaneCache } from "../src/queue/lane-cache.js"

const page = (ord: number, lane: number, rows: ReadonlyArray<{ readonly seq: number; readonly sink: number; readonly size: number }>) =>
  rows.map((r) => ({ key: K.waitingKey(ord, lane, r.seq, r.sink), value: K.sizeValue(r.size) }))

describe("lane cache", () => {
  it("remembers at most its lanes, forgetting the oldest read first", () => {
    const cache = makeLaneCache(3, 4)
    for (let lane = 1; lane <= 4; lane++) cache.read({ ord: 1, lane }, page(1, lane, [{ seq: 10, sink: 0, size: 5 }, { seq: 11, sink: 0, size: 5 }]))
    // Lane 1 was read first: forgotten when lane 4 came.
    expect(cache.next({ ord: 1, lane: 1 }, false)).toBeUndefined()
    for (let lane = 2; lane <= 4; lane++) expect(cache.next({ ord: 1, lane }, false)).toEqual({ row: { ord: 1, lane, seq: 11, sink: 0 }, size: 5 })
  })

  it("keeps each row's seq, sink index and size exactly", () => {
    const cache = makeLaneCache(4, 4)
    const rows = [
      { seq: 1, sink: 0, size: 0 },
      { seq: 2 ** 53 - 1, sink: 65_535, size: 2 ** 32 - 1 },
      { seq: 123_456_789_012, sink: 7, size: 1_024 }
    ]
    expect(cache.read({ ord: 9, lane: 2 ** 31 }, page(9, 2 ** 31, rows))).toEqual({ row: { ord: 9, lane: 2 ** 31, seq: 1, sink: 0 }, size: 0 })
    for (const r of rows.slice(1)) expect(cache.next({ ord: 9, lane: 2 ** 31 }, false)).toEqual({ row: { ord: 9, lane: 2 ** 31, seq: r.seq, sink: r.sink }, size: r.size })
  })

  it("says a lane is free only when its read reached the lane's end and the Writer added nothing since", () => {
    const cache = makeLaneCache(4, 4)
    const ref = { ord: 1, lane: 1 }
    // Fewer rows than asked for (1 + 4): the read reached the lane's end.
    cache.read(ref, page(1, 1, [{ seq: 1, sink: 0, size: 1 }, { seq: 2, sink: 0, size: 1 }]))
    expect(cache.next(ref, false)).toMatchObject({ row: { seq: 2 } })
    expect(cache.next(ref, false)).toBe("free")
    expect(cache.next(ref, false)).toBeUndefined()
    // A full read: the lane may go on past it.
    cache.read(ref, page(1, 1, [1, 2, 3, 4, 5].map((seq) => ({ seq, sink: 0, size: 1 }))))
    for (let i = 0; i < 4; i++) cache.next(ref, false)
    expect(cache.next(ref, false)).toBeUndefined()
    // The Writer added rows after a read that reached the end: read again once the rows remembered are used.
    cache.read(ref, page(1, 1, [{ seq: 7, sink: 0, size: 1 }, { seq: 8, sink: 0, size: 1 }]))
    cache.grew(["1:1"])
    expect(cache.next(ref, false)).toMatchObject({ row: { seq: 8 } })
    expect(cache.next(ref, false)).toBeUndefined()
    // A head marked below: forgotten.
    cache.read(ref, page(1, 1, [{ seq: 9, sink: 0, size: 1 }, { seq: 10, sink: 0, size: 1 }]))
    expect(cache.next(ref, true)).toBeUndefined()
    expect(cache.next(ref, false)).toBeUndefined()
  })
})
