/**
 * The `Lease` service (issue 41; docs/architecture.md "High availability"): on a store several
 * nodes share (PostgreSQL), one node at a time holds the lease and writes. Built as a boot step,
 * after the store and the HTTP server and before anything writes: a standby waits in it (its gate
 * says `standby`), polling every `pollMs`, until the lease expires or its holder's session ends.
 * Then the store is fenced with the new epoch (every later batch fails once another node takes the
 * lease), the boot carries on (migrations, the inflight recovery, the services), and a scoped fiber
 * renews the lease every `renewMs`. A renewal that finds the lease taken calls `stepDown`: the node
 * stops serving and exits at once (`EXIT_STEPPED_DOWN`; nothing it sends can commit, so there is
 * nothing to drain), and its service manager starts it again, as a standby. On a store with
 * no lease (RocksDB: its lock file keeps a second process out) the layer does nothing.
 */
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { hostname } from "node:os"
import { Store } from "../store/store.js"

export interface LeaseSettings {
  /** How long a lease lasts unless renewed (`ha.leaseMs`). */
  readonly leaseMs: number
  /** How often the holder renews it (`ha.renewMs`, below half of `leaseMs`). */
  readonly renewMs: number
  /** How often a standby tries to take it (`ha.pollMs`). */
  readonly pollMs: number
}

export interface LeaseShape {
  /** The epoch this node writes under; undefined on a store without a lease. */
  readonly epoch: bigint | undefined
  /** This node's name in the lease row: host, pid and a random tag. */
  readonly holder: string
}

/** The exit code of a node that stepped down (EX_TEMPFAIL): its service manager starts it again, as a standby. */
export const EXIT_STEPPED_DOWN = 75

export class Lease extends Context.Service<Lease, LeaseShape>()("ankusa/ha/Lease") {}

/**
 * `waiting`: run once when another node holds the lease (serve: the gate says `standby`);
 * `stepDown`: what the node does once another took the lease (serve: close the gate, then stop).
 */
export const layer = (settings: LeaseSettings, waiting: Effect.Effect<void>, stepDown: Effect.Effect<void>): Layer.Layer<Lease, never, Store> =>
  Layer.effect(
    Lease,
    Effect.gen(function* () {
      const ops = (yield* Store).lease
      const holder = `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`
      if (ops === undefined) return { epoch: undefined, holder }
      let epoch: bigint | undefined
      let said = false
      while (epoch === undefined) {
        epoch = yield* ops.tryAcquire(holder, settings.leaseMs).pipe(
          Effect.catch((e) => Effect.as(Effect.logWarning("lease: could not try for the lease", e.message), undefined))
        )
        if (epoch !== undefined) break
        if (!said) yield* Effect.andThen(waiting, Effect.logInfo("standby: another node holds the lease; waiting for it").pipe(Effect.annotateLogs({ holder })))
        said = true
        yield* Effect.sleep(settings.pollMs)
      }
      const held = epoch
      yield* ops.fence(held)
      yield* Effect.logInfo("lease taken: this node is active").pipe(Effect.annotateLogs({ epoch: String(held), holder }))
      // At shutdown a standby may take it at once instead of waiting out the expiry.
      yield* Effect.addFinalizer(() => ops.release(holder, held).pipe(Effect.ignore))
      const renew = Effect.gen(function* () {
        while (true) {
          yield* Effect.sleep(settings.renewMs)
          const kept = yield* ops.renew(holder, held, settings.leaseMs).pipe(
            // The database out of reach: the fence keeps this node from committing if a standby takes over meanwhile.
            Effect.catch((e) => Effect.as(Effect.logWarning("lease: renewal failed; retrying", e.message), true))
          )
          if (!kept) {
            yield* Effect.logError("lease lost: another node took over; stepping down").pipe(Effect.annotateLogs({ epoch: String(held), holder }))
            return yield* stepDown
          }
        }
      })
      yield* Effect.forkScoped(renew)
      return { epoch: held, holder }
    })
  )
