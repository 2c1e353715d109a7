/**
 * Migration 2 → 3, "tenant keys" (TEN-1 §7), the pure half: the cursor, what
 * a step reads next, how old rows decode, and the batch built from what was
 * read. The read half (scans and multi-gets) is `src/queue/format/migrate-tenant-keys.ts`.
 *
 * Phases: 1 due `?d`, 2 inflight `?f`, 3 dead `?x`, 4 archive `?a`, 5 finish.
 * The cursor is `<<phase::8, lastOldKey::binary>>` (empty key: the phase's
 * start); a step reads from just after `lastOldKey`, never from the family
 * start, because the keys already moved are tombstones (TEN-1 §7).
 */
import * as Deliveries from "../deliveries.js"
import { DEFAULT_TENANT } from "../envelope.js"
import * as K from "../keys.js"
import { type Batch, del, deleteRange, type Op } from "../ops.js"
import * as Tenants from "../tenants.js"

/** Old rows moved per step (and per synced batch). */
export const STEP_ROWS = 1_000

export const FROM = 2
export const TO = 3
export const NAME = "tenant-keys"
export const DESCRIPTION = "re-key due/inflight/dead by tenant ordinal, seed per-tenant counters"

export type Phase = 1 | 2 | 3 | 4 | 5
export const Phases = { due: 1, inflight: 2, dead: 3, archive: 4, finish: 5 } as const
export const phaseName = (p: Phase): string => ["", "due", "inflight", "dead", "archive", "finish"][p]!

// ---------------------------------------------------------------------------
// Cursor

export interface Cursor {
  readonly phase: Phase
  /** The last old key this migration handled in `phase`; empty at the phase's start. */
  readonly lastOldKey: Uint8Array
}

const EMPTY = new Uint8Array(0)

export const start: Cursor = { phase: 1, lastOldKey: EMPTY }

export const encodeCursor = (c: Cursor): Uint8Array => Buffer.concat([Buffer.from([c.phase]), c.lastOldKey])

export const decodeCursor = (b: Uint8Array | undefined): Cursor => {
  if (b === undefined) return start
  const phase = b[0]
  if (phase === undefined || phase < 1 || phase > 5) {
    throw new Error(`corrupt tenant-keys cursor: ${K.asBuffer(b).toString("hex")}`)
  }
  return { phase: phase as Phase, lastOldKey: Buffer.from(b.subarray(1)) }
}

// ---------------------------------------------------------------------------
// What to read

/** The old family each data phase drains or rewrites. */
export const phaseFamily = (p: Exclude<Phase, 5>): K.Family =>
  [K.Families.due_v2, K.Families.inflight_v2, K.Families.dead, K.Families.archive][p - 1]!

/** The rest of the cursor's phase: keys strictly after `lastOldKey`, sentinels excluded. */
export const scanRange = (c: Cursor): { readonly cf: "index"; readonly lo: Uint8Array; readonly hi: Uint8Array } => {
  if (c.phase === 5) throw new Error("the finish phase reads nothing")
  const f = phaseFamily(c.phase)
  const data = K.familyDataRange(f)
  // The smallest key above lastOldKey is lastOldKey followed by a zero byte.
  return { cf: "index", lo: c.lastOldKey.length === 0 ? data.lo : Buffer.concat([c.lastOldKey, Buffer.from([0])]), hi: data.hi }
}

/** Where the next read starts after a page of `got` rows out of `asked`, the last being `lastKey`. */
export const advance = (c: Cursor, got: number, asked: number, lastKey: Uint8Array | undefined): Cursor =>
  got < asked || lastKey === undefined
    ? { phase: (c.phase + 1) as Phase, lastOldKey: EMPTY }
    : { phase: c.phase, lastOldKey: Buffer.from(lastKey) }

// ---------------------------------------------------------------------------
// Old rows

export type OldRow =
  | { readonly phase: 1; readonly key: Uint8Array; readonly at: number; readonly seq: number; readonly sink: number; readonly size: number }
  | { readonly phase: 2; readonly key: Uint8Array; readonly seq: number; readonly sink: number; readonly size: number }
  | {
      readonly phase: 3
      readonly at: number
      readonly seq: number
      readonly sink: number
      readonly sourceId: string
      readonly id: string
      /** Already carries an ord (format 3 value): nothing to do. */
      readonly migrated: boolean
    }
  | { readonly phase: 4; readonly seq: number; readonly size: number; readonly migrated: boolean }

