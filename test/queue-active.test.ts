import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Deliveries from "../src/domain/deliveries.js"
import * as K from "../src/domain/keys.js"
import type { Op } from "../src/domain/ops.js"
import { checkStore } from "../src/queue/format/check.js"
import type { QueueShape } from "../src/queue/queue.js"
import type { StoreShape } from "../src/store/store.js"
import { allocAll, commit, envelope, memory } from "./queue-helpers.js"

const NOW = 1_700_000_000_500
const B = K.bucketOf(NOW)

const run = <A, E>(f: (s: { readonly store: StoreShape; readonly queue: QueueShape }) => Effect.Effect<A, E>) =>
  Effect.runPromise(Effect.flatMap(memory, f))

/** A delivery row due at `at` for tenant `ord` (a one-sink hook), as a writer commits it: row, due, marker, counters. */
const enqueue = (store: StoreShape, ord: number, seq: number, at: number, extra: ReadonlyArray<Op> = []) =>
  commit(store, [Deliveries.ingest({ seq, ord, envelope: envelope({ id: `h${seq}`, tenant: `t${ord}` }), sinkCount: 1, at, archive: false })], extra)

const claimFirst = (store: StoreShape, queue: QueueShape, ord: number) =>
  Effect.gen(function* () {
    const first = yield* queue.firstDue(ord)
    if (first === undefined) return undefined
    yield* commit(store, [Deliveries.claim(first.ref, first.value)])
    return first
  })

/** Due rows whose marker is missing. */
const missingMarkers = (store: StoreShape) =>
  Effect.gen(function* () {
    const due = yield* store.scan("index", K.familyDataRange(K.Families.due), { limit: 100_000 })
    const refs = due.map((e) => K.decodeDueKey(e.key))
    const found = yield* store.multiGet("index", refs.map((r) => Deliveries.markerKey(K.bucketOf(r.at), r.ord)))
    return refs.filter((_, i) => found[i] === undefined)
  })

const markerBuckets = (store: StoreShape, ord: number) =>
  store
    .scan("index", K.familyDataRange(K.Families.active), { limit: 100_000 })
    .pipe(Effect.map((rows) => rows.map((e) => K.decodeActiveKey(e.key)).filter((m) => m.ord === ord).map((m) => m.bucket)))

/** The pipeline's visit without claims: scan the index, clean every tenant it returned. */
const cleanupPass = (queue: QueueShape, now: number) =>
  Effect.gen(function* () {
    for (const a of yield* queue.activeTenants(now)) yield* queue.cleanupMarkers(a.ord, now, a.buckets)
  })

