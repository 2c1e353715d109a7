/**
 * Delivery transitions as pure op builders (TEN-1 §3–§6, §9).
 *
 * The only module that builds `?D`, `?F`, `?X` and `?A` keys (and the format 2
 * `?d`/`?f` ones, for fixtures): every other module asks for a transition or a
 * range here. A transition is its ops plus its counter deltas; `batch` joins
 * transitions into one atomic batch whose deltas go through `Counters.ops`,
 * so an index row never changes without its counts.
 */
import * as Counters from "./counters.js"
import { type Delta, delta } from "./counters.js"
import * as K from "./keys.js"
import { type Batch, del, type Op, put } from "./ops.js"
import * as Ordering from "./ordering.js"

export interface Transition {
  readonly ops: ReadonlyArray<Op>
  readonly deltas: ReadonlyArray<Delta>
}

const EMPTY = new Uint8Array(0)

/** One atomic batch of transitions: their ops, markers coalesced, then their coalesced deltas. */
export const batch = (transitions: ReadonlyArray<Transition>, extra: ReadonlyArray<Op> = []): Batch => {
  const out: Array<Op> = []
  // Markers seen, by bucket then ord (a batch spans a few seconds).
  const markers = new Map<number, Set<number>>()
  const deltas: Array<Delta> = []
  for (const t of transitions) {
    for (const op of t.ops) {
      if (op._tag === "put" && op.cf === "index" && op.key[0] === K.P.active) {
        const m = K.decodeActiveKey(op.key)
        let ords = markers.get(m.bucket)
        if (ords === undefined) markers.set(m.bucket, (ords = new Set()))
        if (ords.has(m.ord)) continue
        ords.add(m.ord)
      }
      out.push(op)
    }
    for (const d of t.deltas) deltas.push(d)
  }
  for (const op of extra) out.push(op)
  for (const op of Counters.ops(deltas)) out.push(op)
  return out
}

// ---------------------------------------------------------------------------
// Delivery rows (deliveries column family): <<1::8, attempts::16, lastStatus::16, size::32, lastAt::64>>

export interface DeliveryRow {
  /** Attempts made so far. */
  readonly attempts: number
  /** HTTP status of the last attempt; 0 for none or a transport error. */
  readonly lastStatus: number
  /** The size this row counts in `bytes` (TEN-1 §4). */
  readonly size: number
  /** When the last attempt ended (ms); 0 before the first. */
  readonly lastAt: number
}

export const encodeRow = (r: DeliveryRow): Uint8Array => {
  const b = Buffer.allocUnsafe(17) // every byte written below
  b[0] = 1
  b.writeUInt16BE(Math.min(r.attempts, 0xffff), 1)
  b.writeUInt16BE(Math.min(r.lastStatus, 0xffff), 3)
  b.writeUInt32BE(r.size, 5)
  K.writeU64(b, r.lastAt, 9)
  return b
}

export const decodeRow = (v: Uint8Array | undefined): DeliveryRow | undefined => {
  if (v === undefined || v.length !== 17 || v[0] !== 1) return undefined
  return { attempts: K.readU16(v, 1), lastStatus: K.readU16(v, 3), size: K.readU32(v, 5), lastAt: K.readU64(v, 9) }
}

export const freshRow = (size: number): DeliveryRow => ({ attempts: 0, lastStatus: 0, size, lastAt: 0 })

/** A delivery row's put and delete, and the `?c` marker for reclaim (for transitions built beside this module: lane-moves.ts). */
export const rowPut = (seq: number, sink: number, row: DeliveryRow): Op => put("deliveries", K.deliveryKey(seq, sink), encodeRow(row))
export const rowDel = (seq: number, sink: number): Op => del("deliveries", K.deliveryKey(seq, sink))
export const clearedPut = (seq: number): Op => put("index", K.clearedKey(seq))

// ---------------------------------------------------------------------------
// Due rows and their active markers

export interface DueRow {
  readonly ord: number
  readonly at: number
  readonly seq: number
  readonly sink: number
  readonly size: number
  readonly kind: K.DueKind
}

