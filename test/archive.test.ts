import * as fs from "node:fs"
import { afterEach, describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Metric } from "effect"
import { TestClock } from "effect/testing"
import * as Deliveries from "../src/domain/deliveries.js"
import * as K from "../src/domain/keys.js"
import { HEADER_BYTES } from "../src/domain/segment.js"
import * as Archive from "../src/lifecycle/archive.js"
import { find, listFiles, readSegment } from "../src/lifecycle/archive-files.js"
import { archiveDropped, archiveHooks, withReason } from "../src/observability/lifecycle-metrics.js"
import { Store, type StoreShape } from "../src/store/store.js"
import { layerMemory, MemoryDb } from "../src/store/memory.js"
import { aggregate, allocAll, commit, envelopeOf, rmDir, rowsOf, tempDir } from "./lifecycle-helpers.js"
import * as Queue from "../src/queue/queue.js"

const dirs: Array<string> = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmDir(d)
})

const small = { segmentBytes: 3_000, blockBytes: 2_000, chunk: 7, enabled: true }

const withArchive = <A, E>(db: MemoryDb, dir: string, o: Partial<Archive.ArchiveOptions>, f: (a: Archive.ArchiveShape, store: StoreShape) => Effect.Effect<A, E, Store>) =>
  Effect.gen(function* () {
    const store = yield* Store
    const a = yield* Archive.make({ ...o, dir }).pipe(Effect.provideService(Queue.Queue, Queue.make(store)))
    return yield* f(a, store)
  }).pipe(Effect.provide(layerMemory({ db })))

/** Ingest hooks seq..seq+n-1 (archive on) at the clock's time; returns their envelopes by seq. */
const ingest = (store: StoreShape, first: number, n: number) =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const out = new Map<number, Uint8Array>()
    const ts: Array<Deliveries.Transition> = []
    for (let seq = first; seq < first + n; seq++) {
      const ord = 1 + (seq % 3)
      const env = envelopeOf(seq, ord, now, 1 + (seq % 2), 20 + ((seq * 37) % 300))
      out.set(seq, env)
      ts.push(Deliveries.ingest({ seq, ord, envelope: env, sinkCount: 1 + (seq % 2), at: now, archive: true }))
    }
    yield* commit(store, ts)
    return out
  })

/** Every record of every segment, in file order. */
const readAllSegments = (dir: string) =>
  Effect.gen(function* () {
    const segs = (yield* listFiles(dir)).filter((f) => f.kind === "seg")
    const records = []
    for (const s of segs) records.push(...(yield* readSegment(s.path)))
    return { segs, records }
  })

const counter = (m: Metric.Counter<number>) => Metric.value(m).pipe(Effect.map((s) => s.count))

