import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import * as Deliveries from "../src/domain/deliveries.js"
import * as K from "../src/domain/keys.js"
import { checkLifecycle } from "../src/queue/format/check-lifecycle.js"
import * as Reclaim from "../src/lifecycle/reclaim.js"
import { Store, type StoreShape } from "../src/store/store.js"
import { makeMemoryStore } from "../src/store/memory.js"
import { allocAll, commit, envelopeOf, rowsOf } from "./lifecycle-helpers.js"
import * as Queue from "../src/queue/queue.js"

type Cmd =
  | { readonly t: "ingest"; readonly sinks: number; readonly ord: number }
  | { readonly t: "claim" | "deliver" | "retry" | "dead" | "revive" | "purgeDue" | "purgeDead" | "orphanDrop" | "settle" | "drop"; readonly i: number }
  | { readonly t: "recover" }
  /** Run one hook to the end: claim and deliver each of its rows, settle its obligation (one batch each). */
  | { readonly t: "finish"; readonly i: number }
  | { readonly t: "reclaim"; readonly between: ReadonlyArray<Cmd> }

const on = (t: Exclude<Cmd["t"], "ingest" | "recover" | "reclaim">, weight: number) => ({
  arbitrary: fc.record({ t: fc.constant(t), i: fc.nat() }) as fc.Arbitrary<Cmd>,
  weight
})
// Weighted so that many hooks run their whole life (claimed, delivered, settled) within a run.
const simple: fc.Arbitrary<Cmd> = fc.oneof(
  { arbitrary: fc.record({ t: fc.constant("ingest" as const), sinks: fc.integer({ min: 1, max: 3 }), ord: fc.integer({ min: 1, max: 2 }) }), weight: 3 },
  on("claim", 6),
  on("deliver", 5),
  on("settle", 4),
  on("retry", 1),
  on("dead", 1),
  on("revive", 1),
  on("purgeDue", 1),
  on("purgeDead", 1),
  on("orphanDrop", 1),
  on("drop", 1),
  { arbitrary: fc.constant({ t: "recover" as const }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant("finish" as const), i: fc.nat() }), weight: 2 }
)
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { arbitrary: simple, weight: 6 },
  // A reclaim step with transitions landing between its reads and its write.
  { arbitrary: fc.record({ t: fc.constant("reclaim" as const), between: fc.array(simple, { maxLength: 3 }) }), weight: 3 }
)

const pick = <A>(xs: ReadonlyArray<A>, i: number): A | undefined => (xs.length === 0 ? undefined : xs[i % xs.length])

/** Apply one transition to whatever row of the store it picks, as production writers do. */
const apply = (store: StoreShape, archive: boolean, c: Cmd, state: { nextSeq: number; now: number }): Effect.Effect<void, unknown> =>
  Effect.gen(function* () {
    state.now += 1_000
    const now = state.now
    const due = (yield* rowsOf(store, K.Families.due)).map((e) => ({ ref: K.decodeDueKey(e.key), v: K.decodeDueValue(e.value) }))
    const inflight = (yield* rowsOf(store, K.Families.inflight)).map((e) => ({ ref: K.decodeInflightKey(e.key), size: K.decodeSizeValue(e.value) }))
    const dead = (yield* rowsOf(store, K.Families.dead)).map((e) => ({ ref: K.decodeDeadKey(e.key), ord: K.decodeDeadValue(e.value).ord! }))
    const owed = (yield* rowsOf(store, K.Families.archive)).map((e) => ({ seq: K.decodeArchiveKey(e.key), ...K.decodeArchiveValue(e.value) }))
    const row = { attempts: 1, lastStatus: 500, size: 0, lastAt: now }
    switch (c.t) {
      case "ingest": {
        const seq = state.nextSeq++
        const envelope = envelopeOf(seq, c.ord, now, c.sinks)
        return yield* commit(store, [Deliveries.ingest({ seq, ord: c.ord, envelope, sinkCount: c.sinks, at: now, archive })])
      }
      case "claim": {
        const d = pick(due, c.i)
        return d === undefined ? undefined : yield* commit(store, [Deliveries.claim(d.ref, d.v)])
      }
      case "deliver": {
        const f = pick(inflight, c.i)
        return f === undefined ? undefined : yield* commit(store, [Deliveries.delivered(f.ref, f.size)])
      }
      case "orphanDrop": {
        const f = pick(inflight, c.i)
        return f === undefined ? undefined : yield* commit(store, [Deliveries.orphanDrop(f.ref, f.size)])
      }
      case "retry": {
        const f = pick(inflight, c.i)
        return f === undefined ? undefined : yield* commit(store, [Deliveries.retry(f.ref, { ...row, size: f.size }, now + 500)])
      }
      case "dead": {
        const f = pick(inflight, c.i)
        return f === undefined ? undefined : yield* commit(store, [Deliveries.deadLetter(f.ref, { ...row, size: f.size }, now, { sourceId: "src", id: `hook_${f.ref.seq}` })])
      }
      case "revive": {
        const d = pick(dead, c.i)
        if (d === undefined) return
        const r = Deliveries.decodeRow(yield* store.get("deliveries", K.deliveryKey(d.ref.seq, d.ref.sink)))!
        return yield* commit(store, [Deliveries.revive(d.ref, d.ord, r.size, now)])
      }
      case "purgeDue": {
        const d = pick(due, c.i)
        return d === undefined ? undefined : yield* commit(store, [Deliveries.purgeDue(d.ref, d.v)])
      }
      case "purgeDead": {
        const d = pick(dead, c.i)
        if (d === undefined) return
        const r = Deliveries.decodeRow(yield* store.get("deliveries", K.deliveryKey(d.ref.seq, d.ref.sink)))!
        return yield* commit(store, [Deliveries.purgeDead(d.ref, d.ord, r.size)])
      }
      case "settle":
      case "drop": {
        const a = pick(owed, c.i)
        if (a === undefined) return
        return yield* commit(store, [c.t === "settle" ? Deliveries.archiveSettle(a.seq, a.ord) : Deliveries.archiveDrop(a.seq, a.ord)])
      }
      case "finish": {
        const seqs = [...new Set([...due.map((d) => d.ref.seq), ...inflight.map((f) => f.ref.seq), ...owed.map((a) => a.seq)])]
        const seq = pick(seqs, c.i)
        if (seq === undefined) return
        for (const d of due.filter((d) => d.ref.seq === seq)) {
          yield* commit(store, [Deliveries.claim(d.ref, d.v)])
          const ref = { ord: d.ref.ord, seq, sink: d.ref.sink }
          yield* commit(store, [Deliveries.delivered(ref, d.v.size)])
        }
        for (const f of inflight.filter((f) => f.ref.seq === seq)) yield* commit(store, [Deliveries.delivered(f.ref, f.size)])
        for (const a of owed.filter((a) => a.seq === seq)) yield* commit(store, [Deliveries.archiveSettle(a.seq, a.ord)])
        return
      }
      case "recover":
        return yield* commit(store, inflight.map((f) => Deliveries.recover(f.ref, f.size, now)))
      case "reclaim":
        return // run by the caller, which owns the Reclaim service
    }
  })

