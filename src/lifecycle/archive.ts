/**
 * The archive and its compactor (product.md "Archive and reclaim"; TEN-1 §4
 * archive_pending). With `archive.enabled`, ingest writes an obligation
 * `?a <<seq>>` per hook; the compactor reads obligations in seq order, writes
 * their hooks as one compressed, CRC-framed block appended to the current
 * segment under `<dataDir>/archive/`, fsyncs it, and only then settles the
 * obligations in ONE synced batch together with its progress cursor. So a
 * segment byte past the cursor was never settled: at start it is cut off
 * (its obligations are still in the store and get written again), and a
 * committed frame that fails its CRC is cut with its successors, kept aside
 * and reported. Retention drops obligations too old to be worth archiving
 * (and, with the archive off, every leftover obligation once old enough).
 */
import * as path from "node:path"
import { Clock, Context, Duration, Effect, Layer, Metric, Semaphore } from "effect"
import { decodeEnvelope } from "../domain/envelope.js"
import * as K from "../domain/keys.js"
import { put } from "../domain/ops.js"
import {
  type ArchivedHook,
  type Cursor,
  decodeBlock,
  decodeCursor,
  decodeIndex,
  encodeBlock,
  encodeCursor,
  encodeIndex,
  frame,
  HEADER_BYTES,
  INDEX_MAGIC,
  scanFrames,
  SEGMENT_MAGIC
} from "../domain/segment.js"
import {
  ArchiveError,
  compress,
  copy,
  decompress,
  ensureDir,
  indexEntriesOf,
  indexPath,
  listFiles,
  readAll,
  readSegment,
  remove,
  segmentPath,
  syncDir,
  truncate,
  writeAt
} from "./archive-files.js"
import { archiveCompactions, archiveDropped, archiveFramesLost, archiveHooks, archiveRepairs, withReason } from "../observability/lifecycle-metrics.js"
import { type Obligation, Queue } from "../queue/queue.js"
import { eraseTargets, rewriteFile } from "./archive-erase.js"
import { scheduled } from "./scheduled.js"
import { Store, type StoreError, type StoreShape } from "../store/store.js"

export interface ArchiveOptions {
  /** Whether ingest writes obligations and the compactor writes segments. */
  readonly enabled: boolean
  /** Where segments live: `<dataDir>/archive`. */
  readonly dir: string
  /** A segment past this size is closed; the next block starts a new one. */
  readonly segmentBytes: number
  /** Most hook bytes (uncompressed) in one block, i.e. one compactor step. */
  readonly blockBytes: number
  /** Most obligations read per step. */
  readonly chunk: number
  /** Obligations of hooks received longer ago than this are dropped unwritten (counted). */
  readonly retention: Duration.Input
  readonly compactInterval: Duration.Input
}

export const ArchiveDefaults: Omit<ArchiveOptions, "dir"> = {
  enabled: false,
  segmentBytes: 64 * 1024 * 1024,
  blockBytes: 4 * 1024 * 1024,
  chunk: 1_000,
  retention: Duration.days(7),
  compactInterval: Duration.seconds(5)
}

/** `<dataDir>/archive`. */
export const archiveDir = (dataDir: string) => path.join(dataDir, "archive")

export interface StepResult {
  readonly archived: number
  readonly dropped: number
  /** Obligations left behind this step (the archive is off and they are young): none is due now. */
  readonly idle: boolean
}

export interface RepairReport {
  /** Uncommitted tails cut and uncommitted files removed. */
  readonly repaired: number
  /** Committed frames that failed their CRC (the segment was cut there and a copy kept). */
  readonly lost: number
}

export interface ArchiveShape {
  /** One compactor step: at most `chunk` obligations and `blockBytes` of hooks. */
  readonly step: Effect.Effect<StepResult, StoreError | ArchiveError>
  /** Steps until no obligation is due (tests, the soak, an operator's flush). */
  readonly drain: Effect.Effect<{ readonly archived: number; readonly dropped: number }, StoreError | ArchiveError>
  readonly cursor: Effect.Effect<Cursor | undefined>
  /** What the start-up check found. */
  readonly repair: RepairReport
  readonly dir: string
  /** Run `effect` with no compactor step in between (TEN-5: an erase drops a tenant's obligations in it). */
  readonly exclusive: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * TEN-5: rewrite every archive file past `after` (a file name; null: from the first) without the
   * records of `ord` (archive-erase.ts), calling `done` after each file. The current segment is
   * sealed first when it holds the tenant, so the next block starts a new segment.
   */
  readonly eraseTenant: <E, R>(
    ord: number,
    after: string | null,
    done: (file: string, records: number) => Effect.Effect<void, E, R>
  ) => Effect.Effect<void, E | StoreError | ArchiveError, R>
}

