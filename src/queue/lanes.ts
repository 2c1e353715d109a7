/**
 * The ordered lanes' transitions (docs/delivery.md "Ordered delivery"): which row of a lane is its
 * head, and what becomes of the lane when its head settles. Every read of a `?H` row and the write
 * that follows it run in one section, so a lane's head is decided by one writer at a time: the
 * promotion of new waiting rows (after the Writer's commit), the settle of heads, the replay of a
 * lane's dead rows, and the repair after purges and at boot. Retries and fair dispatch do not come
 * here, and claims only as the settle's hand-off (a new head the pipeline takes is claimed in the
 * settle's batch): a lane holds one due or inflight row, its head, and the rest wait in `?W`.
 */
import { Effect, Semaphore, Stream } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import * as LaneMoves from "../domain/lane-moves.js"
import * as K from "../domain/keys.js"
import * as Ordering from "../domain/ordering.js"
import { familyRows } from "../store/family.js"
import { laneId, makeLaneCache, type Next } from "./lane-cache.js"
import type { StoreCorrupt, StoreError, StoreShape } from "../store/store.js"

export type { Next } from "./lane-cache.js"

/** Rows per batch of the boot repair and of the purges' waiting phase. */
export const LANES_CHUNK = 500

/** What a settled row's lane is, as the pipeline knows it from the hook and its destination. */
export interface LaneOf {
  readonly lane: number
  /** The destination's `ordered.onDead` is `hold` (else skip). */
  readonly hold: boolean
}

/** A settle of a claimed row, as the lanes see it. */
export interface LaneSettle {
  readonly ref: K.InflightRef
  readonly lane: LaneOf
  readonly dead: boolean
}

/**
 * The pipeline's hand-off (docs/delivery.md "The hand-off"): of a settle's new heads, those it takes
 * now (each true), claimed in the settle's batch. It holds what it took until the write's outcome.
 */
export type TakeHeads = (heads: ReadonlyArray<Next>) => Effect.Effect<ReadonlyArray<boolean>, StoreError>

