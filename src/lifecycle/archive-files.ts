/**
 * File operations of the archive (segments and their indexes under
 * `<dataDir>/archive/`): positional appends that cut the file to its
 * committed end first, fsync of files and of the directory, reads, and the
 * reader an operator uses to find a hook by seq or id. Formats:
 * src/domain/segment.ts.
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { promisify } from "node:util"
import * as zlib from "node:zlib"
import { Data, Effect } from "effect"
import { decodeEnvelope } from "../domain/envelope.js"
import {
  type ArchivedHook,
  decodeBlock,
  decodeIndex,
  HEADER_BYTES,
  INDEX_MAGIC,
  indexName,
  type IndexEntry,
  parseName,
  readFrame,
  scanFrames,
  SEGMENT_MAGIC,
  segmentName
} from "../domain/segment.js"

export class ArchiveError extends Data.TaggedError("ArchiveError")<{
  readonly op: string
  readonly path: string
  readonly message: string
}> {}

const attempt = <A>(op: string, p: string, f: () => Promise<A>): Effect.Effect<A, ArchiveError> =>
  Effect.tryPromise({ try: f, catch: (e) => new ArchiveError({ op, path: p, message: e instanceof Error ? e.message : String(e) }) })

const gzipAsync = promisify(zlib.gzip)
const gunzipAsync = promisify(zlib.gunzip)

/** gzip level: the default trades well between CPU (it runs on libuv's pool) and size. */
export const GZIP_LEVEL = 6

export const compress = (b: Buffer) => attempt("gzip", "", () => gzipAsync(b, { level: GZIP_LEVEL }))
export const decompress = (b: Buffer) => attempt("gunzip", "", () => gunzipAsync(b))

export const segmentPath = (dir: string, firstSeq: number) => path.join(dir, segmentName(firstSeq))
export const indexPath = (dir: string, firstSeq: number) => path.join(dir, indexName(firstSeq))

export const ensureDir = (dir: string) => attempt("mkdir", dir, () => fs.mkdir(dir, { recursive: true })).pipe(Effect.asVoid)

/** fsync a directory so that a file created or removed in it survives a crash. */
export const syncDir = (dir: string) =>
  Effect.acquireUseRelease(
    attempt("open", dir, () => fs.open(dir, "r")),
    (h) => attempt("fsync", dir, () => h.sync()),
    (h) => Effect.promise(() => h.close())
  )

/** Segment and index files, by firstSeq. */
export const listFiles = (dir: string) =>
  attempt("readdir", dir, () => fs.readdir(dir)).pipe(
    Effect.map((names) =>
      names
        .map((name) => ({ name, parsed: parseName(name) }))
        .flatMap(({ name, parsed }) => (parsed === undefined ? [] : [{ name, path: path.join(dir, name), ...parsed }]))
        .sort((a, b) => a.firstSeq - b.firstSeq || a.kind.localeCompare(b.kind))
    )
  )

export const readAll = (p: string) => attempt("read", p, () => fs.readFile(p))

export const exists = (p: string) =>
  attempt("stat", p, () => fs.stat(p).then(() => true, (e: NodeJS.ErrnoException) => (e.code === "ENOENT" ? false : Promise.reject(e))))

export const remove = (p: string) => attempt("unlink", p, () => fs.rm(p, { force: true }))

export const truncate = (p: string, len: number) => attempt("truncate", p, () => fs.truncate(p, len))

export const copy = (from: string, to: string) => attempt("copy", from, () => fs.copyFile(from, to))

/**
 * Write `bytes` at `at` after cutting the file to `at` (anything past the
 * committed end is an earlier, unsettled attempt), then fsync. With `create`,
 * the file starts over with its magic and `at` must be the header size.
 */
export const writeAt = (p: string, at: number, bytes: Buffer, create?: Buffer) =>
  Effect.acquireUseRelease(
    attempt("open", p, () => fs.open(p, create === undefined ? "r+" : "w")),
    (h) =>
      Effect.gen(function* () {
        if (create !== undefined) yield* attempt("write", p, () => h.write(create, 0, create.length, 0))
        else yield* attempt("truncate", p, () => h.truncate(at))
        yield* attempt("write", p, () => h.write(bytes, 0, bytes.length, at))
        yield* attempt("fsync", p, () => h.sync())
      }),
    (h) => Effect.promise(() => h.close())
  )

// ---------------------------------------------------------------------------
// Reading (operators, tests, the repair's index rebuild)

export interface SegmentRecord extends ArchivedHook {
  readonly frameOffset: number
}

/** Every record of a segment's good frames, up to `end` bytes when given (the committed end of the current segment). */
export const readSegment = (p: string, end?: number) =>
  Effect.gen(function* () {
    const all = yield* readAll(p)
    const buf = end === undefined ? all : all.subarray(0, end)
    const { frames } = scanFrames(buf, SEGMENT_MAGIC)
    const out: Array<SegmentRecord> = []
    for (const f of frames) {
      const block = decodeBlock(yield* decompress(f.payload))
      for (const r of block) out.push({ ...r, frameOffset: f.offset })
    }
    return out
  })

/** The index entries of one segment frame's records. */
export const indexEntriesOf = (records: ReadonlyArray<ArchivedHook>, frameOffset: number): Array<IndexEntry> =>
  records.map((r) => ({ seq: r.seq, frameOffset, id: decodeEnvelope(r.envelope)?.id ?? "" }))

export const readIndex = (p: string, end?: number) =>
  Effect.gen(function* () {
    const all = yield* readAll(p)
    const { frames } = scanFrames(end === undefined ? all : all.subarray(0, end), INDEX_MAGIC)
    return frames.flatMap((f) => decodeIndex(f.payload))
  })

/**
 * Find an archived hook by seq or by id through the segment indexes (newest
 * segment first for an id; for a seq, the segment whose range holds it
 * first). undefined when no segment holds it.
 */
export const find = (dir: string, q: { readonly seq: number } | { readonly id: string }) =>
  Effect.gen(function* () {
    const segments = (yield* listFiles(dir)).filter((f) => f.kind === "seg")
    const order =
      "seq" in q
        ? [...segments.filter((s) => s.firstSeq <= q.seq).reverse(), ...segments.filter((s) => s.firstSeq > q.seq)]
        : [...segments].reverse()
    for (const s of order) {
      const ip = indexPath(dir, s.firstSeq)
      if (!(yield* exists(ip))) continue
      const entry = (yield* readIndex(ip)).find((e) => ("seq" in q ? e.seq === q.seq : e.id === q.id))
      if (entry === undefined) continue
      const buf = yield* readAll(s.path)
      const f = readFrame(buf, entry.frameOffset)
      if (f._tag !== "frame") return yield* new ArchiveError({ op: "find", path: s.path, message: `no good frame at ${entry.frameOffset}` })
      const hit = decodeBlock(yield* decompress(f.payload)).find((r) => r.seq === entry.seq)
      if (hit !== undefined) return { ...hit, segment: s.name, frameOffset: entry.frameOffset }
    }
    return undefined
  })

export { HEADER_BYTES, INDEX_MAGIC, SEGMENT_MAGIC }
