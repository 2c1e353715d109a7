/**
 * What the pipeline's sink calls offer the tick, the hand-off and the outcome committer (calls.ts
 * builds them; docs/delivery.md "Fair dispatch", "The hand-off"), and a claimed row as they see it.
 */
import type { Effect } from "effect"
import type { Envelope } from "../domain/envelope.js"
import type * as K from "../domain/keys.js"
import type { DueEntry } from "../queue/queue.js"
import type { Holds } from "../queue/wake.js"
import type { WithBreaker } from "./destinations.js"
import type { DispatchSinkOptions } from "./options.js"

export interface Claimed {
  readonly entry: DueEntry
  readonly ref: K.InflightRef
  /** Handed off (handoff.ts): how many hand-offs in a row brought its place to it. */
  readonly runs?: number
}

export interface SinkCalls {
  /**
   * Whether the claim may take a row of tenant `ord` for sink `name` (undefined: its hook or sink
   * is gone; always admitted, it is settled at once): the sink has room and the tenant is under
   * its share of it. An admitted row holds its place until its call ends, or `endClaim(false)`;
   * a refused one parks its tenant on the sink until the sink has room again.
   */
  readonly admit: (ord: number, name: string | undefined, at: number) => boolean | number
  /** Whether a sink other than those named has room (a tenant refused by those may still have rows for it). */
  readonly roomBesides: (names: ReadonlySet<string>) => boolean
  /** Places free over every sink (`capacity − held`): the most a claim could route. */
  readonly room: () => number
  /** `room() > 0`, stopping at the first sink with a free place (a visit asks it; `room` walks every sink). */
  readonly anyRoom: () => boolean
  /** Places a full sink still gives tenants holding none of its places (sink-places.ts `admitTo`). */
  readonly spare: () => number
  /** Whether every sink has `rows` free places and no tenant is parked: a claim of `rows` needs no admission. */
  readonly roomForAll: (rows: number) => boolean
  /** The tick's claim is done: the rows admitted since the last call are routed (`kept`) or were given back. */
  readonly endClaim: (kept: boolean) => void
  /** Tenants parked on sinks whose waiting rows are down to half their `maxWaiting`: each with the lowest `at` refused. Cleared by the call. */
  readonly unparked: () => ReadonlyArray<{ readonly ord: number; readonly at: number }>
  /**
   * Hand a claimed row to its sink's queue, synchronously (its call is forked when a slot is
   * free); a row that cannot be called comes back as the effect that settles it.
   */
  readonly route: (c: Claimed, env: Envelope | undefined) => Effect.Effect<void> | undefined
  /** Rows handed over and not finished (queued or calling). */
  readonly busy: () => number
  /** Waits until no row is handed over and not finished. */
  readonly idle: Effect.Effect<void>
  /** Shutdown: no call starts after it, the calls running are cut, the queued rows dropped (all stay ?F). */
  readonly cut: Effect.Effect<void>
  /**
   * A reload's sinks (docs/configuration.md "Reloading"): an added one gets its pool, a changed one a
   * new pool that its waiting rows (and their places) move to (calls on the wire finish on the old
   * pool, which then closes), a removed one's waiting rows are dead-lettered (`sink removed`), its
   * parked tenants come back to the round, and its pool closes.
   */
  readonly reconfigure: (sinks: ReadonlyArray<DispatchSinkOptions>) => void
  /** The breakers of the shared sinks, the endpoint pools open now and the endpoints remembered without one. */
  readonly destinations: () => ReadonlyArray<WithBreaker>
  /** Tenant endpoint pools open now (at most `endpoints.maxPools`). */
  readonly endpointPools: () => number
  /** The tenants with rows refused and left due below their cursors (parked, or waiting for an endpoint pool), each with the lowest `at` refused. */
  readonly refusedTenants: () => ReadonlyMap<number, number>
  /** The open breakers' holds on new rows, for the Writer (Wake `holdBy`; docs/delivery.md "Failing destinations"). */
  readonly holds: Holds
}