describe("the active index", () => {
  it("cleanup does not lose a marker to a concurrent enqueue", () =>
    Effect.runPromise(
      Effect.gen(function* () {
        // Writers' rows land in seconds whose (stale) markers the cleanup is about to delete:
        // one writer, two writers in two such seconds, and one in the current second.
        const scenarios: ReadonlyArray<ReadonlyArray<number>> = [[B - 2], [B - 3, B - 1], [B], [B - 1, B + 2]]
        const points = ["before step 1", "between steps 1 and 2", "between steps 2 and 3", "after step 3"] as const
        let cases = 0
        for (const writes of scenarios) {
          for (const point of points) {
            const { store, queue } = yield* memory
            yield* store.write(allocAll(1), { sync: false })
            // Tenant 1 had rows at B-3, B-2, B-1 and B (this second), all claimed since: four stale markers.
            let seq = 1
            for (const b of [B - 3, B - 2, B - 1, B]) yield* enqueue(store, 1, seq++, b * 1000 + 100)
            for (let i = 0; i < 4; i++) yield* claimFirst(store, queue, 1)
            const [active] = yield* queue.activeTenants(NOW)
            expect(active).toEqual({ ord: 1, bucket: B - 3, buckets: [B - 3, B - 2, B - 1, B] })

            const writer = Effect.forEach(writes, (b) => enqueue(store, 1, seq++, b * 1000 + 400), { discard: true })
            if (point === "before step 1") yield* writer
            const result = yield* queue.cleanupMarkers(1, NOW, active!.buckets, {
              between: (p) =>
                (p === "first" && point === "between steps 1 and 2") || (p === "delete" && point === "between steps 2 and 3") ? writer : Effect.void
            })
            if (point === "after step 3") yield* writer

            // TEN-1 §5: no interleaving leaves a due row without its marker…
            expect(yield* missingMarkers(store), `${point}, writes at ${writes.map((b) => b - B)}`).toEqual([])
            // …and the cleanup still did its job: where no writer put a row at B-3, its stale marker is gone.
            // TEN-1 §5: a marker of the current second is never deleted.
            expect(yield* markerBuckets(store, 1)).toContain(B)
            expect(result.deleted).not.toContain(B)
            if (!writes.includes(B - 3)) {
              expect(result.deleted).toContain(B - 3)
              expect(yield* markerBuckets(store, 1)).not.toContain(B - 3)
            }
            expect((yield* checkStore(store)).differences).toEqual([])
            cases++
          }
        }
        expect(cases).toBe(scenarios.length * points.length)
      })
    ))

  it("a cleanup whose step 1 starts above a late row puts that row's marker back", () =>
    run(({ store, queue }) =>
      Effect.gen(function* () {
        yield* store.write(allocAll(1), { sync: false })
        // Tenant 1: a row at B-4 claimed (a stale marker), a row a late commit left at B-3, rows at B-1 and B.
        yield* enqueue(store, 1, 1, (B - 4) * 1000 + 100)
        yield* claimFirst(store, queue, 1)
        yield* enqueue(store, 1, 2, (B - 3) * 1000 + 100)
        yield* enqueue(store, 1, 3, (B - 1) * 1000 + 100)
        yield* enqueue(store, 1, 4, B * 1000 + 100)
        // The caller's step 1 starts at B-1 (where it believes the first due row lies): the read misses B-3.
        const [result] = yield* queue.cleanupMarkersOf([{ ord: 1, markers: [B - 4, B - 3, B - 1, B], from: (B - 1) * 1000 }], NOW)
        expect(result!.first?.ref.seq).toBe(3)
        // Step 2 deleted both markers below B-1; step 3 put back the one whose second still holds a row.
        expect(result!.deleted).toEqual([B - 4, B - 3])
        expect(result!.restored).toEqual([B - 3])
        expect(yield* missingMarkers(store)).toEqual([])
        expect(yield* markerBuckets(store, 1)).toEqual([B - 3, B - 1, B])
        expect((yield* checkStore(store)).differences).toEqual([])
      })
    ))

  it("active_tenants returns only tenants with due rows", () =>
    run(({ store, queue }) =>
      Effect.gen(function* () {
        yield* store.write(allocAll(7), { sync: false })
        let seq = 1
        // t1: due in two past seconds; t2: due this second; t5: due in an hour; t6: nothing ever.
        yield* enqueue(store, 1, seq++, NOW - 2000)
        yield* enqueue(store, 1, seq++, NOW - 500)
        yield* enqueue(store, 2, seq++, NOW)
        yield* enqueue(store, 5, seq++, NOW + 3_600_000)
        // t3: claimed (inflight only); t4: dead only; t7: delivered. Their markers are stale now.
        for (const ord of [3, 4, 7]) {
          const s = seq++
          yield* enqueue(store, ord, s, NOW - 1500)
          yield* claimFirst(store, queue, ord)
          const f: K.InflightRef = { ord, seq: s, sink: 0 }
          if (ord === 4) yield* commit(store, [Deliveries.deadLetter(f, Deliveries.freshRow(1), NOW - 1000, { sourceId: "src", id: `h${s}` })])
          if (ord === 7) yield* commit(store, [Deliveries.delivered(f, envelope({ id: `h${s}`, tenant: `t${ord}` }).length)])
        }
        // Before the pipeline's cleanup the stale markers still answer; after it only tenants with due rows do.
        expect((yield* queue.activeTenants(NOW)).map((a) => a.ord).sort()).toEqual([1, 2, 3, 4, 7])
        yield* cleanupPass(queue, NOW)

        // The truth, from a fold of the due family: tenants with a row due by now, by their oldest second.
        const foldActive = (now: number) =>
          store.scan("index", K.familyDataRange(K.Families.due), { limit: 100_000 }).pipe(
            Effect.map((rows) => {
              const oldest = new Map<number, number>()
              for (const r of rows.map((e) => K.decodeDueKey(e.key))) {
                if (r.at > now) continue
                const b = K.bucketOf(r.at)
                if (!oldest.has(r.ord) || b < oldest.get(r.ord)!) oldest.set(r.ord, b)
              }
              return [...oldest].sort((a, b) => a[1] - b[1] || a[0] - b[0]).map(([ord, bucket]) => ({ ord, bucket }))
            })
          )
        const active = yield* queue.activeTenants(NOW)
        expect(active.map((a) => ({ ord: a.ord, bucket: a.bucket }))).toEqual(yield* foldActive(NOW))
        expect(active).toEqual([
          { ord: 1, bucket: K.bucketOf(NOW - 2000), buckets: [K.bucketOf(NOW - 2000), K.bucketOf(NOW - 500)] },
          { ord: 2, bucket: B, buckets: [B] }
        ])
        // The limit counts distinct tenants, oldest first.
        expect((yield* queue.activeTenants(NOW, 1)).map((a) => a.ord)).toEqual([1])
        // An hour later t5's row is due too.
        const later = NOW + 3_600_000
        expect((yield* queue.activeTenants(later)).map((a) => ({ ord: a.ord, bucket: a.bucket }))).toEqual(yield* foldActive(later))
        expect((yield* queue.activeTenants(later)).map((a) => a.ord)).toEqual([1, 2, 5])
      })
    ))

  it("a tick visits only tenants with work", () =>
    run(({ store, queue }) =>
      Effect.gen(function* () {
        const TENANTS = 1000
        const WORKING = [17, 503, 998]
        yield* store.write(allocAll(TENANTS), { sync: false })
        // Every tenant has rows: three are due now; of the others, odd ones are scheduled a day
        // ahead and even ones are dead (ingested a minute ago, claimed, dead-lettered).
        const ingest: Array<Deliveries.Transition> = []
        for (let ord = 1; ord <= TENANTS; ord++) {
          const at = WORKING.includes(ord) ? NOW - 5000 + ord : ord % 2 === 1 ? NOW + 86_400_000 : NOW - 60_000
          ingest.push(Deliveries.ingest({ seq: ord, ord, envelope: envelope({ id: `h${ord}`, tenant: `t${ord}` }), sinkCount: 1, at, archive: false }))
        }
        yield* commit(store, ingest)
        const dead: Array<Deliveries.Transition> = []
        for (let ord = 2; ord <= TENANTS; ord += 2) {
          if (WORKING.includes(ord)) continue
          const first = (yield* queue.firstDue(ord))!
          const size = first.value.size
          dead.push(Deliveries.claim(first.ref, first.value))
          dead.push(Deliveries.deadLetter({ ord, seq: ord, sink: 0 }, Deliveries.freshRow(size), NOW - 30_000, { sourceId: "src", id: `h${ord}` }))
        }
        yield* commit(store, dead)
        // The previous tick's cleanup removed the dead tenants' stale markers.
        yield* cleanupPass(queue, NOW)
        expect((yield* checkStore(store)).differences).toEqual([])

        yield* store.resetStats
        const visited: Array<number> = []
        let rows = 0
        for (const a of yield* queue.activeTenants(NOW)) {
          visited.push(a.ord)
          rows += (yield* queue.dueForTenant(a.ord, NOW, 0, 100, 1_000_000)).length
        }
        const stats = yield* store.stats
        expect(visited).toEqual(WORKING)
        expect(rows).toBe(WORKING.length)
        // One page of the active index, one due scan per visited tenant: no other tenant's range was read.
        expect(stats.scans).toEqual({ active: 1, due: WORKING.length })
        expect(stats.pointReads).toEqual({})
      })
    ))

  it("oldest due age comes from the active index", () =>
    run(({ store, queue }) =>
      Effect.gen(function* () {
        yield* store.write(allocAll(60), { sync: false })
        // t1's row (9 s old) was claimed: its marker is stale. t2 has the oldest due row (7.25 s); t3 a younger one.
        yield* enqueue(store, 1, 1, NOW - 9000)
        yield* claimFirst(store, queue, 1)
        yield* enqueue(store, 2, 2, NOW - 7250)
        yield* enqueue(store, 3, 3, NOW - 1000)
        yield* enqueue(store, 4, 4, NOW + 60_000)

        const truth = (now: number) =>
          store.scan("index", K.familyDataRange(K.Families.due), { limit: 100_000 }).pipe(
            Effect.map((rows) => Math.max(0, ...rows.map((e) => now - K.decodeDueKey(e.key).at)))
          )
        yield* store.resetStats
        const age = yield* queue.oldestDueAge(NOW)
        const stats = yield* store.stats
        expect(age).toBe(7250)
        expect(age).toBe(yield* truth(NOW))
        // One read of the first markers, then one seek per marker verified (t1's stale one, then t2's).
        expect(stats.scans).toEqual({ active: 1, due: 2 })
        expect(stats.pointReads).toEqual({})

        // Forty tenants with older stale markers: after 32 it stops verifying and reports the bucket start.
        for (let ord = 11; ord <= 50; ord++) {
          yield* enqueue(store, ord, 100 + ord, NOW - 100_000 + ord * 1000)
          yield* claimFirst(store, queue, ord)
        }
        yield* store.resetStats
        const capped = yield* queue.oldestDueAge(NOW)
        const s2 = yield* store.stats
        const thirtyThird = K.bucketOf(NOW - 100_000 + (11 + 32) * 1000)
        expect(capped).toBe(NOW - thirtyThird * 1000)
        expect(s2.scans).toEqual({ active: 1, due: 32 })

        // The cleanup removes the stale markers and the exact age is back; nothing due at all is 0.
        yield* cleanupPass(queue, NOW)
        expect(yield* queue.oldestDueAge(NOW)).toBe(7250)
        for (const ord of [2, 3]) yield* claimFirst(store, queue, ord)
        yield* cleanupPass(queue, NOW)
        yield* store.resetStats
        expect(yield* queue.oldestDueAge(NOW)).toBe(0)
        // Only t4's future marker is left: no verification seek is needed to know nothing is due.
        expect((yield* store.stats).scans).toEqual({ active: 1 })
      })
    ))
})
