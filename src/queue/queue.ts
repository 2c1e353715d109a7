/**
 * The read side of the tenant-keyed queue (TEN-1 §5, §6): the `Queue` service and its layer. Each
 * part lives beside it, one concept a file: the active index (`active.ts`), due reads (`due.ts`),
 * the marker cleanup (`markers.ts`), the DLQ reads (`dead.ts`), purge (`purge.ts`),
 * `pendingForSource` (`source.ts`), boot recovery (`recovery.ts`) and the tenant locks.
 *
 * Every scan is bounded (named limits beside each read, docs/configuration.md "Queue reads") and
 * every write is a batch of Deliveries transitions: the queue never builds a `?D`/`?F`/`?X`/`?A` key.
 */
import { Context, Effect, Layer } from "effect"
import * as Counters from "../domain/counters.js"
import type { Envelope } from "../domain/envelope.js"
import * as K from "../domain/keys.js"
import type { Op } from "../domain/ops.js"
import { type Entry, Store, type StoreCorrupt, type StoreError, type StoreShape } from "../store/store.js"
import { type ActiveTenant, activeTenants, markerSlice, type MarkerSlice, oldestDueAge } from "./active.js"
import { type Admission, type ClaimedVisit, claimDue, type ClaimRequest, unclaim } from "./claim.js"
import { type DeadPage, dead, deadPage } from "./dead.js"
import { deadSizes, dropDead } from "./dlq-drop.js"
import { type DueEntry, dueForTenant, firstDue } from "./due.js"
import { envelopes, tenantsOfHooks } from "./hooks.js"
import { type CleanupOptions, type CleanupResult, type CleanupTenant, cleanupMarkers, cleanupMarkersOf } from "./markers.js"
import { archiveObligations, type Obligation, settleArchive, unreferenced } from "./obligations.js"
import { type PurgeKind, type PurgeResult, purgeTenant } from "./purge.js"
import { recoverInflight, takeBackInflight } from "./recovery.js"
import { type DeliveryRow, deliveryRow, deliveryRows, type Outcome, settle } from "./settle.js"
import { pendingForSource, type SourcePending } from "./source.js"
import { makeTenantLocks } from "./tenant-locks.js"
import { type Lanes, makeLanes, type TakeHeads } from "./lanes.js"

export {
  ACTIVE_SCAN_FIRST_PAGE,
  ACTIVE_SCAN_MAX_MARKERS,
  ACTIVE_SCAN_PAGE,
  ACTIVE_TENANTS_LIMIT,
  type ActiveTenant,
  type MarkerSlice,
  OLDEST_AGE_MAX_STALE
} from "./active.js"
export { type Admission, type ClaimedVisit, type ClaimRequest } from "./claim.js"
export { type Admit } from "./due.js"
export { type Obligation } from "./obligations.js"
export { type DeliveryRow, type Outcome } from "./settle.js"
export { LANES_CHUNK, type LaneOf, type Next, type TakeHeads } from "./lanes.js"
export { DEAD_MAX_LIMIT, DEAD_PAGE_MAX_SCANNED, DEAD_PAGE_SCAN_PAGE, type DeadItem, type DeadPage } from "./dead.js"
export { DUE_SCAN_PAGE, type DueEntry } from "./due.js"
export { type CleanupPoint, type CleanupResult } from "./markers.js"
export { PURGE_CHUNK, type PurgeKind, type PurgeResult } from "./purge.js"
export { RECOVER_CHUNK } from "./recovery.js"
export { SOURCE_FOLD_CHUNK, type SourcePending } from "./source.js"