/** Decode a row of a data phase. A malformed key or value is a defect that names the key. */
export const decodeRow = (phase: Exclude<Phase, 5>, key: Uint8Array, value: Uint8Array): OldRow => {
  switch (phase) {
    case 1: {
      const r = K.decodeDueV2Key(key)
      return { phase, key, at: r.at, seq: r.seq, sink: r.sink, size: K.decodeSizeValue(value) }
    }
    case 2: {
      const r = K.decodeInflightV2Key(key)
      return { phase, key, seq: r.seq, sink: r.sink, size: K.decodeSizeValue(value) }
    }
    case 3: {
      const r = K.decodeDeadKey(key)
      const v = K.decodeDeadValue(value)
      return { phase, at: r.at, seq: r.seq, sink: r.sink, sourceId: v.sourceId, id: v.id, migrated: v.ord !== undefined }
    }
    case 4: {
      const seq = K.decodeArchiveKey(key)
      // A format 3 value is <<size::32, ord::32>>; format 2 is <<size::32>>.
      if (value.length === 8) return { phase, seq, size: K.decodeArchiveValue(value).size, migrated: true }
      return { phase, seq, size: K.decodeSizeValue(value), migrated: false }
    }
  }
}

const pending = (r: OldRow): boolean => !(r.phase === 3 || r.phase === 4) || !r.migrated

/** Hooks to multi-get: unique by seq, in first-seen order. */
export const hookSeqs = (rows: ReadonlyArray<OldRow>): ReadonlyArray<number> => {
  const seqs = new Set<number>()
  for (const r of rows) if (pending(r)) seqs.add(r.seq)
  return [...seqs]
}

/** Delivery rows to multi-get: the dead rows', for their size (a `?x` value has none). */
export const deliveryRefs = (rows: ReadonlyArray<OldRow>): ReadonlyArray<K.DeliveryRef> =>
  rows.flatMap((r) => (r.phase === 3 && !r.migrated ? [{ seq: r.seq, sink: r.sink }] : []))

export const refId = (r: K.DeliveryRef): string => `${r.seq}:${r.sink}`

/**
 * The tenant a hook files under: its envelope's tenant, else "default". A hook
 * that is gone or does not decode is "default" (TEN-1 §7), and so is a tenant
 * id that could not be stored as a `?n` key (empty, NUL, too long). `valid`
 * says a tenant id passed that check before (the run's ordinals), to skip it.
 */
export const tenantOfHook = (bytes: Uint8Array | undefined, valid?: (tenant: string) => boolean): string => {
  const t = tenantIdOf(bytes)
  return t === undefined || t === null || !(valid?.(t) === true || Tenants.validTenantId(t)) ? DEFAULT_TENANT : t
}

/**
 * `decodeEnvelope(bytes)?.tenantId` without building the envelope (no body view, no copy of
 * the meta): the migration decodes every hook for its tenant alone. Same rules: version 1, the
 * meta inside the value, valid JSON with a string `id` and an array `sinks`.
 */
export const tenantIdOf = (bytes: Uint8Array | undefined): string | null | undefined => {
  if (bytes === undefined || bytes.length < 5 || bytes[0] !== ENVELOPE_VERSION) return undefined
  const metaLen = bytes[1]! * 0x1000000 + ((bytes[2]! << 16) | (bytes[3]! << 8) | bytes[4]!)
  if (5 + metaLen > bytes.length) return undefined
  try {
    const m = JSON.parse(K.asBuffer(bytes).toString("utf8", 5, 5 + metaLen)) as { id?: unknown; sinks?: unknown; tenantId?: string | null }
    return typeof m.id !== "string" || !Array.isArray(m.sinks) ? undefined : m.tenantId
  } catch {
    return undefined
  }
}

/** The first byte of an envelope this build decodes (src/domain/envelope.ts). */
const ENVELOPE_VERSION = 1

/** The tenant of each hook read (decoded once per hook, not per row). */
export const tenantsBySeq = (
  seqs: ReadonlyArray<number>,
  hooks: ReadonlyArray<Uint8Array | undefined>,
  valid?: (tenant: string) => boolean
): ReadonlyMap<number, string> => {
  const out = new Map<number, string>()
  for (let i = 0; i < seqs.length; i++) out.set(seqs[i]!, tenantOfHook(hooks[i], valid))
  return out
}

/** Tenants a step must resolve to ordinals, in first-seen order. */
export const tenantsOf = (tenants: ReadonlyMap<number, string>): ReadonlyArray<string> => [...new Set(tenants.values())]