/** The due put and its active marker: there is no way to write a due row without its marker (TEN-1 §5). */
export const dueOps = (row: DueRow): ReadonlyArray<Op> => [
  put("index", K.dueKey(row.ord, row.at, row.seq, row.sink), K.dueValue(row.size, row.kind)),
  put("index", K.activeKey(K.bucketOf(row.at), row.ord))
]

const pendingField = (kind: K.DueKind): Counters.FieldName => (kind === 0 ? "pending" : "scheduled")

// ---------------------------------------------------------------------------
// Transitions

export interface IngestInput {
  readonly seq: number
  readonly ord: number
  /** The encoded envelope (the hooks row value). */
  readonly envelope: Uint8Array
  readonly sinkCount: number
  readonly at: number
  /** By destination, when some are held (their breaker is open): the due time of each row; else every row is due at `at`. */
  readonly ats?: ReadonlyArray<number> | undefined
  /** By destination, the ordered lane of each row that has one (docs/delivery.md "Ordered delivery"): such a row waits in `?W`. */
  readonly lanes?: ReadonlyArray<number | undefined> | undefined
  readonly archive: boolean
}

/** First sight of a hook: hook row, one delivery row and due row (kind 0) per sink, and the archive obligation. */
export const ingest = (h: IngestInput): Transition => {
  const size = h.envelope.length
  const ops: Array<Op> = [put("hooks", K.hookKey(h.seq), h.envelope)]
  let waiting = 0
  for (let sink = 0; sink < h.sinkCount; sink++) {
    ops.push(rowPut(h.seq, sink, freshRow(size)))
    const lane = h.lanes?.[sink]
    if (lane !== undefined) {
      // An ordered row always enters its lane's queue; the Queue promotes it when it is the lane's first (Queue.promote).
      ops.push(Ordering.waitPut({ ord: h.ord, lane, seq: h.seq, sink }, size))
      waiting++
    } else ops.push(...dueOps({ ord: h.ord, at: h.ats === undefined ? h.at : h.ats[sink]!, seq: h.seq, sink, size, kind: 0 }))
  }
  // A hook for no destination (only for endpoints, none of which wanted it): kept until reclaim takes it.
  if (h.sinkCount === 0) ops.push(clearedPut(h.seq))
  const deltas = h.sinkCount === 0 ? [] : [delta(h.ord, "pending", h.sinkCount - waiting), delta(h.ord, "bytes", h.sinkCount * size)]
  if (waiting > 0) deltas.push(delta(h.ord, "waiting", waiting))
  if (h.archive) {
    ops.push(put("index", K.archiveKey(h.seq), K.archiveValue(size, h.ord)))
    deltas.push(delta(h.ord, "archive_pending", 1))
  }
  return { ops, deltas }
}

/** A new delivery row for an existing hook (rows imported or a route's added sink): kind 0. */
export const expand = (r: { readonly ord: number; readonly seq: number; readonly sink: number; readonly size: number; readonly at: number }): Transition => ({
  ops: [rowPut(r.seq, r.sink, freshRow(r.size)), ...dueOps({ ...r, kind: 0 })],
  deltas: [delta(r.ord, "pending", 1), delta(r.ord, "bytes", r.size)]
})

/** A row's `?F` row: claimed, its size counted inflight. */
export const inflightPut = (ord: number, seq: number, sink: number, size: number): Op => put("index", K.inflightKey(ord, seq, sink), K.sizeValue(size))

/** Due → inflight, carrying ord and size. The marker stays; the pipeline's cleanup removes stale ones. */
export const claim = (ref: K.DueRef, v: K.DueValue): Transition => ({
  ops: [del("index", K.dueKey(ref.ord, ref.at, ref.seq, ref.sink)), inflightPut(ref.ord, ref.seq, ref.sink, v.size)],
  deltas: [delta(ref.ord, pendingField(v.kind), -1), delta(ref.ord, "inflight", 1)]
})

/**
 * Due → due at `at`, kind and attempts kept: its destination's breaker is open, so the row waits for
 * the probe's time rather than being read and refused at every visit (docs/delivery.md "Failing destinations").
 */
export const defer = (ref: K.DueRef, v: K.DueValue, at: number): Transition => ({
  ops: [del("index", K.dueKey(ref.ord, ref.at, ref.seq, ref.sink)), ...dueOps({ ord: ref.ord, at, seq: ref.seq, sink: ref.sink, size: v.size, kind: v.kind })],
  deltas: []
})

