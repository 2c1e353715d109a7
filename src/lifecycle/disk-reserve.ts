/**
 * The disk reserve (issue 24, `store.minFreeBytes`): free space on the
 * store's filesystem, read with `statfs` every `DISK_RESERVE_POLL_MS` by a
 * scoped fiber. Below the reserve the ingest edge answers 503
 * `disk_reserve` and `/readyz` 503 `disk_reserve`; nothing else stops
 * (deliveries, settles, purges and reclaim free space). Once a read finds the
 * space back, ingest takes hooks again: no restart (docs/deployment.md
 * "A full disk"). `store.minFreeBytes` is read at every poll, so a reload changes it live; each
 * change between stopped and taking hooks is told to the listeners (the `store.disk_reserve`
 * operational event).
 */
import { Context, Effect, Layer, Metric, Schedule } from "effect"
import { statfs } from "node:fs/promises"
import { DiskReserve as Refused } from "../domain/admission.js"

/** How often free space is read; ingest resumes at most this long after space is back. */
export const DISK_RESERVE_POLL_MS = 1_000

export const freeBytes = Metric.gauge("ankusa_store_free_bytes", {
  description: "Bytes free (to an unprivileged user) on the store's filesystem, read every second"
})

export interface DiskReserveShape {
  /** The refusal while free space is under the reserve, else undefined; read synchronously by the ingest listener. */
  readonly refusal: () => Refused | undefined
  /** Called when ingest stops (the refusal) or resumes (undefined), with the free space and reserve read. */
  readonly onChange: (f: (refusal: Refused | undefined, free: number, min: number) => void) => void
}

export class DiskReserve extends Context.Service<DiskReserve, DiskReserveShape>()("ankusa/DiskReserve") {}

export interface DiskReserveOptions {
  /** A path on the store's filesystem. */
  readonly dir: string
  /** `store.minFreeBytes` in force (read at each poll); 0 turns the reserve off. */
  readonly minFreeBytes: () => number
}

const read = (dir: string) =>
  Effect.tryPromise(() => statfs(dir)).pipe(Effect.map((s) => Number(s.bavail) * Number(s.bsize)))

export const make = (options: DiskReserveOptions) =>
  Effect.gen(function* () {
    const listeners: Array<(refusal: Refused | undefined, free: number, min: number) => void> = []
    let refused: Refused | undefined
    let failing = false
    const poll = read(options.dir).pipe(
      Effect.tap((free) => Metric.update(freeBytes, free)),
      Effect.flatMap((free) =>
        Effect.suspend(() => {
          failing = false
          const min = options.minFreeBytes()
          const low = min > 0 && free < min
          const was = refused !== undefined
          refused = low ? new Refused({ free, min }) : undefined
          if (low === was) return Effect.void
          for (const f of listeners) f(refused, free, min)
          return low
            ? Effect.logWarning("free space is under the disk reserve: ingest answers 503 disk_reserve").pipe(Effect.annotateLogs({ free, min }))
            : Effect.logInfo("free space is back above the disk reserve: ingest resumes").pipe(Effect.annotateLogs({ free, min }))
        })
      ),
      // A failed read keeps the last answer; it is logged once until a read succeeds again.
      Effect.catch((e) => (failing ? Effect.void : ((failing = true), Effect.logWarning("reading free space failed", e))))
    )
    yield* poll
    yield* poll.pipe(Effect.repeat(Schedule.spaced(DISK_RESERVE_POLL_MS)), Effect.forkScoped)
    return { refusal: () => refused, onChange: (f) => void listeners.push(f) } satisfies DiskReserveShape
  })

export const layer = (options: DiskReserveOptions): Layer.Layer<DiskReserve> => Layer.effect(DiskReserve, make(options))