export interface QueueShape {
  readonly activeTenants: (now: number, limit?: number) => Effect.Effect<ReadonlyArray<ActiveTenant>, StoreError>
  /** TEN-3's discovery: the next slice of the markers due by now (active.ts). */
  readonly markerSlice: (now: number, from: Uint8Array | undefined, maxMarkers: number, floor?: number) => Effect.Effect<MarkerSlice, StoreError>
  readonly dueForTenant: (
    ord: number,
    now: number,
    floorAt: number,
    limit: number,
    byteBudget: number
  ) => Effect.Effect<ReadonlyArray<DueEntry>, StoreError>
  /**
   * Due → inflight over `requests` within `rows` and `bytes` (claim.ts); every visited tenant's rows,
   * in request order. With an admission, each row is read with its hook and claimed only if admitted.
   */
  readonly claim: (
    now: number,
    requests: ReadonlyArray<ClaimRequest>,
    rows: number,
    bytes: number,
    admission?: Admission
  ) => Effect.Effect<Array<ClaimedVisit>, StoreError>
  /** Claimed rows back to due as they were (a tick that failed after claiming them), one unsynced batch. */
  readonly unclaim: (rows: ReadonlyArray<DueEntry>) => Effect.Effect<void, StoreError>
  /** Commit what became of claimed rows (settle.ts), one unsynced batch. */
  readonly settle: (outcomes: ReadonlyArray<Outcome>, take?: TakeHeads) => Effect.Effect<void, StoreError>
  /** A claimed row's delivery row (a first attempt of `size` bytes when not found). */
  readonly deliveryRow: (ref: K.InflightRef, size: number) => Effect.Effect<DeliveryRow, StoreError>
  /** Delivery rows of DLQ items, undefined where gone. */
  readonly deliveryRows: (refs: ReadonlyArray<K.DeliveryRef>) => Effect.Effect<Array<DeliveryRow | undefined>, StoreError>
  /** Hooks' envelopes by seq (undefined when gone or undecodable). */
  readonly envelopes: (seqs: ReadonlyArray<number>) => Effect.Effect<Map<number, Envelope | undefined>, StoreError>
  /** The tenants owning the hooks that still exist among `seqs`. */
  readonly tenantsOfHooks: (seqs: ReadonlyArray<number>) => Effect.Effect<Set<string>, StoreError>
  /** The pending counter of each tenant. */
  readonly pendingOf: (ords: ReadonlyArray<number>) => Effect.Effect<Array<number>, StoreError>
  /** The DLQ ceiling's reads and drop (dlq-drop.ts). */
  readonly deadSizes: (entries: ReadonlyArray<Entry>) => Effect.Effect<Array<number>, StoreError>
  readonly dropDead: (ord: number, entries: ReadonlyArray<Entry>) => Effect.Effect<Array<number>, StoreError>
  /** The archive compactor's obligations and their settle, and reclaim's check (obligations.ts). */
  readonly archiveObligations: (limit: number) => Effect.Effect<Array<Obligation>, StoreError>
  readonly settleArchive: (settled: ReadonlyArray<Pick<Obligation, "seq" | "ord">>, extra: ReadonlyArray<Op>) => Effect.Effect<void, StoreError>
  readonly unreferenced: (seqs: ReadonlyArray<number>) => Effect.Effect<Array<boolean>, StoreError>
  readonly firstDue: (ord: number) => Effect.Effect<DueEntry | undefined, StoreError>
  readonly cleanupMarkers: (
    ord: number,
    now: number,
    scannedMarkers: ReadonlyArray<number>,
    options?: CleanupOptions
  ) => Effect.Effect<CleanupResult, StoreError>
  /**
   * `cleanupMarkers` for several tenants at once (the tick's visits): each tenant's steps in
   * TEN-1 §5's order, every tenant's deletes in one write and its put-backs in one synced write.
   * `between` runs once per point, for all tenants. Results in `tenants` order.
   */
  readonly cleanupMarkersOf: (
    tenants: ReadonlyArray<CleanupTenant>,
    now: number,
    options?: CleanupOptions
  ) => Effect.Effect<ReadonlyArray<CleanupResult>, StoreError>
  readonly oldestDueAge: (now: number) => Effect.Effect<number, StoreError>
  readonly counters: (ord: number) => Effect.Effect<Counters.TenantCounters, StoreError>
  readonly pendingForTenant: (
    ord: number
  ) => Effect.Effect<{ readonly pending: number; readonly scheduled: number; readonly inflight: number; readonly bytes: number }, StoreError>
  readonly deadForTenant: (ord: number) => Effect.Effect<{ readonly dead: number }, StoreError>
  readonly aggregate: Effect.Effect<Counters.TenantCounters, StoreError>
  readonly dead: (q: {
    readonly ords: ReadonlyArray<number>
    readonly limit: number
    readonly before?: K.DeadRef | undefined
  }) => Effect.Effect<DeadPage, StoreError>
  readonly deadPage: (q: {
    readonly ord?: number | undefined
    readonly limit: number
    readonly cursor?: K.DeadRef | undefined
    readonly maxScanned?: number | undefined
  }) => Effect.Effect<DeadPage, StoreError>
  readonly purgeTenant: (
    ord: number,
    kinds: ReadonlyArray<PurgeKind>,
    options?: { readonly chunk?: number; readonly maxChunks?: number }
  ) => Effect.Effect<PurgeResult, StoreError>
  readonly pendingForSource: (sourceId: string, fixedOrd?: number) => Effect.Effect<SourcePending, StoreError>
  readonly recoverInflight: (now: number) => Effect.Effect<number, StoreError | StoreCorrupt>
  /**
   * Ordered delivery (lanes.ts): lanes that got waiting rows get a head if they have none (the
   * Writer, after its commit); at boot, after `recoverInflight`, every lane is repaired so.
   */
  readonly promote: (lanes: ReadonlyArray<K.LaneRef>, now: number) => Effect.Effect<void, StoreError>
  readonly recoverLanes: (now: number) => Effect.Effect<number, StoreError | StoreCorrupt>
  /** A tenant's held lanes (onDead hold): each lane's dead head, up to `limit`. */
  readonly heldLanes: (
    ord: number,
    limit: number
  ) => Effect.Effect<ReadonlyArray<{ readonly lane: number; readonly seq: number; readonly sink: number }>, StoreError>
  /** The lanes' section and transitions, for the replay and the erase (lanes.ts). */
  readonly lanes: Lanes
  /**
   * Run `effect` while holding tenant `ord`'s in-process lock. Transitions
   * that read a due or dead row and then delete it (claim, revive, purge)
   * take it, so two of them never both count the same row's removal.
   */
  readonly withTenant: <A, E, R>(ord: number, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * TEN-5 step 2: from the moment this ends, no claim takes a row of `ord` (a claim holding the
   * tenant's lock has committed). In memory: an erase resumed after a restart fences again.
   */
  readonly fence: (ord: number) => Effect.Effect<void>
  /**
   * TEN-5 step 2 past its timeout: from now on outcomes of `ord`'s claimed rows are dropped unwritten,
   * and its `?F` rows go back to due (recover, counted), to be purged by step 3. Returns how many.
   */
  readonly takeBack: (ord: number, now: number) => Effect.Effect<number, StoreError>
}

export class Queue extends Context.Service<Queue, QueueShape>()("ankusa/Queue") {}

const counters = (store: StoreShape) => (ord: number) =>
  store.getCounters("counters", Counters.keysOf(ord)).pipe(Effect.map(Counters.fromTotals))

export const make = (store: StoreShape): QueueShape => {
  const withTenant = makeTenantLocks()
  const lanes = makeLanes(store)
  const countersOf = counters(store)
  const fenced = new Set<number>()
  const taken = new Set<number>()
  return {
    activeTenants: activeTenants(store),
    markerSlice: markerSlice(store),
    claim: claimDue(store, withTenant, fenced),
    unclaim: unclaim(store, taken),
    settle: settle(store, taken, lanes, fenced),
    deliveryRow: deliveryRow(store),
    deliveryRows: deliveryRows(store),
    envelopes: envelopes(store),
    tenantsOfHooks: tenantsOfHooks(store),
    pendingOf: (ords) =>
      ords.length === 0
        ? Effect.succeed([])
        : store.getCounters("counters", ords.map((o) => K.counterKey(o, Counters.Fields.pending))).pipe(Effect.map((vs) => vs.map((v) => Number(v ?? 0n)))),
    deadSizes: deadSizes(store),
    dropDead: dropDead(store, withTenant, lanes),
    archiveObligations: archiveObligations(store),
    settleArchive: settleArchive(store),
    unreferenced: unreferenced(store),
    dueForTenant: dueForTenant(store),
    firstDue: firstDue(store),
    cleanupMarkers: cleanupMarkers(store),
    cleanupMarkersOf: cleanupMarkersOf(store),
    oldestDueAge: oldestDueAge(store),
    counters: countersOf,
    pendingForTenant: (ord) =>
      countersOf(ord).pipe(Effect.map((c) => ({ pending: c.pending, scheduled: c.scheduled, inflight: c.inflight, bytes: c.bytes }))),
    deadForTenant: (ord) => countersOf(ord).pipe(Effect.map((c) => ({ dead: c.dead }))),
    aggregate: countersOf(Counters.AGGREGATE),
    dead: dead(store),
    deadPage: deadPage(store),
    purgeTenant: purgeTenant(store, withTenant, lanes),
    pendingForSource: pendingForSource(store),
    recoverInflight: recoverInflight(store),
    promote: lanes.promote,
    recoverLanes: lanes.recover,
    heldLanes: (ord, limit) => lanes.held(ord, limit),
    lanes,
    withTenant,
    fence: (ord) => Effect.suspend(() => (fenced.add(ord), withTenant(ord, Effect.void))),
    takeBack: (ord, now) =>
      Effect.suspend(() => {
        taken.add(ord)
        return withTenant(ord, takeBackInflight(store, ord, now))
      })
  }
}

export const layer: Layer.Layer<Queue, never, Store> = Layer.effect(Queue, Effect.map(Store, make))