export class Archive extends Context.Service<Archive, ArchiveShape>()("ankusa/Archive") {}

const CURSOR_KEY = K.Meta.cursor("archive")

const readCursor = (store: StoreShape) =>
  store.get("default", CURSOR_KEY).pipe(Effect.map((v) => (v === undefined ? undefined : decodeCursor(v))))

const writeCursor = (store: StoreShape, c: Cursor) => store.write([put("default", CURSOR_KEY, encodeCursor(c))], { sync: true })

/** Rebuild a segment's index from its frames (the index is derived data). Returns its new end. */
const rebuildIndex = (dir: string, firstSeq: number, frames: ReadonlyArray<{ readonly offset: number; readonly payload: Buffer }>) =>
  Effect.gen(function* () {
    const parts: Array<Buffer> = []
    for (const f of frames) parts.push(frame(encodeIndex(indexEntriesOf(decodeBlock(yield* decompress(f.payload)), f.offset))))
    const body = Buffer.concat(parts)
    yield* writeAt(indexPath(dir, firstSeq), HEADER_BYTES, body, INDEX_MAGIC)
    return HEADER_BYTES + body.length
  })

/**
 * Start-up check of the archive directory against the committed cursor:
 * files past the cursor's segment are removed, the current segment and its
 * index are cut to their committed ends, and the committed part is verified
 * frame by frame. Never trusts a byte the cursor does not cover.
 */
export const repairArchive = (store: StoreShape, dir: string) =>
  Effect.gen(function* () {
    yield* ensureDir(dir)
    let cursor = yield* readCursor(store)
    let repaired = 0
    let lost = 0
    const files = yield* listFiles(dir)
    for (const f of files) {
      if (cursor === undefined || f.firstSeq > cursor.segment) {
        yield* Effect.logWarning("archive: removing an uncommitted file", { file: f.name })
        yield* remove(f.path)
        repaired++
      }
    }
    if (cursor !== undefined && cursor.segmentEnd > 0) {
      const sp = segmentPath(dir, cursor.segment)
      const seg = yield* readAll(sp).pipe(Effect.catch(() => Effect.succeed(Buffer.alloc(0))))
      if (seg.length > cursor.segmentEnd) {
        yield* Effect.logWarning("archive: cutting a segment's uncommitted tail", { segment: sp, committed: cursor.segmentEnd, size: seg.length })
        yield* truncate(sp, cursor.segmentEnd)
        repaired++
      }
      const committed = seg.subarray(0, cursor.segmentEnd)
      const scan = scanFrames(committed, SEGMENT_MAGIC)
      let segmentEnd = cursor.segmentEnd
      if (scan.goodEnd !== cursor.segmentEnd) {
        // Committed bytes that are missing or fail their CRC: keep a copy, cut there, and say so loudly.
        lost++
        if (seg.length > 0) yield* copy(sp, `${sp}.damaged-${yield* Clock.currentTimeMillis}`)
        yield* Effect.logError("archive: committed segment bytes are damaged; cutting the segment at the last good frame", {
          segment: sp,
          committed: cursor.segmentEnd,
          goodEnd: scan.goodEnd,
          stop: scan.stop
        })
        if (scan.goodEnd >= HEADER_BYTES) {
          yield* truncate(sp, scan.goodEnd)
          segmentEnd = scan.goodEnd
        } else {
          yield* remove(sp)
          segmentEnd = 0
        }
      }
      // The index: cut to its committed end; rebuild from the segment if it does not match it.
      const ip = indexPath(dir, cursor.segment)
      const idx = yield* readAll(ip).pipe(Effect.catch(() => Effect.succeed(Buffer.alloc(0))))
      let indexEnd = cursor.indexEnd
      const iscan = scanFrames(idx.subarray(0, cursor.indexEnd), INDEX_MAGIC)
      const entries = iscan.frames.flatMap((f) => decodeIndex(f.payload))
      const frameOffsets = new Set(scan.frames.map((f) => f.offset))
      const indexOk =
        segmentEnd === cursor.segmentEnd && iscan.goodEnd === cursor.indexEnd && entries.every((e) => frameOffsets.has(e.frameOffset))
      if (segmentEnd === 0) {
        yield* remove(ip)
        indexEnd = 0
      } else if (!indexOk) {
        yield* Effect.logWarning("archive: rebuilding a segment index", { index: ip })
        indexEnd = yield* rebuildIndex(dir, cursor.segment, scan.frames)
        repaired++
      } else if (idx.length > cursor.indexEnd) {
        yield* truncate(ip, cursor.indexEnd)
        repaired++
      }
      if (segmentEnd !== cursor.segmentEnd || indexEnd !== cursor.indexEnd) {
        cursor = { ...cursor, segmentEnd, indexEnd }
        yield* writeCursor(store, cursor)
      }
    }
    yield* syncDir(dir)
    if (repaired > 0) yield* Metric.update(archiveRepairs, repaired)
    if (lost > 0) yield* Metric.update(archiveFramesLost, lost)
    return { cursor, report: { repaired, lost } }
  })