/** Claim undone (a tick that failed after claiming): inflight → due as it was, `at` and kind kept. */
export const unclaim = (ref: K.DueRef, v: K.DueValue): Transition => ({
  ops: [del("index", K.inflightKey(ref.ord, ref.seq, ref.sink)), ...dueOps({ ord: ref.ord, at: ref.at, seq: ref.seq, sink: ref.sink, size: v.size, kind: v.kind })],
  deltas: [delta(ref.ord, "inflight", -1), delta(ref.ord, pendingField(v.kind), 1)]
})

/** Delivered: the row is gone; `?c` tells reclaim to look at the hook. */
export const delivered = (ref: K.InflightRef, size: number): Transition => ({
  ops: [del("index", K.inflightKey(ref.ord, ref.seq, ref.sink)), rowDel(ref.seq, ref.sink), clearedPut(ref.seq)],
  deltas: [delta(ref.ord, "inflight", -1), delta(ref.ord, "bytes", -size)]
})

/** A failed attempt with attempts left: back to due as kind 1 at the next attempt time. */
export const retry = (ref: K.InflightRef, row: DeliveryRow, at: number): Transition => ({
  ops: [
    del("index", K.inflightKey(ref.ord, ref.seq, ref.sink)),
    rowPut(ref.seq, ref.sink, row),
    ...dueOps({ ord: ref.ord, at, seq: ref.seq, sink: ref.sink, size: row.size, kind: 1 })
  ],
  deltas: [delta(ref.ord, "inflight", -1), delta(ref.ord, "scheduled", 1)]
})

/** Dead-letter: `?x` in global time order with `{sourceId, id, ord}` (and, a lane's head, what its lane did), and its by-tenant twin `?X`. */
export const deadLetter = (
  ref: K.InflightRef,
  row: DeliveryRow,
  at: number,
  hook: { readonly sourceId: string; readonly id: string },
  lane?: K.DeadLane
): Transition => ({
  ops: [
    del("index", K.inflightKey(ref.ord, ref.seq, ref.sink)),
    rowPut(ref.seq, ref.sink, row),
    put("index", K.deadKey(at, ref.seq, ref.sink), K.deadValue({ sourceId: hook.sourceId, id: hook.id, ord: ref.ord, lane })),
    put("index", K.deadByTenantKey(ref.ord, at, ref.seq, ref.sink), EMPTY)
  ],
  deltas: [delta(ref.ord, "inflight", -1), delta(ref.ord, "dead", 1)]
})

/** A dead row's `?x` and `?X` deletes (a revive into an ordered lane, lane-moves.ts). */
export const deadDels = (ref: K.DeadRef, ord: number): ReadonlyArray<Op> => [
  del("index", K.deadKey(ref.at, ref.seq, ref.sink)),
  del("index", K.deadByTenantKey(ord, ref.at, ref.seq, ref.sink))
]

/** Replay: a dead row comes back as a first attempt (kind 0) due at `at`, attempts reset. */
export const revive = (ref: K.DeadRef, ord: number, size: number, at: number): Transition => ({
  ops: [
    del("index", K.deadKey(ref.at, ref.seq, ref.sink)),
    del("index", K.deadByTenantKey(ord, ref.at, ref.seq, ref.sink)),
    rowPut(ref.seq, ref.sink, freshRow(size)),
    ...dueOps({ ord, at, seq: ref.seq, sink: ref.sink, size, kind: 0 })
  ],
  deltas: [delta(ord, "dead", -1), delta(ord, "pending", 1)]
})

/** Boot: an inflight row left by a crash goes back to due as kind 0. */
export const recover = (ref: K.InflightRef, size: number, at: number): Transition => ({
  ops: [
    del("index", K.inflightKey(ref.ord, ref.seq, ref.sink)),
    ...dueOps({ ord: ref.ord, at, seq: ref.seq, sink: ref.sink, size, kind: 0 })
  ],
  deltas: [delta(ref.ord, "inflight", -1), delta(ref.ord, "pending", 1)]
})