export const makeLanes = (store: StoreShape) => {
  const section = Semaphore.makeUnsafe(1)
  const locked = Semaphore.withPermit(section)
  /** Lanes a failed promotion left; tried again with the next promotion. */
  const retry = new Map<string, K.LaneRef>()
  /** The successors' cache (lane-cache.ts). */
  const ahead = makeLaneCache()
  const forget = ahead.forget

  /** A failed read or write of a lane transition: what was remembered may be ahead of the store (a row taken from it and not promoted). */
  const forgetOnError = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> => Effect.tapError(effect, () => Effect.sync(forget))

  const decodeHeads = (vs: ReadonlyArray<Uint8Array | undefined>) => vs.map((v) => (v === undefined ? undefined : K.decodeHeadValue(v)))
  const heads = (refs: ReadonlyArray<K.LaneRef>) =>
    refs.length === 0 ? Effect.succeed([] as Array<K.HeadValue | undefined>) : store.multiGet("index", refs.map(Ordering.headKey)).pipe(Effect.map(decodeHeads))

  /**
   * The lane's next head: its first waiting row, or undefined (the lane is free). `from`: the
   * settled head, read on from its place (no `?W` row sorts below it: its value's `below`).
   */
  const nextOf = (ref: K.LaneRef, from?: K.HeadValue): Effect.Effect<Next | undefined, StoreError> =>
    store
      .scan("index", Ordering.laneWaitingRange(ref, from === undefined || from.below ? undefined : from), { limit: ahead.limit })
      .pipe(Effect.map((page) => ahead.read(ref, page)))

  /** A lane's next head promoted due at `now`, or the lane freed. */
  const next = (ref: K.LaneRef, now: number): Effect.Effect<Deliveries.Transition, StoreError> =>
    Effect.map(nextOf(ref), (n) => (n === undefined ? LaneMoves.laneFree(ref) : LaneMoves.promote(n.row, n.size, now)))

  /** Lanes with no head get their first waiting row as head (the Writer calls it after its commit). */
  const promote = (lanes: ReadonlyArray<K.LaneRef>, now: number): Effect.Effect<void, StoreError> =>
    locked(
      forgetOnError(Effect.gen(function* () {
        const want = new Map<string, K.LaneRef>(retry)
        for (const l of lanes) want.set(laneId(l), l)
        // These lanes got rows past what was read of them.
        ahead.grew(want.keys())
        if (want.size === 0) return
        const refs = [...want.values()]
        const found = yield* heads(refs)
        const ts: Array<Deliveries.Transition> = []
        for (let i = 0; i < refs.length; i++) {
          if (found[i] !== undefined) continue
          const t = yield* next(refs[i]!, now)
          if (t.ops.length > 1) ts.push(t)
        }
        if (ts.length > 0) yield* store.write(Deliveries.batch(ts), { sync: false })
        retry.clear()
      })).pipe(
        // A read or the write failed: every lane asked for is asked again with the next promotion (or at boot).
        Effect.tapError(() => Effect.sync(() => lanes.forEach((l) => retry.set(laneId(l), l))))
      )
    )

  /**
   * The settle of claimed rows with lanes, in one batch with `base` (the rows' own transitions,
   * built by `build` with whether each dead row's lane skips past it). A settled head frees its
   * lane to the next waiting row; a dead head of a `hold` lane stays, held. `take`: the pipeline's
   * hand-off, asked of the new heads before the write; a head it takes is claimed in the batch
   * (`?W` → `?F`), the others are promoted due.
   */
  const settle = (
    items: ReadonlyArray<LaneSettle>,
    build: (laneOf: ReadonlyMap<LaneSettle, K.DeadLane>) => ReadonlyArray<Deliveries.Transition>,
    now: number,
    take?: TakeHeads
  ): Effect.Effect<void, StoreError> =>
    locked(
      forgetOnError(Effect.gen(function* () {
        const refs = items.map((i) => ({ ord: i.ref.ord, lane: i.lane.lane }))
        const found = yield* heads(refs)
        const dead = new Map<LaneSettle, K.DeadLane>()
        const after: Array<Deliveries.Transition> = []
        const nexts: Array<Next> = []
        for (let i = 0; i < items.length; i++) {
          const it = items[i]!
          const h = found[i]
          if (!Ordering.isHead(h, it.ref.seq, it.ref.sink)) continue
          if (it.dead && it.lane.hold) {
            dead.set(it, "held")
            after.push(LaneMoves.laneHold({ ...refs[i]!, seq: it.ref.seq, sink: it.ref.sink }, h.below))
            continue
          }
          if (it.dead) dead.set(it, "skipped")
          const cached = ahead.next(refs[i]!, h.below)
          const n = cached === "free" ? undefined : (cached ?? (yield* nextOf(refs[i]!, h)))
          if (n === undefined) after.push(LaneMoves.laneFree(refs[i]!))
          else nexts.push(n)
        }
        const taken = take === undefined || nexts.length === 0 ? undefined : yield* take(nexts)
        nexts.forEach((n, i) => after.push(taken?.[i] === true ? LaneMoves.promoteClaimed(n.row, n.size) : LaneMoves.promote(n.row, n.size, now)))
        yield* store.write(Deliveries.batch([...build(dead), ...after]), { sync: false })
      }))
    )

  /**
   * Replay of dead rows of lanes: a held head is revived as the head; a row whose lane is free
   * becomes its head; else it waits in the lane at its own seq (next after the current head).
   */
  const revive = (
    rows: ReadonlyArray<{ readonly ref: K.DeadRef; readonly ord: number; readonly lane: number; readonly size: number }>,
    plain: ReadonlyArray<Deliveries.Transition>,
    now: number
  ): Effect.Effect<void, StoreError> =>
    locked(
      Effect.gen(function* () {
        // In accepted order: of several rows of one free lane, the earliest becomes its head.
        const bySeq = [...rows].sort((a, b) => a.ref.seq - b.ref.seq || a.ref.sink - b.ref.sink)
        // A revived row may sort before a lane's cached rows.
        for (const r of bySeq) ahead.drop(r)
        const found = yield* heads(bySeq.map((r) => ({ ord: r.ord, lane: r.lane })))
        // Each lane's head as this batch leaves it: a row revived below it marks it `below`.
        const lanesNow = new Map<string, { row: Ordering.LaneRow; held: boolean; below: boolean }>()
        const ts: Array<Deliveries.Transition> = []
        bySeq.forEach((r, i) => {
          const row: Ordering.LaneRow = { ord: r.ord, lane: r.lane, seq: r.ref.seq, sink: r.ref.sink }
          const id = laneId(row)
          const h = found[i]
          const cur = lanesNow.get(id) ?? (h === undefined ? undefined : { row: { ...row, seq: h.seq, sink: h.sink }, held: h.held, below: h.below })
          if (cur === undefined || Ordering.isHead(h, r.ref.seq, r.ref.sink)) {
            // The lane is free (the earliest revived row of it takes it), or this row is its held head.
            // A free lane's head is marked `below`: a promotion that failed (retried later) may have left `?W` rows under it.
            const below = cur?.below ?? true
            lanesNow.set(id, { row, held: false, below })
            ts.push(LaneMoves.reviveHead(r.ref, row, r.size, now, below))
            return
          }
          ts.push(LaneMoves.reviveWaiting(r.ref, row, r.size))
          if (!cur.below && Ordering.sortsBefore(row, cur.row)) {
            cur.below = true
            lanesNow.set(id, cur)
            ts.push(LaneMoves.headBelow(cur.row, cur.held))
          }
        })
        yield* store.write(Deliveries.batch([...plain, ...ts]), { sync: true })
      })
    )

  /**
   * Heads of `ord` (every tenant's when undefined) whose row is gone (purged, dropped by the DLQ
   * ceiling): the lane moves on. Run after a purge and at boot; O(lanes) of the tenant.
   */
  const repairHeads = (ord: number | undefined, now: number): Effect.Effect<number, StoreError | StoreCorrupt> => {
    const rows =
      ord === undefined
        ? familyRows(store, K.Families.heads, { chunk: LANES_CHUNK })
        : Stream.fromEffect(store.scan("index", Ordering.tenantHeadRange(ord), { limit: 1_000_000 })).pipe(Stream.flatMap(Stream.fromIterable))
    return rows.pipe(
      Stream.grouped(LANES_CHUNK),
      Stream.runFoldEffect(() => 0, (n, chunk) =>
        locked(
          forgetOnError(Effect.gen(function* () {
            // Re-read under the section: a head may have moved since the scan.
            const all = chunk.map((e) => K.decodeHeadKey(e.key))
            const values = yield* heads(all)
            const refs = all.filter((_, i) => values[i] !== undefined)
            const hs = values.filter((h): h is K.HeadValue => h !== undefined)
            const live = hs.length === 0 ? [] : yield* store.multiGet("deliveries", hs.map((h) => K.deliveryKey(h.seq, h.sink)))
            const ts: Array<Deliveries.Transition> = []
            for (let i = 0; i < refs.length; i++) if (live[i] === undefined) ts.push(yield* next(refs[i]!, now))
            if (ts.length > 0) yield* store.write(Deliveries.batch(ts), { sync: true })
            return n + ts.length
          }))
        )
      )
    )
  }

  /** Boot: every lane with waiting rows and no head gets its head (a promotion lost to a crash). */
  const recover = (now: number): Effect.Effect<number, StoreError | StoreCorrupt> =>
    Effect.gen(function* () {
      const repaired = yield* repairHeads(undefined, now)
      let last = ""
      const lanes: Array<K.LaneRef> = []
      yield* familyRows(store, K.Families.waiting, { chunk: LANES_CHUNK }).pipe(
        Stream.runForEach((e) =>
          Effect.sync(() => {
            const w = K.decodeWaitingKey(e.key)
            const id = laneId(w)
            if (id !== last) lanes.push({ ord: w.ord, lane: w.lane })
            last = id
          })
        )
      )
      for (let i = 0; i < lanes.length; i += LANES_CHUNK) yield* promote(lanes.slice(i, i + LANES_CHUNK), now)
      return repaired + lanes.length
    })

  /** A tenant's waiting rows purged, in synced chunks (the pending purge and TEN-5's erase). */
  const purgeWaiting = (ord: number, chunk: number): Effect.Effect<number, StoreError> =>
    locked(
      Effect.gen(function* () {
        forget()
        const page = yield* store.scan("index", Ordering.tenantWaitingRange(ord), { limit: chunk })
        if (page.length === 0) return 0
        const ts = page.map((e) => LaneMoves.purgeWaiting(K.decodeWaitingKey(e.key), K.decodeSizeValue(e.value)))
        yield* store.write(Deliveries.batch(ts), { sync: true })
        return page.length
      })
    )

  /** Held heads of a tenant (the admin API), up to `limit`. */
  const held = (ord: number, limit: number) =>
    store.scan("index", Ordering.tenantHeadRange(ord), { limit: 100_000 }).pipe(
      Effect.map((page) =>
        page
          .map((e) => ({ ...K.decodeHeadKey(e.key), ...K.decodeHeadValue(e.value) }))
          .filter((h) => h.held)
          .slice(0, limit)
          .map((h) => ({ lane: h.lane, seq: h.seq, sink: h.sink }))
      )
    )

  return { promote, settle, revive, repairHeads, recover, purgeWaiting, held, locked, forget }
}

export type Lanes = ReturnType<typeof makeLanes>
