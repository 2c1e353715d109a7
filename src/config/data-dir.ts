/**
 * The data directory, checked before anything opens it (docs/deployment.md
 * "Boot and shutdown"): it and `<dataDir>/store` exist or can be created, are
 * directories on a filesystem that can hold a store, and take a synced file.
 * A refusal is a `ConfigError` naming the path and the reason
 * (`config error at dataDir (/proc/ankusa): ...`), so the CLI prints one line
 * and exits 1. Every call is asynchronous and bounded by `DATA_DIR_OP_TIMEOUT_MS`:
 * a filesystem that never answers (a hung mount) is refused, not waited on
 * (Node's exit still waits for a call the kernel holds; SIGTERM then stops it).
 */
import { Effect } from "effect"
import { constants as fsConstants } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { ConfigError } from "./config.js"

/** How long one filesystem call of the check may take before the directory is refused. */
export const DATA_DIR_OP_TIMEOUT_MS = 10_000

/** The probe file written, synced and removed in each directory. */
export const PROBE_FILE = ".ankusa-write-probe"

/** statfs `f_type` of the kernel's virtual filesystems (linux/magic.h): none can hold a store. */
const VIRTUAL: ReadonlyMap<number, string> = new Map([
  [0x9fa0, "proc"],
  [0x62656572, "sysfs"],
  [0x1cd1, "devpts"],
  [0x27e0eb, "cgroup"],
  [0x63677270, "cgroup2"],
  [0x64626720, "debugfs"],
  [0x74726163, "tracefs"],
  [0x73636673, "securityfs"],
  [0x6165676c, "pstore"],
  [0xcafe4a11, "bpf"],
  [0x62656570, "configfs"],
  [0xde5e81e4, "efivarfs"],
  [0xf97cff8c, "selinuxfs"],
  [0x42494e4d, "binfmt_misc"]
])

type Errno = NodeJS.ErrnoException

// Non-blocking opens: a FIFO left at one of these paths answers ENXIO instead of holding a thread.
const { O_CREAT, O_NONBLOCK, O_RDWR, O_TRUNC, O_WRONLY } = fsConstants
const WRITE_NEW = O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK
const READ_WRITE = O_RDWR | O_NONBLOCK

/** A refused call: its errno (or "timeout") and what was being done. */
interface Refused {
  readonly code: string
  readonly doing: string
  readonly message: string
}

const call = <A>(doing: string, f: () => Promise<A>): Effect.Effect<A, Refused> =>
  Effect.tryPromise({
    try: f,
    catch: (e): Refused => ({ code: (e as Errno).code ?? "EIO", doing, message: (e as Error).message ?? String(e) })
  }).pipe(
    Effect.timeoutOrElse({
      duration: DATA_DIR_OP_TIMEOUT_MS,
      orElse: () => Effect.fail<Refused>({ code: "timeout", doing, message: "" })
    })
  )

const reasonOf = (r: Refused): string => {
  switch (r.code) {
    case "EACCES":
    case "EPERM":
      return `permission denied (${r.doing})`
    case "EROFS":
      return `a read-only filesystem (${r.doing})`
    case "ENOSPC":
    case "EDQUOT":
      return `no space left on its filesystem (${r.doing})`
    case "ENOTDIR":
      return `a parent is not a directory (${r.doing})`
    case "ENOENT":
      return `cannot be created (${r.doing}: no such file or directory)`
    case "ENXIO":
      return `not a regular file (${r.doing})`
    case "timeout":
      return `the filesystem did not answer within ${DATA_DIR_OP_TIMEOUT_MS} ms (${r.doing})`
    default:
      return `${r.code} (${r.doing}): ${r.message}`
  }
}