/** Test seams (the crash test stops the compactor between the fsync of a block and its settle). */
export interface ArchiveSeams {
  readonly afterAppend?: Effect.Effect<void>
}

export const make = (options: Partial<ArchiveOptions> & { readonly dir: string }, seams: ArchiveSeams = {}) =>
  Effect.gen(function* () {
    const o: ArchiveOptions = { ...ArchiveDefaults, ...options }
    const store = yield* Store
    const queue = yield* Queue
    const retentionMs = Duration.toMillis(o.retention)
    const start = yield* repairArchive(store, o.dir)
    let cursor = start.cursor
    const lock = yield* Semaphore.make(1)

    /** Append one block; returns the cursor that covers it (not yet committed). */
    const append = (hooks: ReadonlyArray<ArchivedHook>) =>
      Effect.gen(function* () {
        const payload = yield* compress(encodeBlock(hooks))
        const segFrame = frame(payload)
        const lastSeq = Math.max(cursor?.lastSeq ?? 0, ...hooks.map((h) => h.seq))
        const fresh = cursor === undefined || cursor.segmentEnd === 0 || cursor.segmentEnd >= o.segmentBytes
        if (fresh) {
          // Never a name at or below the current one (a sealed segment keeps its name, TEN-5).
          const firstSeq = Math.max(hooks[0]!.seq, cursor === undefined ? 0 : cursor.segment + 1)
          // Leftovers of an earlier unsettled attempt at a new segment.
          for (const f of yield* listFiles(o.dir)) if (cursor === undefined || f.firstSeq > cursor.segment) yield* remove(f.path)
          yield* writeAt(segmentPath(o.dir, firstSeq), HEADER_BYTES, segFrame, SEGMENT_MAGIC)
          const idxFrame = frame(encodeIndex(indexEntriesOf(hooks, HEADER_BYTES)))
          yield* writeAt(indexPath(o.dir, firstSeq), HEADER_BYTES, idxFrame, INDEX_MAGIC)
          yield* syncDir(o.dir)
          return { segment: firstSeq, segmentEnd: HEADER_BYTES + segFrame.length, indexEnd: HEADER_BYTES + idxFrame.length, lastSeq }
        }
        const c = cursor!
        yield* writeAt(segmentPath(o.dir, c.segment), c.segmentEnd, segFrame)
        const idxFrame = frame(encodeIndex(indexEntriesOf(hooks, c.segmentEnd)))
        yield* writeAt(indexPath(o.dir, c.segment), c.indexEnd, idxFrame)
        return { segment: c.segment, segmentEnd: c.segmentEnd + segFrame.length, indexEnd: c.indexEnd + idxFrame.length, lastSeq }
      })

    const step = lock.withPermits(1)(
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const page = yield* queue.archiveObligations(o.chunk)
        if (page.length === 0) return { archived: 0, dropped: 0, idle: true }
        // A prefix within the block byte budget (at least one).
        const obligations: Array<Obligation> = []
        let bytes = 0
        for (const ob of page) {
          if (obligations.length > 0 && bytes + ob.size > o.blockBytes) break
          bytes += ob.size
          obligations.push(ob)
        }
        const found = yield* store.multiGet("hooks", obligations.map((ob) => K.hookKey(ob.seq)))
        const write: Array<ArchivedHook> = []
        const settle: Array<Obligation> = []
        let missing = 0
        let old = 0
        let idle = false
        for (let i = 0; i < obligations.length; i++) {
          const ob = obligations[i]!
          const envelope = found[i]
          if (envelope === undefined) {
            missing++
            settle.push(ob)
            continue
          }
          // An envelope that does not decode has no age: archived if on, dropped if off.
          const receivedAt = decodeEnvelope(envelope)?.receivedAt ?? 0
          if (receivedAt < now - retentionMs) {
            old++
            settle.push(ob)
          } else if (o.enabled) {
            write.push({ seq: ob.seq, ord: ob.ord, envelope })
            settle.push(ob)
          } else {
            // Off: younger obligations wait for retention (in seq order, so all the rest are younger too).
            idle = true
            break
          }
        }
        if (settle.length === 0) return { archived: 0, dropped: 0, idle: true }
        const next = write.length > 0 ? yield* append(write) : cursor
        if (write.length > 0 && seams.afterAppend !== undefined) yield* seams.afterAppend
        // TEN-1 §4: the settle (archive_pending −1) and the cursor commit together, synced.
        const extra = next === undefined ? [] : [put("default", CURSOR_KEY, encodeCursor(next))]
        yield* queue.settleArchive(settle, extra)
        cursor = next
        if (write.length > 0) {
          yield* Metric.update(archiveCompactions, 1)
          yield* Metric.update(archiveHooks, write.length)
        }
        if (old > 0) yield* Metric.update(withReason(archiveDropped, "retention"), old)
        if (missing > 0) yield* Metric.update(withReason(archiveDropped, "missing"), missing)
        return { archived: write.length, dropped: old + missing, idle }
      })
    )

    const drain = Effect.gen(function* () {
      let archived = 0
      let dropped = 0
      for (;;) {
        const r = yield* step
        archived += r.archived
        dropped += r.dropped
        if (r.idle || r.archived + r.dropped === 0) return { archived, dropped }
      }
    })

    const sealIfHolds = (ord: number) =>
      Effect.gen(function* () {
        const c = cursor
        if (c === undefined || c.segmentEnd === 0) return
        const records = yield* readSegment(segmentPath(o.dir, c.segment), c.segmentEnd)
        if (!records.some((r) => r.ord === ord)) return
        // Cut what no cursor covers, then point the cursor past the segment: it is closed from now on.
        yield* truncate(segmentPath(o.dir, c.segment), c.segmentEnd)
        yield* truncate(indexPath(o.dir, c.segment), c.indexEnd)
        const sealed = { ...c, segmentEnd: 0, indexEnd: 0 }
        yield* writeCursor(store, sealed)
        cursor = sealed
      })

    const eraseTenant = <E, R>(ord: number, after: string | null, done: (file: string, records: number) => Effect.Effect<void, E, R>) =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          yield* ensureDir(o.dir)
          yield* sealIfHolds(ord)
          for (const f of yield* eraseTargets(o.dir)) {
            if (after !== null && f.name <= after) continue
            const r = yield* rewriteFile(o.dir, f.path, ord, f.index)
            yield* done(f.name, r.records)
          }
        })
      )

    return {
      step,
      drain,
      cursor: Effect.sync(() => cursor),
      repair: start.report,
      dir: o.dir,
      exclusive: lock.withPermits(1),
      eraseTenant
    } satisfies ArchiveShape
  })

/** The service; building it runs the start-up repair. */
export const layer = (options: Partial<ArchiveOptions> & { readonly dir: string }): Layer.Layer<Archive, StoreError | ArchiveError, Store | Queue> =>
  Layer.effect(Archive, make(options))

/** The compactor: drains what is due every `compactInterval`; a scoped fiber, interrupted at shutdown. */
export const layerCompactor = (options: Partial<Pick<ArchiveOptions, "compactInterval">> = {}): Layer.Layer<never, never, Archive> =>
  scheduled(Archive, "archive compaction", options.compactInterval ?? ArchiveDefaults.compactInterval, (a) => a.drain)
