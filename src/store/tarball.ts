/**
 * A store directory as a `.tar.zst` archive (store fixtures, TEN-1 §7): a
 * minimal ustar writer and reader of our own (regular files and directories
 * only; sorted names, zero mtime and owner, so the same files give the same
 * bytes) and zstd through a WASM build (Node 20's zlib has no zstd).
 * Archive the store only after closing it: RocksDB's files are consistent then.
 */
import { compress, decompress, init } from "@bokuweb/zstd-wasm"
import { Data, Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

/** Largest archive unpacked (compressed or not): fixtures are KBs; a bound, not a target. */
export const MAX_ARCHIVE_BYTES = 256 * 1024 * 1024
/** zstd level of fixtures: small files, so the best ratio costs nothing. */
export const ZSTD_LEVEL = 19
/** RocksDB files an archive leaves out: the lock and the informational logs. */
const SKIP = (name: string) => name === "LOCK" || name === "LOG" || name.startsWith("LOG.old")

export class ArchiveError extends Data.TaggedError("ArchiveError")<{ readonly path: string; readonly message: string }> {}

let ready: Promise<void> | undefined
const zstd = Effect.promise(() => (ready ??= init()))

const BLOCK = 512

const octal = (n: number, width: number): string => n.toString(8).padStart(width - 1, "0") + "\0"

const header = (name: string, size: number, type: "0" | "5"): Buffer => {
  const h = Buffer.alloc(BLOCK)
  if (Buffer.byteLength(name) > 100) throw new Error(`tar: name longer than 100 bytes: ${name}`)
  h.write(name, 0, 100, "utf8")
  h.write(octal(type === "5" ? 0o755 : 0o644, 8), 100, "ascii")
  h.write(octal(0, 8), 108, "ascii")
  h.write(octal(0, 8), 116, "ascii")
  h.write(octal(size, 12), 124, "ascii")
  h.write(octal(0, 12), 136, "ascii")
  h.write(type, 156, "ascii")
  h.write("ustar\0", 257, "ascii")
  h.write("00", 263, "ascii")
  h.fill(0x20, 148, 156)
  let sum = 0
  for (const b of h) sum += b
  h.write(octal(sum, 7) + " ", 148, "ascii")
  return h
}

const pad = (n: number) => Buffer.alloc((BLOCK - (n % BLOCK)) % BLOCK)

/** A tar of `dir`'s contents (names relative to it). */
export const tarDirectory = (dir: string): Buffer => {
  const parts: Array<Buffer> = []
  const walk = (rel: string) => {
    const entries = fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))
    for (const e of entries) {
      const name = rel === "" ? e.name : `${rel}/${e.name}`
      if (e.isDirectory()) {
        parts.push(header(`${name}/`, 0, "5"))
        walk(name)
      } else if (e.isFile() && !SKIP(e.name)) {
        const data = fs.readFileSync(path.join(dir, name))
        parts.push(header(name, data.length, "0"), data, pad(data.length))
      }
    }
  }
  walk("")
  parts.push(Buffer.alloc(BLOCK * 2))
  return Buffer.concat(parts)
}

/** Extract a tar into `dir` (created). Refuses absolute names, `..`, links and other entry types. */
export const untarInto = (tar: Uint8Array, dir: string): void => {
  const b = Buffer.from(tar.buffer, tar.byteOffset, tar.byteLength)
  fs.mkdirSync(dir, { recursive: true })
  let off = 0
  while (off + BLOCK <= b.length) {
    const h = b.subarray(off, off + BLOCK)
    if (h.every((x) => x === 0)) return
    let sum = 0
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!
    const stored = parseInt(h.toString("ascii", 148, 156).replace(/[\0 ]/g, ""), 8)
    if (stored !== sum) throw new Error(`tar: bad header checksum at offset ${off}`)
    const rawName = h.toString("utf8", 0, 100).replace(/\0.*$/s, "")
    const prefix = h.toString("utf8", 345, 500).replace(/\0.*$/s, "")
    const name = prefix === "" ? rawName : `${prefix}/${rawName}`
    const size = parseInt(h.toString("ascii", 124, 136).replace(/[\0 ]/g, "") || "0", 8)
    const type = String.fromCharCode(h[156]!)
    if (path.isAbsolute(name) || name.split("/").includes("..")) throw new Error(`tar: unsafe name ${name}`)
    off += BLOCK
    if (type === "5") fs.mkdirSync(path.join(dir, name), { recursive: true })
    else if (type === "0" || type === "\0") {
      if (off + size > b.length) throw new Error(`tar: ${name} is cut short`)
      fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
      fs.writeFileSync(path.join(dir, name), b.subarray(off, off + size))
      off += size + pad(size).length
    } else throw new Error(`tar: unsupported entry type ${JSON.stringify(type)} for ${name}`)
  }
  throw new Error("tar: archive ends without its end blocks")
}

/** Write `dir` (a closed store) to `file` as `.tar.zst`. */
export const pack = (dir: string, file: string): Effect.Effect<number, ArchiveError> =>
  Effect.andThen(
    zstd,
    Effect.try({
      try: () => {
        const out = compress(tarDirectory(dir), ZSTD_LEVEL)
        fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true })
        fs.writeFileSync(file, out)
        return out.length
      },
      catch: (e) => new ArchiveError({ path: file, message: e instanceof Error ? e.message : String(e) })
    })
  )

/** Unpack a `.tar.zst` archive into `dir`. */
export const unpack = (file: string, dir: string): Effect.Effect<void, ArchiveError> =>
  Effect.andThen(
    zstd,
    Effect.try({
      try: () => {
        const size = fs.statSync(file).size
        if (size > MAX_ARCHIVE_BYTES) throw new Error(`archive is ${size} bytes, over ${MAX_ARCHIVE_BYTES}`)
        untarInto(decompress(fs.readFileSync(file), { defaultHeapSize: MAX_ARCHIVE_BYTES }), dir)
      },
      catch: (e) => new ArchiveError({ path: file, message: e instanceof Error ? e.message : String(e) })
    })
  )
