/**
 * Where RocksDB commits run (docs/architecture.md, "Where commits run").
 * The binding's write is synchronous and holds its thread for the whole
 * WriteBatch build plus the fsync, so there are two committers with the same
 * contract (FIFO, one batch per call, a failure fails only its own call):
 * - `main`: commits on the calling (event-loop) thread;
 * - `worker`: a worker thread attached to the same open DB receives each batch
 *   as one transferred buffer and commits it there; the caller waits without
 *   blocking the event loop.
 */
import type { ColumnHandle, RocksLevel } from "@nxtedition/rocksdb"
import { Effect, type Scope } from "effect"
import { Worker } from "node:worker_threads"
import { holdingLoop } from "./rocksdb-open.js"
import { StoreError } from "./store.js"
import { commitEncoded } from "./rocksdb-wire.mjs"

export type CommitThread = "main" | "worker"

export interface Committer {
  /** Commit one encoded batch (see rocksdb-wire.mjs). Calls commit in call order. */
  readonly commit: (buffer: ArrayBuffer, sync: boolean) => Effect.Effect<void, StoreError>
}

export interface CommitterOptions {
  readonly names: ReadonlyArray<string>
  readonly maxRangeDeleteKeys: number
}

const messageOf = (e: unknown): string =>
  e instanceof Error ? ((e as Error & { code?: unknown }).code ? `${String((e as Error & { code?: unknown }).code)}: ` : "") + e.message : String(e)

export const mainCommitter = (db: RocksLevel, columns: ReadonlyArray<ColumnHandle>, opts: CommitterOptions): Committer => ({
  commit: (buffer, sync) =>
    Effect.try({
      try: () => commitEncoded(db, columns, buffer, { sync, maxRangeDeleteKeys: opts.maxRangeDeleteKeys, names: opts.names }),
      catch: (e) => new StoreError({ op: "write", message: messageOf(e) })
    })
})

const WORKER_URL = new URL("./rocksdb-worker.mjs", import.meta.url)

type Reply = { readonly id: number; readonly error?: { readonly code: string; readonly message: string } }
type Resume = (effect: Effect.Effect<void, StoreError>) => void

/**
 * A commit worker for `db`, terminated when the scope closes. Acquire it after
 * the DB so that it is released first: the worker must be gone before the DB
 * closes under it. Release waits for the commits already sent (they finish in
 * milliseconds), so none is cut off by the close.
 */
export const workerCommitter = (db: RocksLevel, opts: CommitterOptions): Effect.Effect<Committer, StoreError, Scope.Scope> =>
  Effect.gen(function* () {
    const pending = new Map<number, Resume>()
    let nextId = 0
    let dead: string | undefined
    let onIdle: (() => void) | undefined

    const worker = yield* Effect.acquireRelease(
      Effect.callback<Worker, StoreError>((resume) => {
        const w = new Worker(WORKER_URL, {
          // Plain JavaScript: don't inherit a TypeScript loader (tsx) from the parent; it costs ~0.5 s per start.
          execArgv: [],
          workerData: { handle: db.handle, names: opts.names, maxRangeDeleteKeys: opts.maxRangeDeleteKeys }
        })
        // Remove only our own listeners: removeAllListeners() would also drop the
        // Worker's internal hooks that keep its message port referenced.
        const off = () => {
          w.off("message", onMessage)
          w.off("error", onError)
          w.off("exit", onExit)
        }
        const fail = (message: string) => {
          off()
          void w.terminate()
          resume(Effect.fail(new StoreError({ op: "open", message: `commit worker: ${message}` })))
        }
        const onMessage = (m: { ready?: true; fatal?: string }) => {
          if (m.ready) {
            off()
            resume(Effect.succeed(w))
          } else fail(m.fatal ?? "unexpected message before ready")
        }
        const onError = (e: Error) => fail(e.message)
        const onExit = (code: number) => fail(`exited with code ${code} before ready`)
        w.on("message", onMessage)
        w.on("error", onError)
        w.on("exit", onExit)
        return Effect.promise(() => w.terminate())
      }),
      (w) =>
        Effect.gen(function* () {
          if (pending.size > 0 && dead === undefined) {
            yield* Effect.callback<void>((resume) => {
              onIdle = () => resume(Effect.void)
            }).pipe(Effect.timeout("30 seconds"), Effect.ignore)
          }
          dead ??= "store closed"
          yield* holdingLoop(Effect.promise(() => w.terminate()))
          failAll("store closed while this commit was in flight")
        })
    )

    const failAll = (message: string) => {
      const waiting = [...pending.values()]
      pending.clear()
      for (const resume of waiting) resume(Effect.fail(new StoreError({ op: "write", message })))
    }
    const settle = () => {
      if (pending.size === 0) {
        // Idle: don't keep the process alive for a worker with nothing to do.
        worker.unref()
        onIdle?.()
      }
    }

    worker.unref()
    worker.on("message", (m: Reply) => {
      const resume = pending.get(m.id)
      if (resume === undefined) return
      pending.delete(m.id)
      resume(m.error === undefined ? Effect.void : Effect.fail(new StoreError({ op: "write", message: `${m.error.code}: ${m.error.message}` })))
      settle()
    })
    const die = (message: string) => {
      dead ??= message
      failAll(message)
      onIdle?.()
    }
    worker.on("error", (e) => die(`commit worker failed: ${e.message}`))
    worker.on("exit", (code) => die(`commit worker exited (code ${code})`))

    const commit = (buffer: ArrayBuffer, sync: boolean): Effect.Effect<void, StoreError> =>
      Effect.callback<void, StoreError>((resume) => {
        if (dead !== undefined) return resume(Effect.fail(new StoreError({ op: "write", message: dead })))
        const id = nextId++
        pending.set(id, resume)
        if (pending.size === 1) worker.ref()
        // One transferred buffer per batch: no copy, one message.
        worker.postMessage({ id, sync, buffer }, [buffer])
      }).pipe(
        // Once sent, a batch commits whether or not its caller is still waiting; let the caller learn which.
        Effect.uninterruptible
      )

    return { commit } satisfies Committer
  })