/** A claimed row whose hook is gone or undecodable: dropped through the counted path. */
export const orphanDrop = (ref: K.InflightRef, size: number): Transition => ({
  ops: [del("index", K.inflightKey(ref.ord, ref.seq, ref.sink)), rowDel(ref.seq, ref.sink), clearedPut(ref.seq)],
  deltas: [delta(ref.ord, "inflight", -1), delta(ref.ord, "bytes", -size)]
})

/** Purge of a waiting row (never an inflight one). */
export const purgeDue = (ref: K.DueRef, v: K.DueValue): Transition => ({
  ops: [del("index", K.dueKey(ref.ord, ref.at, ref.seq, ref.sink)), rowDel(ref.seq, ref.sink), clearedPut(ref.seq)],
  deltas: [delta(ref.ord, pendingField(v.kind), -1), delta(ref.ord, "bytes", -v.size)]
})

/** Purge (or the DLQ ceiling's drop) of a dead row: `?x` and `?X` together. */
export const purgeDead = (ref: K.DeadRef, ord: number, size: number): Transition => ({
  ops: [
    del("index", K.deadKey(ref.at, ref.seq, ref.sink)),
    del("index", K.deadByTenantKey(ord, ref.at, ref.seq, ref.sink)),
    rowDel(ref.seq, ref.sink),
    clearedPut(ref.seq)
  ],
  deltas: [delta(ord, "dead", -1), delta(ord, "bytes", -size)]
})

/** The compactor wrote the hook to a segment: the obligation is settled. */
export const archiveSettle = (seq: number, ord: number): Transition => ({
  ops: [del("index", K.archiveKey(seq)), clearedPut(seq)],
  deltas: [delta(ord, "archive_pending", -1)]
})

/** Retention dropped the obligation unwritten. Same effect on the index; counted separately in metrics. */
export const archiveDrop = archiveSettle

// ---------------------------------------------------------------------------
// Ranges and marker ops for readers (the Queue layer) and the pipeline's cleanup

export interface KeyRange {
  readonly lo: Uint8Array
  readonly hi: Uint8Array
}

/** Markers with bucket <= floor(now / 1000), oldest first. */
export const activeRange = (now: number): KeyRange => ({
  lo: K.familyDataRange(K.Families.active).lo,
  hi: K.activeUpTo(K.bucketOf(now))
})

/** A tenant's due rows with floorAt <= at <= now, in `at` order. */
export const dueRange = (ord: number, floorAt: number, now: number): KeyRange => ({
  lo: K.dueFrom(ord, floorAt),
  hi: K.dueUpTo(ord, now)
})

/** A tenant's due rows after the row `after` (exclusive) up to now, in `at` order (a scan resumed past refused rows). */
export const dueRangeAfter = (ord: number, after: { readonly at: number; readonly seq: number; readonly sink: number }, now: number): KeyRange => ({
  lo: K.keyAfter(K.dueKey(ord, after.at, after.seq, after.sink)),
  hi: K.dueUpTo(ord, now)
})

export const tenantDueRange = (ord: number): KeyRange => K.range(K.duePrefix(ord))

/** A tenant's due rows due at or after `floorAt` (any time later). */
export const tenantDueFrom = (ord: number, floorAt: number): KeyRange => ({ lo: K.dueFrom(ord, floorAt), hi: tenantDueRange(ord).hi })
export const tenantInflightRange = (ord: number): KeyRange => K.range(K.inflightPrefix(ord))
export const tenantDeadRange = (ord: number): KeyRange => K.range(K.deadByTenantPrefix(ord))

export const markerPut = (bucket: number, ord: number): Op => put("index", K.activeKey(bucket, ord))
export const markerDel = (bucket: number, ord: number): Op => del("index", K.activeKey(bucket, ord))

/** The `?x` key a `?X` key mirrors (the join of TEN-1 §6). */
export const deadKeyOfByTenant = (key: Uint8Array): { readonly ord: number; readonly ref: K.DeadRef; readonly deadKey: Uint8Array } => {
  const r = K.decodeDeadByTenantKey(key)
  return { ord: r.ord, ref: { at: r.at, seq: r.seq, sink: r.sink }, deadKey: K.deadKey(r.at, r.seq, r.sink) }
}

// ---------------------------------------------------------------------------
// Format 2 (fixtures and the 2 → 3 migration only)

