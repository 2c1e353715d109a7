import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Counters from "../src/domain/counters.js"
import * as Deliveries from "../src/domain/deliveries.js"
import * as K from "../src/domain/keys.js"
import { checkStore } from "../src/queue/format/check.js"
import type { DeadItem, QueueShape } from "../src/queue/queue.js"
import type { StoreShape } from "../src/store/store.js"
import { allocAll, commit, dump, envelope, memory } from "./queue-helpers.js"

const NOW = 1_700_000_000_000

const run = <A, E>(f: (s: { readonly store: StoreShape; readonly queue: QueueShape }) => Effect.Effect<A, E>) =>
  Effect.runPromise(Effect.flatMap(memory, f))

/**
 * Per tenant: five two-sink hooks (archive on); then three claims (one retried, one dead-lettered,
 * one left inflight) and one more claim dead-lettered. Returns seq → ord.
 */
const populate = (store: StoreShape, queue: QueueShape, tenants: number) =>
  Effect.gen(function* () {
    yield* store.write(allocAll(tenants), { sync: false })
    const ordOfSeq = new Map<number, number>()
    let seq = 1
    for (let ord = 1; ord <= tenants; ord++) {
      for (let h = 0; h < 5; h++) {
        const s = seq++
        ordOfSeq.set(s, ord)
        const env = envelope({ id: `h${s}`, tenant: `t${ord}`, bodyBytes: 10 * ord + h, sinks: 2 })
        yield* commit(store, [Deliveries.ingest({ seq: s, ord, envelope: env, sinkCount: 2, at: NOW - 10_000 + s, archive: true })])
      }
      const claimed = yield* queue.dueForTenant(ord, NOW, 0, 4, 1_000_000)
      yield* commit(store, claimed.map((d) => Deliveries.claim(d.ref, d.value)))
      const [a, b, , d] = claimed.map((c) => ({ ord, seq: c.ref.seq, sink: c.ref.sink, size: c.value.size }))
      const row = (size: number) => Deliveries.freshRow(size)
      yield* commit(store, [
        Deliveries.retry(a!, { ...row(a!.size), attempts: 1 }, NOW + 60_000),
        Deliveries.deadLetter(b!, row(b!.size), NOW - 100, { sourceId: "src", id: `h${b!.seq}` }),
        Deliveries.deadLetter(d!, row(d!.size), NOW - 50, { sourceId: "src", id: `h${d!.seq}` })
      ])
    }
    return ordOfSeq
  })

/** Which tenant an entry of a dump belongs to (0: the aggregate counters). */
const ownerOf = (ordOfSeq: ReadonlyMap<number, number>) => (cf: string, entry: string): number | undefined => {
  const [kh, vh] = entry.split("=") as [string, string]
  const k = Buffer.from(kh, "hex")
  const v = Buffer.from(vh, "hex")
  if (cf === "counters") return k.length === 5 ? K.decodeCounterKey(k).ord : undefined
  if (cf === "deliveries") return k.length === 10 ? ordOfSeq.get(K.decodeDeliveryKey(k).seq) : undefined
  if (cf === "hooks") return k.length === 8 ? ordOfSeq.get(K.decodeHookKey(k)) : undefined
  switch (k[0]) {
    case K.P.due:
      return k.length === 23 ? K.decodeDueKey(k).ord : undefined
    case K.P.inflight:
      return k.length === 15 ? K.decodeInflightKey(k).ord : undefined
    case K.P.deadByTenant:
      return k.length === 23 ? K.decodeDeadByTenantKey(k).ord : undefined
    case K.P.active:
      return k.length === 13 ? K.decodeActiveKey(k).ord : undefined
    case K.P.dead:
      return k.length === 19 ? K.decodeDeadValue(v).ord : undefined
    case K.P.cleared:
      return k.length === 9 ? ordOfSeq.get(K.decodeClearedKey(k)) : undefined
    case K.P.archive:
      return k.length === 9 ? K.decodeArchiveValue(v).ord : undefined
    default:
      return undefined
  }
}

const snapshot = (store: StoreShape) =>
  Effect.all({ index: dump(store, "index"), deliveries: dump(store, "deliveries"), counters: dump(store, "counters"), hooks: dump(store, "hooks") })

/** Entries added, removed or changed between two snapshots, as [cf, entry]. */
const changes = (a: Record<string, ReadonlyArray<string>>, b: Record<string, ReadonlyArray<string>>) => {
  const out: Array<[string, string]> = []
  for (const cf of Object.keys(a)) {
    const before = new Set(a[cf])
    const after = new Set(b[cf])
    for (const e of before) if (!after.has(e)) out.push([cf, e])
    for (const e of after) if (!before.has(e)) out.push([cf, e])
  }
  return out
}