describe("archive", () => {
  it.effect("archive segments hold every settled hook", () =>
    Effect.gen(function* () {
      const db = new MemoryDb()
      const dir = tempDir("archive")
      dirs.push(dir)
      const hooksBefore = yield* counter(archiveHooks)
      const retentionBefore = yield* counter(withReason(archiveDropped, "retention"))
      const expected = new Map<number, Uint8Array>()
      yield* withArchive(db, dir, small, (archive, store) =>
        Effect.gen(function* () {
          yield* store.write(allocAll(3), { sync: false })
          // Compaction interleaved with ingest.
          for (const [seq, env] of yield* ingest(store, 1, 40)) expected.set(seq, env)
          yield* archive.step
          yield* archive.step
          for (const [seq, env] of yield* ingest(store, 41, 80)) expected.set(seq, env)
          yield* archive.drain
          for (const [seq, env] of yield* ingest(store, 121, 9)) expected.set(seq, env)
          yield* archive.drain

          expect(yield* rowsOf(store, K.Families.archive)).toEqual([])
          expect((yield* aggregate(store)).archive_pending).toBe(0)
          const { segs, records } = yield* readAllSegments(dir)
          expect(segs.length).toBeGreaterThan(1)
          // Every settled hook exactly once, in seq order, byte for byte.
          expect(records.map((r) => r.seq)).toEqual([...expected.keys()])
          for (const r of records) {
            expect(Buffer.from(r.envelope).equals(Buffer.from(expected.get(r.seq)!))).toBe(true)
            expect(r.ord).toBe(1 + (r.seq % 3))
          }
          // Segments are named by their first seq and hold a seq range each.
          for (let i = 0; i < segs.length; i++) {
            const mine = records.filter((r) => r.seq >= segs[i]!.firstSeq && (i + 1 === segs.length || r.seq < segs[i + 1]!.firstSeq))
            expect(mine[0]!.seq).toBe(segs[i]!.firstSeq)
          }
          // The index finds each hook by seq and by id.
          for (const seq of [1, 2, 40, 41, 77, 120, 129]) {
            const bySeq = yield* find(dir, { seq })
            expect(bySeq?.seq).toBe(seq)
            expect(Buffer.from(bySeq!.envelope).equals(Buffer.from(expected.get(seq)!))).toBe(true)
            expect((yield* find(dir, { id: `hook_${seq}` }))?.seq).toBe(seq)
          }
          expect(yield* find(dir, { seq: 999 })).toBeUndefined()
          // The cursor covers exactly the current segment.
          const c = (yield* archive.cursor)!
          const last = segs[segs.length - 1]!
          expect(c.segment).toBe(last.firstSeq)
          expect(c.segmentEnd).toBe(fs.statSync(last.path).size)
          expect(c.lastSeq).toBe(129)
        })
      )
      expect((yield* counter(archiveHooks)) - hooksBefore).toBe(expected.size)

      // Reopened: nothing to repair, same cursor; retention drops the old obligations unwritten.
      yield* withArchive(db, dir, { ...small, retention: 60_000 }, (archive, store) =>
        Effect.gen(function* () {
          expect(archive.repair).toEqual({ repaired: 0, lost: 0 })
          yield* ingest(store, 130, 5)
          yield* TestClock.adjust(120_000)
          for (const [seq, env] of yield* ingest(store, 135, 3)) expected.set(seq, env)
          yield* archive.drain
          expect(yield* rowsOf(store, K.Families.archive)).toEqual([])
          expect((yield* aggregate(store)).archive_pending).toBe(0)
          const { records } = yield* readAllSegments(dir)
          expect(records.map((r) => r.seq)).toEqual([...expected.keys()])
        })
      )
      expect((yield* counter(withReason(archiveDropped, "retention"))) - retentionBefore).toBe(5)
    })
  )

  it.effect("an unsettled or damaged segment tail is cut at start and never trusted", () =>
    Effect.gen(function* () {
      const db = new MemoryDb()
      const dir = tempDir("archive-torn")
      dirs.push(dir)
      const expected = new Map<number, Uint8Array>()
      yield* withArchive(db, dir, small, (archive, store) =>
        Effect.gen(function* () {
          yield* store.write(allocAll(3), { sync: false })
          for (const [seq, env] of yield* ingest(store, 1, 30)) expected.set(seq, env)
          yield* archive.step
          // The next block reaches the file, but its settle fails: a tail past the cursor.
          db.failNextWrite = 1
          expect((yield* Effect.result(archive.step))._tag).toBe("Failure")
        })
      )
      const cursor1 = yield* withArchive(db, dir, small, (archive, store) =>
        Effect.gen(function* () {
          expect(archive.repair.repaired).toBeGreaterThan(0)
          expect(archive.repair.lost).toBe(0)
          const c = (yield* archive.cursor)!
          expect(fs.statSync(`${dir}/${c.segment.toString(16).padStart(16, "0")}.seg`).size).toBe(c.segmentEnd)
          yield* archive.drain
          const { records } = yield* readAllSegments(dir)
          expect(records.map((r) => r.seq)).toEqual([...expected.keys()])
          expect((yield* aggregate(store)).archive_pending).toBe(0)
          return (yield* archive.cursor)!
        })
      )
      // Disk damage inside the committed part: cut at the last good frame, a copy kept, reported as lost.
      const seg = `${dir}/${cursor1.segment.toString(16).padStart(16, "0")}.seg`
      const bytes = fs.readFileSync(seg)
      expect(bytes.length).toBeGreaterThan(HEADER_BYTES + 20)
      bytes[bytes.length - 3] = bytes[bytes.length - 3]! ^ 0xff
      fs.writeFileSync(seg, bytes)
      yield* withArchive(db, dir, small, (archive, store) =>
        Effect.gen(function* () {
          expect(archive.repair.lost).toBe(1)
          expect(fs.readdirSync(dir).some((n) => n.includes(".damaged-"))).toBe(true)
          const c = (yield* archive.cursor)!
          expect(c.segmentEnd).toBeLessThan(cursor1.segmentEnd)
          expect(fs.statSync(seg).size).toBe(c.segmentEnd)
          // The index was rebuilt to match: every entry resolves.
          const { records } = yield* readAllSegments(dir)
          for (const r of records.slice(-3)) expect((yield* find(dir, { seq: r.seq }))?.seq).toBe(r.seq)
          // And compaction continues after the good prefix.
          for (const [seq, env] of yield* ingest(store, 31, 5)) expected.set(seq, env)
          yield* archive.drain
          const after = yield* readAllSegments(dir)
          expect(after.records.slice(-5).map((r) => r.seq)).toEqual([31, 32, 33, 34, 35])
        })
      )
    })
  )
})