export const V2 = {
  /** A format 2 hook: tenant only in the envelope, global `?d` due rows, `?a` valued <<size::32>>. */
  ingest: (h: Omit<IngestInput, "ord">): ReadonlyArray<Op> => {
    const size = h.envelope.length
    const ops: Array<Op> = [put("hooks", K.hookKey(h.seq), h.envelope)]
    for (let sink = 0; sink < h.sinkCount; sink++) {
      ops.push(rowPut(h.seq, sink, freshRow(size)))
      ops.push(put("index", K.dueV2Key(h.at, h.seq, sink), K.sizeValue(size)))
    }
    if (h.archive) ops.push(put("index", K.archiveKey(h.seq), K.sizeValue(size)))
    return ops
  },
  dueKey: K.dueV2Key,
  inflightKey: K.inflightV2Key,
  dueRow: (at: number, seq: number, sink: number, size: number): Op => put("index", K.dueV2Key(at, seq, sink), K.sizeValue(size)),
  inflightRow: (seq: number, sink: number, size: number): Op => put("index", K.inflightV2Key(seq, sink), K.sizeValue(size)),
  deadRow: (at: number, seq: number, sink: number, hook: { readonly sourceId: string; readonly id: string }): Op =>
    put("index", K.deadKey(at, seq, sink), K.deadValueV2(hook)),
  archiveRow: (seq: number, size: number): Op => put("index", K.archiveKey(seq), K.sizeValue(size))
} as const

/** Migration phase writes for rows re-keyed from format 2 (TEN-1 §7). */
export const Migrated = {
  due: (row: DueRow): Transition => ({
    ops: dueOps(row),
    deltas: [delta(row.ord, pendingField(row.kind), 1), delta(row.ord, "bytes", row.size)]
  }),
  inflight: (ref: K.InflightRef, size: number): Transition => ({
    ops: [put("index", K.inflightKey(ref.ord, ref.seq, ref.sink), K.sizeValue(size))],
    deltas: [delta(ref.ord, "inflight", 1), delta(ref.ord, "bytes", size)]
  }),
  dead: (ref: K.DeadRef, ord: number, size: number, hook: { readonly sourceId: string; readonly id: string }): Transition => ({
    ops: [
      put("index", K.deadKey(ref.at, ref.seq, ref.sink), K.deadValue({ ...hook, ord })),
      put("index", K.deadByTenantKey(ord, ref.at, ref.seq, ref.sink), EMPTY)
    ],
    deltas: [delta(ord, "dead", 1), delta(ord, "bytes", size)]
  }),
  archive: (seq: number, size: number, ord: number): Transition => ({
    ops: [put("index", K.archiveKey(seq), K.archiveValue(size, ord))],
    deltas: [delta(ord, "archive_pending", 1)]
  })
} as const

// ---------------------------------------------------------------------------
// Keys and ranges for readers (the Queue layer's DLQ reads, the store check)

/** The `?A` key of a marker, for readers that check one exists (the store check). */
export const markerKey = (bucket: number, ord: number): Uint8Array => K.activeKey(bucket, ord)

/** The `?X` key that mirrors a `?x` row of tenant `ord` (the other direction of `deadKeyOfByTenant`). */
export const byTenantKeyOfDead = (ord: number, ref: K.DeadRef): Uint8Array => K.deadByTenantKey(ord, ref.at, ref.seq, ref.sink)

/** A tenant's `?X` rows strictly older than `before` in (at, seq, sink) order; all of them without `before`. */
export const tenantDeadRangeBefore = (ord: number, before?: K.DeadRef): KeyRange =>
  before === undefined
    ? tenantDeadRange(ord)
    : { lo: K.deadByTenantPrefix(ord), hi: K.deadByTenantKey(ord, before.at, before.seq, before.sink) }

/** A tenant's `?X` rows dead-lettered at `fromAt` ≤ at ≤ `toAt` (either bound optional), in time order (replay). */
export const tenantDeadRangeBetween = (ord: number, fromAt?: number, toAt?: number): KeyRange => {
  const all = tenantDeadRange(ord)
  return {
    lo: fromAt === undefined ? all.lo : K.deadByTenantKey(ord, fromAt, 0, 0),
    hi: toAt === undefined ? all.hi : K.deadByTenantKey(ord, toAt + 1, 0, 0)
  }
}