/** A `?n` value as an ordinal. */
export const decodeOrd = (v: Uint8Array | undefined): number | undefined => (v === undefined ? undefined : K.decodeU32(v))

// ---------------------------------------------------------------------------
// The batch

export interface StepInput {
  /** Rows read this step, in read order (phases ascending). */
  readonly rows: ReadonlyArray<OldRow>
  /** Tenant by hook seq (`tenantsBySeq`) of the hooks read this step. */
  readonly tenants: ReadonlyMap<number, string>
  /** The ordinal of a hook whose tenant an earlier step of the run resolved (its hook was not read again). */
  readonly ordOfHook?: (seq: number) => number | undefined
  /** Delivery rows by `refId` (dead rows only). */
  readonly deliveries: ReadonlyMap<string, Uint8Array | undefined>
  /** Ordinals of the step's tenants already allocated (absent or undefined: none yet). */
  readonly ords: ReadonlyMap<string, number | undefined>
  /** `m:next_ord`: the next ordinal to allocate. */
  readonly nextOrd: number
  /** The migration's start time (ms), fixed once for the whole migration. */
  readonly startedAt: number
  /** The cursor after this step; phase 5 means this step finishes. */
  readonly next: Cursor
}

export interface StepOutput {
  readonly ops: Batch
  /** Old rows moved or rewritten. */
  readonly moved: number
  readonly allocated: ReadonlyArray<{ readonly tenant: string; readonly ord: number }>
  /** Every tenant of the step with its ordinal (known or allocated). */
  readonly resolved: ReadonlyMap<string, number>
  /** `m:next_ord` after the step. */
  readonly nextOrd: number
}

/** TEN-1 §7 phase 5: the old due and inflight families, strays and format 2 sentinels included. */
export const finishOps = (): ReadonlyArray<Op> =>
  [K.Families.due_v2, K.Families.inflight_v2].map((f) => {
    const r = K.familyRange(f)
    return deleteRange(f.cf, r.lo, r.hi)
  })

export const build = (input: StepInput): StepOutput => {
  let nextOrd = input.nextOrd
  const known = new Map<string, number>()
  for (const [t, ord] of input.ords) if (ord !== undefined) known.set(t, ord)
  const allocated: Array<{ tenant: string; ord: number }> = []
  const extra: Array<Op> = []
  // Single-threaded (nothing serves yet): ordinals in first-sight order, never past a known one.
  const ordOf = (tenant: string): number => {
    const ord = known.get(tenant)
    if (ord !== undefined) return ord
    const fresh = nextOrd++
    known.set(tenant, fresh)
    allocated.push({ tenant, ord: fresh })
    extra.push(...Tenants.allocate(tenant, fresh))
    return fresh
  }

  const transitions: Array<Deliveries.Transition> = []
  let moved = 0
  for (const r of input.rows) {
    if (!pending(r)) continue
    const ord = input.ordOfHook?.(r.seq) ?? ordOf(input.tenants.get(r.seq) ?? DEFAULT_TENANT)
    moved++
    switch (r.phase) {
      case 1: {
        // TEN-1 §7: a row due after the migration started was waiting out a retry.
        const kind: K.DueKind = r.at > input.startedAt ? 1 : 0
        transitions.push(Deliveries.Migrated.due({ ord, at: r.at, seq: r.seq, sink: r.sink, size: r.size, kind }))
        // The old `?d` / `?f` row is deleted by its key exactly as read (no second encoding).
        extra.push(del("index", r.key))
        break
      }
      case 2:
        // bytes +size as well: bytes is Σ size over due, inflight and dead rows (TEN-1 §4).
        transitions.push(Deliveries.Migrated.inflight({ ord, seq: r.seq, sink: r.sink }, r.size))
        extra.push(del("index", r.key))
        break
      case 3: {
        const size = Deliveries.decodeRow(input.deliveries.get(refId(r)))?.size ?? 0
        transitions.push(Deliveries.Migrated.dead({ at: r.at, seq: r.seq, sink: r.sink }, ord, size, { sourceId: r.sourceId, id: r.id }))
        break
      }
      case 4:
        transitions.push(Deliveries.Migrated.archive(r.seq, r.size, ord))
        break
    }
  }
  if (allocated.length > 0) extra.push(Tenants.nextOrdOp(nextOrd))
  if (input.next.phase === 5) extra.push(...finishOps())
  return { ops: Deliveries.batch(transitions, extra), moved, allocated, resolved: known, nextOrd }
}