/** The directory itself or its nearest existing ancestor: a directory, or a refusal. */
const nearestExisting = (dir: string): Effect.Effect<string, string> =>
  Effect.gen(function* () {
    for (let p = dir; ; p = path.dirname(p)) {
      const st = yield* Effect.result(call(`stat ${p}`, () => fs.stat(p)))
      if (st._tag === "Success") {
        if (st.success.isDirectory()) return p
        return yield* Effect.fail(p === dir ? "is a file, not a directory" : `${p} is a file, not a directory`)
      }
      const code = st.failure.code
      if ((code !== "ENOENT" && code !== "ENOTDIR") || p === path.dirname(p)) return yield* Effect.fail(reasonOf(st.failure))
    }
  })

/** Refuse a kernel virtual filesystem (a store there fails, or worse, a recursive mkdir never returns). */
const refuseVirtual = (existing: string): Effect.Effect<void, string> =>
  Effect.flatMap(Effect.mapError(call(`statfs ${existing}`, () => fs.statfs(existing)), reasonOf), (s) => {
    const name = VIRTUAL.get(s.type >>> 0)
    return name === undefined ? Effect.void : Effect.fail(`on a ${name} filesystem (${existing}), which cannot hold a store`)
  })

/** Create `target` one level at a time below `existing` (never a recursive mkdir: see above). */
const create = (existing: string, target: string): Effect.Effect<void, string> =>
  Effect.gen(function* () {
    const missing: Array<string> = []
    for (let p = target; p !== existing; p = path.dirname(p)) missing.unshift(p)
    for (const p of missing) {
      const made = yield* Effect.result(call(`mkdir ${p}`, () => fs.mkdir(p)))
      if (made._tag === "Success" || made.failure.code === "EEXIST") continue
      return yield* Effect.fail(reasonOf(made.failure))
    }
    const st = yield* Effect.mapError(call(`stat ${target}`, () => fs.stat(target)), reasonOf)
    if (!st.isDirectory()) return yield* Effect.fail(`${target} is a file, not a directory`)
  })

/** A file can be created, written, synced and removed in `dir`; an existing `LOCK` can be opened for writing. */
const probe = (dir: string): Effect.Effect<void, string> =>
  Effect.gen(function* () {
    const file = path.join(dir, PROBE_FILE)
    const handle = yield* call(`create ${file}`, () => fs.open(file, WRITE_NEW))
    const written = yield* Effect.result(
      Effect.andThen(
        call(`write ${file}`, () => handle.write(Buffer.from("ankusa\n"))),
        call(`fsync ${file}`, () => handle.sync())
      )
    )
    yield* Effect.ignore(call(`close ${file}`, () => handle.close()))
    yield* Effect.ignore(call(`unlink ${file}`, () => fs.unlink(file)))
    if (written._tag === "Failure") return yield* Effect.fail(written.failure)
    const lock = path.join(dir, "LOCK")
    const existing = yield* Effect.result(call(`stat ${lock}`, () => fs.stat(lock)))
    if (existing._tag === "Success") {
      const h = yield* call(`open ${lock} for writing`, () => fs.open(lock, READ_WRITE))
      yield* Effect.ignore(call(`close ${lock}`, () => h.close()))
    }
  }).pipe(Effect.mapError((e) => (typeof e === "string" ? e : reasonOf(e))))

/**
 * Check (and create) `dataDir` and `storeDir` (`<dataDir>/store`; none on PostgreSQL) before the
 * store opens; refused with `config error at dataDir (<path>): <reason>`.
 */
export const checkDataDir = (dataDir: string, storeDir: string | undefined): Effect.Effect<void, ConfigError> => {
  const dir = path.resolve(dataDir)
  return Effect.gen(function* () {
    const existing = yield* nearestExisting(dir)
    yield* refuseVirtual(existing)
    yield* create(existing, dir)
    if (storeDir !== undefined) yield* create(dir, path.resolve(storeDir))
    yield* probe(dir)
    if (storeDir !== undefined) yield* probe(path.resolve(storeDir))
  }).pipe(Effect.mapError((reason) => new ConfigError({ message: `config error at dataDir (${dir}): ${reason}` })))
}
