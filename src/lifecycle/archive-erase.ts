/**
 * Erasing a tenant from the archive (TEN-5, "rewrite"): every segment that
 * holds a record of the tenant's ordinal is written again without them, to a
 * temporary file that is fsynced and renamed over the old one (index first,
 * then segment, then the directory fsynced). A segment left with no record is
 * removed. Run under the compactor's lock on closed segments only: the
 * archive seals its current segment first (archive.ts `eraseTenant`), so no
 * cursor offset points into a file that changes length.
 *
 * Idempotent: a rewrite cut short by a crash leaves either the old file or
 * the new one under each name (rename is atomic), and running it again finds
 * the tenant's records (old segment) or none (new one) and rebuilds the
 * index from the segment either way. Copies kept aside by the torn-tail
 * repair (`*.seg.damaged-<ms>`) are rewritten the same way (their good frames).
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Effect } from "effect"
import { decodeBlock, encodeBlock, encodeIndex, frame, HEADER_BYTES, INDEX_MAGIC, parseName, scanFrames, SEGMENT_MAGIC } from "../domain/segment.js"
import { ArchiveError, compress, decompress, indexEntriesOf, indexPath, readAll, remove, syncDir, writeAt } from "./archive-files.js"

const TMP = ".erase-tmp"

const rename = (from: string, to: string) =>
  Effect.tryPromise({ try: () => fs.rename(from, to), catch: (e) => new ArchiveError({ op: "rename", path: from, message: String(e) }) })

/** What the rewrite of one file did: the tenant's records it removed. */
export interface Rewritten {
  readonly records: number
}

/** The segment at `p` without the records of `ord`; its index at `idx` (none for a damaged copy). */
export const rewriteFile = (dir: string, p: string, ord: number, idx: string | undefined) =>
  Effect.gen(function* () {
    const buf = yield* readAll(p)
    const { frames, goodEnd } = scanFrames(buf, SEGMENT_MAGIC)
    let removed = 0
    const segParts: Array<Buffer> = []
    const idxParts: Array<Buffer> = []
    let offset = HEADER_BYTES
    for (const f of frames) {
      const block = decodeBlock(yield* decompress(f.payload))
      const kept = block.filter((r) => r.ord !== ord)
      removed += block.length - kept.length
      if (kept.length === 0) continue
      const seg = frame(kept.length === block.length ? f.payload : yield* compress(encodeBlock(kept)))
      idxParts.push(frame(encodeIndex(indexEntriesOf(kept, offset))))
      segParts.push(seg)
      offset += seg.length
    }
    // A file past its last good frame still holds bytes (a damaged tail): rewrite it too.
    const tail = buf.length > goodEnd
    if (removed === 0 && !tail) {
      // Nothing of the tenant; the index may still be an old one left by a crash between renames.
      if (idx !== undefined && (yield* needsIndex(idx, Buffer.concat(idxParts)))) yield* writeIndex(dir, idx, idxParts)
      return { records: 0 } satisfies Rewritten
    }
    if (segParts.length === 0) {
      if (idx !== undefined) yield* remove(idx)
      yield* remove(p)
      yield* syncDir(dir)
      return { records: removed } satisfies Rewritten
    }
    if (idx !== undefined) yield* writeIndex(dir, idx, idxParts)
    yield* writeAt(p + TMP, HEADER_BYTES, Buffer.concat(segParts), SEGMENT_MAGIC)
    yield* rename(p + TMP, p)
    yield* syncDir(dir)
    return { records: removed } satisfies Rewritten
  })

const needsIndex = (idx: string, expected: Buffer) =>
  readAll(idx).pipe(
    Effect.map((b) => !b.subarray(HEADER_BYTES).equals(expected)),
    Effect.catch(() => Effect.succeed(true))
  )

const writeIndex = (dir: string, idx: string, parts: ReadonlyArray<Buffer>) =>
  Effect.gen(function* () {
    yield* writeAt(idx + TMP, HEADER_BYTES, Buffer.concat(parts), INDEX_MAGIC)
    yield* rename(idx + TMP, idx)
    yield* syncDir(dir)
  })

/** The archive's files an erase visits, in name order: segments (with their index) and damaged copies; leftover temporaries are removed. */
export const eraseTargets = (dir: string) =>
  Effect.gen(function* () {
    const names = yield* Effect.tryPromise({
      try: () => fs.readdir(dir),
      catch: (e) => new ArchiveError({ op: "readdir", path: dir, message: String(e) })
    }).pipe(Effect.catch(() => Effect.succeed([] as Array<string>)))
    for (const n of names) if (n.endsWith(TMP)) yield* remove(path.join(dir, n))
    return names
      .filter((n) => !n.endsWith(TMP))
      .flatMap((n) => {
        const parsed = parseName(n)
        if (parsed?.kind === "seg") return [{ name: n, path: path.join(dir, n), index: indexPath(dir, parsed.firstSeq) as string | undefined }]
        if (/^[0-9a-f]{16}\.seg\.damaged-\d+$/.test(n)) return [{ name: n, path: path.join(dir, n), index: undefined }]
        return []
      })
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  })