const foldDead = (store: StoreShape) =>
  store.scan("index", K.familyDataRange(K.Families.dead), { limit: 100_000, reverse: true }).pipe(
    Effect.map((rows) =>
      rows.map((e): DeadItem => {
        const v = K.decodeDeadValue(e.value)
        return { ord: v.ord!, ...K.decodeDeadKey(e.key), sourceId: v.sourceId, id: v.id }
      })
    )
  )

describe("queue reads", () => {
  it("pending_for_tenant, dead_for_tenant and purge_tenant touch one tenant", () =>
    run(({ store, queue }) =>
      Effect.gen(function* () {
        const ordOfSeq = yield* populate(store, queue, 3)
        expect((yield* checkStore(store)).differences).toEqual([])
        const inflightOf2 = yield* store.scan("index", Deliveries.tenantInflightRange(2), { limit: 100 })
        const sizeOf = (seq: number) => envelope({ id: `h${seq}`, tenant: `t${ordOfSeq.get(seq)}`, bodyBytes: 10 * ordOfSeq.get(seq)! + ((seq - 1) % 5), sinks: 2 }).length
        const bytes2 = [...ordOfSeq].filter(([, o]) => o === 2).reduce((n, [s]) => n + 2 * sizeOf(s), 0)

        // One counter point read a field each, nothing scanned.
        yield* store.resetStats
        expect(yield* queue.pendingForTenant(2)).toEqual({ pending: 6, scheduled: 1, inflight: 1, bytes: bytes2 })
        expect((yield* store.stats)).toEqual({ scans: {}, pointReads: { counters: Counters.FieldNames.length } })
        yield* store.resetStats
        expect(yield* queue.deadForTenant(2)).toEqual({ dead: 2 })
        expect((yield* store.stats)).toEqual({ scans: {}, pointReads: { counters: Counters.FieldNames.length } })

        const before = yield* snapshot(store)
        const others = { t1: yield* queue.counters(1), t3: yield* queue.counters(3) }

        // A purge stopped after two chunks of two rows: counters stay exact mid-way; calling again resumes.
        const first = yield* queue.purgeTenant(2, ["pending", "dead"], { chunk: 2, maxChunks: 2 })
        expect(first).toEqual({ pending: 4, dead: 0, done: false })
        expect((yield* checkStore(store)).differences).toEqual([])
        // Rows go in `at` order: the four oldest first-attempt rows; the retry (due in a minute) is still there.
        expect(yield* queue.pendingForTenant(2)).toMatchObject({ pending: 2, scheduled: 1, inflight: 1 })
        const rest = yield* queue.purgeTenant(2, ["pending", "dead"], { chunk: 2 })
        expect(rest).toEqual({ pending: 3, dead: 2, done: true })
        // Idempotent: nothing left to purge.
        expect(yield* queue.purgeTenant(2, ["pending", "dead"])).toEqual({ pending: 0, dead: 0, done: true })
        expect((yield* checkStore(store)).differences).toEqual([])

        // Tenant 2 keeps only its inflight row (untouched, with its delivery row) and its archive obligations.
        const inflightSize = inflightOf2.map((e) => K.decodeSizeValue(e.value)).reduce((a, b) => a + b, 0)
        expect(yield* queue.pendingForTenant(2)).toEqual({ pending: 0, scheduled: 0, inflight: 1, bytes: inflightSize })
        expect(yield* queue.deadForTenant(2)).toEqual({ dead: 0 })
        expect(yield* store.scan("index", Deliveries.tenantInflightRange(2), { limit: 100 })).toEqual(inflightOf2)
        const f = K.decodeInflightKey(inflightOf2[0]!.key)
        expect(yield* store.get("deliveries", K.deliveryKey(f.seq, f.sink))).toBeDefined()

        // Every change is tenant 2's (or the aggregate's): other tenants' rows and counters are as they were.
        const owner = ownerOf(ordOfSeq)
        const changed = changes(before, yield* snapshot(store))
        expect(changed.length).toBeGreaterThan(0)
        expect(changed.filter(([cf, e]) => { const o = owner(cf, e); return o !== 2 && o !== Counters.AGGREGATE })).toEqual([])
        expect({ t1: yield* queue.counters(1), t3: yield* queue.counters(3) }).toEqual(others)
        // Reclaim is told which hooks to look at: a ?c marker for every purged row's hook.
        const cleared = changed.filter(([cf, e]) => cf === "index" && e.startsWith(K.P.cleared.toString(16)))
        expect(cleared.length).toBeGreaterThan(0)
      })
    ))

  it("tenant scoped dlq reads one range", () =>
    run(({ store, queue }) =>
      Effect.gen(function* () {
        yield* store.write(allocAll(3), { sync: false })
        // Fifteen dead rows, tenants interleaved in global time order.
        for (let i = 0; i < 15; i++) {
          const ord = (i % 3) + 1
          const seq = i + 1
          const env = envelope({ id: `h${seq}`, tenant: `t${ord}` })
          yield* commit(store, [Deliveries.ingest({ seq, ord, envelope: env, sinkCount: 1, at: NOW - 100_000, archive: false })])
          const first = (yield* queue.firstDue(ord))!
          yield* commit(store, [Deliveries.claim(first.ref, first.value)])
          const ref = { ord, seq: first.ref.seq, sink: 0 }
          yield* commit(store, [Deliveries.deadLetter(ref, Deliveries.freshRow(env.length), NOW - 50_000 + i * 1000, { sourceId: `src${ord}`, id: `h${first.ref.seq}` })])
        }
        const all = yield* foldDead(store)
        const of = (...ords: Array<number>) => all.filter((d) => ords.includes(d.ord))

        yield* store.resetStats
        const page = yield* queue.dead({ ords: [2], limit: 100 })
        const stats = yield* store.stats
        expect(page.items).toEqual(of(2))
        expect(page.items.length).toBe(5)
        expect(page.cursor).toBeUndefined()
        // One reverse range scan of ?X, one multi-get of the matching ?x values, and no hook read.
        expect(stats.scans).toEqual({ dead_by_tenant: 1 })
        expect(stats.pointReads).toEqual({ dead: 5 })
        expect(stats.pointReads["hooks"]).toBeUndefined()

        // Paging with the cursor walks the same rows, newest first.
        const p1 = yield* queue.dead({ ords: [2], limit: 2 })
        const p2 = yield* queue.dead({ ords: [2], limit: 2, before: p1.cursor })
        const p3 = yield* queue.dead({ ords: [2], limit: 2, before: p2.cursor })
        expect([...p1.items, ...p2.items, ...p3.items]).toEqual(of(2))
        // Several tenants: one range each, merged newest first.
        yield* store.resetStats
        expect((yield* queue.dead({ ords: [1, 3], limit: 100 })).items).toEqual(of(1, 3))
        expect((yield* store.stats).scans).toEqual({ dead_by_tenant: 2 })

        // The node-wide page filters on the ord in each ?x value: same rows, still no hook read.
        yield* store.resetStats
        const walked: Array<DeadItem> = []
        let cursor: K.DeadRef | undefined
        let pages = 0
        do {
          const p = yield* queue.deadPage({ ord: 2, limit: 2, cursor, maxScanned: 4 })
          walked.push(...p.items)
          cursor = p.cursor
          pages++
        } while (cursor !== undefined && pages < 20)
        expect(walked).toEqual(of(2))
        expect((yield* store.stats).pointReads).toEqual({})
        expect(Object.keys((yield* store.stats).scans)).toEqual(["dead"])
        expect((yield* queue.deadPage({ limit: 100 })).items).toEqual(all)
      })
    ))
  it("pending for a source folds only its fixed tenant's ranges", () =>
    run(({ store, queue }) =>
      Effect.gen(function* () {
        yield* store.write(allocAll(2), { sync: false })
        // Tenant 1: three hooks from "fixed" and two from "shared"; tenant 2: two from "shared".
        const hooks = [
          { ord: 1, src: "fixed" },
          { ord: 1, src: "fixed" },
          { ord: 1, src: "fixed" },
          { ord: 1, src: "shared" },
          { ord: 1, src: "shared" },
          { ord: 2, src: "shared" },
          { ord: 2, src: "shared" }
        ]
        for (const [i, h] of hooks.entries()) {
          const env = envelope({ id: `h${i + 1}`, tenant: `t${h.ord}`, sourceId: h.src })
          yield* commit(store, [Deliveries.ingest({ seq: i + 1, ord: h.ord, envelope: env, sinkCount: 1, at: NOW + i, archive: false })])
        }
        // One "fixed" row claimed, one retried.
        const [a, b] = yield* queue.dueForTenant(1, NOW + 10, 0, 2, 1_000_000)
        yield* commit(store, [Deliveries.claim(a!.ref, a!.value), Deliveries.claim(b!.ref, b!.value)])
        yield* commit(store, [Deliveries.retry({ ord: 1, seq: b!.ref.seq, sink: 0 }, Deliveries.freshRow(b!.value.size), NOW + 60_000)])

        yield* store.resetStats
        expect(yield* queue.pendingForSource("fixed", 1)).toEqual({ pending: 1, scheduled: 1, inflight: 1 })
        const stats = yield* store.stats
        // Tenant 1's due and inflight ranges only, and its hooks; never tenant 2's rows.
        expect(stats.scans).toEqual({ due: 1, inflight: 1 })
        expect(stats.pointReads).toEqual({ hooks: 5 })
        // A shared source folds every tenant's rows (O(backlog), documented).
        expect(yield* queue.pendingForSource("shared")).toEqual({ pending: 4, scheduled: 0, inflight: 0 })
        expect(yield* queue.pendingForSource("shared", 2)).toEqual({ pending: 2, scheduled: 0, inflight: 0 })
      })
    ))
})