/** Seqs that still owe something: a delivery row or an obligation. */
const owedSeqs = (store: StoreShape) =>
  Effect.gen(function* () {
    const out = new Set<number>()
    for (const e of yield* rowsOf(store, K.Families.deliveries)) out.add(K.decodeDeliveryKey(e.key).seq)
    for (const e of yield* rowsOf(store, K.Families.archive)) out.add(K.decodeArchiveKey(e.key))
    return out
  })

const hookSeqs = (store: StoreShape) => rowsOf(store, K.Families.hooks).pipe(Effect.map((rows) => new Set(rows.map((e) => K.decodeHookKey(e.key)))))

const run = (archive: boolean, cmds: ReadonlyArray<Cmd>) =>
  Effect.gen(function* () {
    const store = yield* makeMemoryStore()
    yield* store.write(allocAll(2), { sync: false })
    const reclaim = yield* Reclaim.make({ chunk: 3 }).pipe(Effect.provideService(Store, store), Effect.provideService(Queue.Queue, Queue.make(store)))
    const state = { nextSeq: 1, now: 1_000_000 }
    const check = Effect.gen(function* () {
      // Never before: every hook something owes is still there.
      const hooks = yield* hookSeqs(store)
      for (const seq of yield* owedSeqs(store)) expect(hooks.has(seq), `hook ${seq} reclaimed while owed`).toBe(true)
    })
    for (const c of cmds) {
      if (c.t === "reclaim") {
        yield* reclaim.step({ between: Effect.forEach(c.between, (b) => apply(store, archive, b, state).pipe(Effect.orDie), { discard: true }) })
      } else yield* apply(store, archive, c, state)
      yield* check
    }
    // Once nothing owes it: after a full walk, exactly the owed hooks remain, and no marker outlives its hook.
    yield* reclaim.pass
    const owed = yield* owedSeqs(store)
    const hooks = yield* hookSeqs(store)
    expect([...hooks].sort((a, b) => a - b)).toEqual([...owed].sort((a, b) => a - b))
    for (const e of yield* rowsOf(store, K.Families.cleared)) expect(hooks.has(K.decodeClearedKey(e.key))).toBe(true)
    expect((yield* checkLifecycle(store)).differences).toEqual([])
    return { reclaimed: state.nextSeq - 1 - hooks.size }
  })

describe("reclaim", () => {
  it("reclaim deletes a hook once nothing owes it and never before", { timeout: 120_000 }, async () => {
    const reclaimed = { on: 0, off: 0 }
    await fc.assert(
      fc.asyncProperty(fc.boolean(), fc.array(cmd, { minLength: 1, maxLength: 80, size: "medium" }), async (archive, cmds) => {
        const r = await Effect.runPromise(run(archive, cmds))
        reclaimed[archive ? "on" : "off"] += r.reclaimed
      }),
      { numRuns: 200 }
    )
    // Not vacuous: with the archive on and off, runs did reclaim hooks.
    expect(reclaimed.on).toBeGreaterThan(0)
    expect(reclaimed.off).toBeGreaterThan(0)
  })
})
