/**
 * Key codecs and the family table of store formats 2 and 3 (TEN-1 §1, §3).
 *
 * Every key is built and parsed here, with fixed-width big-endian integers so
 * that byte order equals numeric order. Encoders and decoders come in pairs.
 * Rule (TEN-1 §3, §9): the `?D`, `?F`, `?X` and `?A` constructors (and the
 * format 2 `?d`/`?f` ones) are called only from `deliveries.ts` (and the
 * migration's read side uses only decoders); a source test enforces it.
 */
import type { ColumnFamily } from "./ops.js"

// ---------------------------------------------------------------------------
// Integers

const TWO32 = 0x1_0000_0000

export const writeU64 = (b: Buffer, n: number, off: number): void => {
  b.writeUInt32BE(Math.floor(n / TWO32), off)
  b.writeUInt32BE(n >>> 0, off + 4)
}

export const readU64 = (b: Uint8Array, off: number): number => {
  const buf = asBuffer(b)
  return buf.readUInt32BE(off) * TWO32 + buf.readUInt32BE(off + 4)
}

export const readU32 = (b: Uint8Array, off: number): number => asBuffer(b).readUInt32BE(off)
export const readU16 = (b: Uint8Array, off: number): number => asBuffer(b).readUInt16BE(off)

export const asBuffer = (b: Uint8Array): Buffer =>
  Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)

const ch = (c: string): number => c.charCodeAt(0)

const fail = (what: string, key: Uint8Array): never => {
  throw new Error(`corrupt ${what} key: ${asBuffer(key).toString("hex")}`)
}

// ---------------------------------------------------------------------------
// Prefix bytes of the index, tenants and audit column families

export const P = {
  due: ch("D"),
  inflight: ch("F"),
  dead: ch("x"),
  deadByTenant: ch("X"),
  archive: ch("a"),
  active: ch("A"),
  cleared: ch("c"),
  claim: ch("k"),
  dedupe: ch("u"),
  expiry: ch("e"),
  quarantine: ch("q"),
  dueV2: ch("d"),
  inflightV2: ch("f"),
  tenant: ch("t"),
  tenantOrd: ch("n"),
  audit: ch("a")
} as const

// ---------------------------------------------------------------------------
// Ranges

/** The smallest key greater than every key that starts with `prefix`, or undefined (all 0xFF). */
export const successor = (prefix: Uint8Array): Uint8Array | undefined => {
  for (let i = prefix.length - 1; i >= 0; i--) {
    if (prefix[i]! !== 0xff) {
      const out = Buffer.from(prefix.subarray(0, i + 1))
      out[i] = prefix[i]! + 1
      return out
    }
  }
  return undefined
}

/**
 * A zero-filled buffer for a key or a small value, cut from Node's shared 8 KiB pool
 * (`allocUnsafe`) rather than one ArrayBuffer each (`alloc`): a batch holds about 16 of them a
 * hook, and fewer ArrayBuffers make the young-generation GC cheaper. Every reader honours
 * `byteOffset`; nothing here transfers `.buffer`.
 */
export const zeroed = (n: number): Buffer => Buffer.allocUnsafe(n).fill(0)

/** A key above every key of a column family (used when a prefix has no successor). */
export const CF_END: Uint8Array = Buffer.alloc(64, 0xff)

/** [lo, hi) bounds of every key starting with `prefix`. */
export const range = (prefix: Uint8Array): { readonly lo: Uint8Array; readonly hi: Uint8Array } => ({
  lo: prefix,
  hi: successor(prefix) ?? CF_END
})

export const compare = (a: Uint8Array, b: Uint8Array): number => Buffer.compare(a, b)

// ---------------------------------------------------------------------------
// Family table

export type FamilyName =
  | "hooks"
  | "deliveries"
  | "due"
  | "inflight"
  | "dead"
  | "dead_by_tenant"
  | "archive"
  | "active"
  | "cleared"
  | "claim"
  | "dedupe"
  | "expiry"
  | "quarantine"
  | "due_v2"
  | "inflight_v2"
  | "audit"
  | "tenants"
  | "tenant_ords"
  | "counters"

export interface Family {
  readonly name: FamilyName
  readonly cf: ColumnFamily
  /** Store formats the family exists in. */
  readonly formats: ReadonlyArray<2 | 3>
  /** Lowest key of the family; itself a sentinel. */
  readonly lo: Uint8Array
  /** Highest key of the family; itself a sentinel, above every real key. */
  readonly hi: Uint8Array
  /** Sentinel value (counters: an 8-byte zero so that merges read back cleanly). */
  readonly sentinelValue: Uint8Array
}

const EMPTY = new Uint8Array(0)
const ZERO8 = new Uint8Array(8)

const prefixed = (name: FamilyName, cf: ColumnFamily, prefix: number, keyLen: number, formats: ReadonlyArray<2 | 3>): Family => {
  const hi = Buffer.alloc(keyLen + 1, 0xff)
  hi[0] = prefix
  return { name, cf, formats, lo: Buffer.from([prefix]), hi, sentinelValue: EMPTY }
}

const whole = (name: FamilyName, cf: ColumnFamily, keyLen: number, formats: ReadonlyArray<2 | 3>, sentinelValue = EMPTY): Family => ({
  name,
  cf,
  formats,
  lo: Buffer.alloc(keyLen, 0),
  hi: Buffer.alloc(keyLen + 1, 0xff),
  sentinelValue
})

const V2: ReadonlyArray<2 | 3> = [2]
const V3: ReadonlyArray<2 | 3> = [3]
const BOTH: ReadonlyArray<2 | 3> = [2, 3]

export const Families: Readonly<Record<FamilyName, Family>> = {
  hooks: whole("hooks", "hooks", 8, BOTH),
  deliveries: whole("deliveries", "deliveries", 10, BOTH),
  due: prefixed("due", "index", P.due, 22, V3),
  inflight: prefixed("inflight", "index", P.inflight, 14, V3),
  dead: prefixed("dead", "index", P.dead, 18, BOTH),
  dead_by_tenant: prefixed("dead_by_tenant", "index", P.deadByTenant, 22, V3),
  archive: prefixed("archive", "index", P.archive, 8, BOTH),
  active: prefixed("active", "index", P.active, 12, V3),
  cleared: prefixed("cleared", "index", P.cleared, 8, BOTH),
  claim: prefixed("claim", "index", P.claim, 10, BOTH),
  // Variable-length tenant strings: UTF-8 never contains 0xFF, so [p, 0xFF] is above every key.
  dedupe: { name: "dedupe", cf: "index", formats: BOTH, lo: Buffer.from([P.dedupe]), hi: Buffer.from([P.dedupe, 0xff]), sentinelValue: EMPTY },
  expiry: prefixed("expiry", "index", P.expiry, 16, BOTH),
  quarantine: prefixed("quarantine", "index", P.quarantine, 16, BOTH),
  due_v2: prefixed("due_v2", "index", P.dueV2, 18, V2),
  inflight_v2: prefixed("inflight_v2", "index", P.inflightV2, 10, V2),
  audit: prefixed("audit", "audit", P.audit, 16, BOTH),
  tenants: prefixed("tenants", "tenants", P.tenant, 4, V3),
  tenant_ords: { name: "tenant_ords", cf: "tenants", formats: V3, lo: Buffer.from([P.tenantOrd]), hi: Buffer.from([P.tenantOrd, 0xff]), sentinelValue: EMPTY },
  // TEN-1 §3: counters lo = <<0::40>>, hi = <<0xFFFFFFFF::32, 0xFF>>.
  counters: {
    name: "counters",
    cf: "counters",
    formats: V3,
    lo: Buffer.alloc(5, 0),
    hi: Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff]),
    sentinelValue: ZERO8
  }
}

export const familiesOf = (format: number): ReadonlyArray<Family> =>
  Object.values(Families).filter((f) => f.formats.includes(format as 2 | 3))

/** Inclusive-exclusive range that covers a family including both sentinels. */
export const familyRange = (f: Family): { readonly lo: Uint8Array; readonly hi: Uint8Array } => ({
  lo: f.lo,
  hi: successor(f.hi) ?? CF_END
})

/** Range of a family's data rows, sentinels excluded. */
export const familyDataRange = (f: Family): { readonly lo: Uint8Array; readonly hi: Uint8Array } => ({
  lo: Buffer.concat([f.lo, Buffer.from([0])]),
  hi: f.hi
})

const INDEX_BY_BYTE = new Map<number, FamilyName>([
  [P.due, "due"],
  [P.inflight, "inflight"],
  [P.dead, "dead"],
  [P.deadByTenant, "dead_by_tenant"],
  [P.archive, "archive"],
  [P.active, "active"],
  [P.cleared, "cleared"],
  [P.claim, "claim"],
  [P.dedupe, "dedupe"],
  [P.expiry, "expiry"],
  [P.quarantine, "quarantine"],
  [P.dueV2, "due_v2"],
  [P.inflightV2, "inflight_v2"]
])

/** Which family a key belongs to, for read statistics. */
export const familyOf = (cf: ColumnFamily, key: Uint8Array): FamilyName | "meta" | "unknown" => {
  switch (cf) {
    case "hooks":
    case "deliveries":
    case "audit":
    case "counters":
      return cf
    case "default":
      return "meta"
    case "tenants":
      return key[0] === P.tenantOrd ? "tenant_ords" : key[0] === P.tenant ? "tenants" : "unknown"
    case "index":
      return (key.length > 0 && INDEX_BY_BYTE.get(key[0]!)) || "unknown"
  }
}

// ---------------------------------------------------------------------------
// Meta keys (default column family)

export const Meta = {
  format: Buffer.from("m:format"),
  nextOrd: Buffer.from("m:next_ord"),
  nextSeq: Buffer.from("m:next_seq"),
  /** 8 random bytes written at first open of the Writer: the node part of hook ids (src/domain/hook-id.ts). */
  nodeId: Buffer.from("m:node_id"),
  migrating: (to: number) => Buffer.from(`m:migrating:${to}`),
  cursor: (name: string) => Buffer.from(`m:cursor:${name}`)
} as const

export const encodeU32 = (n: number): Uint8Array => {
  const b = zeroed(4)
  b.writeUInt32BE(n, 0)
  return b
}
export const decodeU32 = (b: Uint8Array): number => {
  if (b.length !== 4) fail("u32 value", b)
  return readU32(b, 0)
}
export const encodeU64 = (n: number): Uint8Array => {
  const b = zeroed(8)
  writeU64(b, n, 0)
  return b
}
export const decodeU64 = (b: Uint8Array): number => {
  if (b.length !== 8) fail("u64 value", b)
  return readU64(b, 0)
}

// ---------------------------------------------------------------------------
// hooks, deliveries (seq-keyed; unchanged between formats)

export const hookKey = (seq: number): Uint8Array => encodeU64(seq)
export const decodeHookKey = (k: Uint8Array): number => (k.length === 8 ? readU64(k, 0) : fail("hook", k))

export interface DeliveryRef {
  readonly seq: number
  readonly sink: number
}

export const deliveryKey = (seq: number, sink: number): Uint8Array => {
  const b = zeroed(10)
  writeU64(b, seq, 0)
  b.writeUInt16BE(sink, 8)
  return b
}
export const decodeDeliveryKey = (k: Uint8Array): DeliveryRef =>
  k.length === 10 ? { seq: readU64(k, 0), sink: readU16(k, 8) } : fail("delivery", k)
export const deliveryPrefix = (seq: number): Uint8Array => hookKey(seq)

// ---------------------------------------------------------------------------
// due ?D <<?D, ord::32, at::64, seq::64, sink::16>>

export interface DueRef {
  readonly ord: number
  readonly at: number
  readonly seq: number
  readonly sink: number
}

export const dueKey = (ord: number, at: number, seq: number, sink: number): Uint8Array => {
  const b = zeroed(23)
  b[0] = P.due
  b.writeUInt32BE(ord, 1)
  writeU64(b, at, 5)
  writeU64(b, seq, 13)
  b.writeUInt16BE(sink, 21)
  return b
}
export const decodeDueKey = (k: Uint8Array): DueRef =>
  k.length === 23 && k[0] === P.due
    ? { ord: readU32(k, 1), at: readU64(k, 5), seq: readU64(k, 13), sink: readU16(k, 21) }
    : fail("due", k)
export const duePrefix = (ord: number): Uint8Array => {
  const b = zeroed(5)
  b[0] = P.due
  b.writeUInt32BE(ord, 1)
  return b
}
/** Upper bound (exclusive) of a tenant's due rows with at <= `at`. */
export const dueUpTo = (ord: number, at: number): Uint8Array => {
  const b = zeroed(13)
  b[0] = P.due
  b.writeUInt32BE(ord, 1)
  writeU64(b, at + 1, 5)
  return b
}
/** Lower bound (inclusive) of a tenant's due rows with at >= `at`. */
export const dueFrom = (ord: number, at: number): Uint8Array => {
  const b = zeroed(13)
  b[0] = P.due
  b.writeUInt32BE(ord, 1)
  writeU64(b, at, 5)
  return b
}

export type DueKind = 0 | 1
export interface DueValue {
  readonly size: number
  readonly kind: DueKind
}
export const dueValue = (size: number, kind: DueKind): Uint8Array => {
  const b = zeroed(5)
  b.writeUInt32BE(size, 0)
  b[4] = kind
  return b
}
export const decodeDueValue = (v: Uint8Array): DueValue =>
  v.length === 5 && (v[4] === 0 || v[4] === 1) ? { size: readU32(v, 0), kind: v[4] } : fail("due value", v)

// ---------------------------------------------------------------------------
// inflight ?F <<?F, ord::32, seq::64, sink::16>>, value <<size::32>>

export interface InflightRef {
  readonly ord: number
  readonly seq: number
  readonly sink: number
}

export const inflightKey = (ord: number, seq: number, sink: number): Uint8Array => {
  const b = zeroed(15)
  b[0] = P.inflight
  b.writeUInt32BE(ord, 1)
  writeU64(b, seq, 5)
  b.writeUInt16BE(sink, 13)
  return b
}
export const decodeInflightKey = (k: Uint8Array): InflightRef =>
  k.length === 15 && k[0] === P.inflight
    ? { ord: readU32(k, 1), seq: readU64(k, 5), sink: readU16(k, 13) }
    : fail("inflight", k)
export const inflightPrefix = (ord: number): Uint8Array => {
  const b = zeroed(5)
  b[0] = P.inflight
  b.writeUInt32BE(ord, 1)
  return b
}

export const sizeValue = (size: number): Uint8Array => encodeU32(size)
export const decodeSizeValue = (v: Uint8Array): number => (v.length === 4 ? readU32(v, 0) : fail("size value", v))

// ---------------------------------------------------------------------------
// dead ?x <<?x, at::64, seq::64, sink::16>> (global time order; key unchanged from format 2)

export interface DeadRef {
  readonly at: number
  readonly seq: number
  readonly sink: number
}

export const deadKey = (at: number, seq: number, sink: number): Uint8Array => {
  const b = zeroed(19)
  b[0] = P.dead
  writeU64(b, at, 1)
  writeU64(b, seq, 9)
  b.writeUInt16BE(sink, 17)
  return b
}
export const decodeDeadKey = (k: Uint8Array): DeadRef =>
  k.length === 19 && k[0] === P.dead ? { at: readU64(k, 1), seq: readU64(k, 9), sink: readU16(k, 17) } : fail("dead", k)

/** Dead value. Version byte = the format that wrote it: 2 `{sourceId, id}`, 3 `{sourceId, id, ord}`. */
export interface DeadValue {
  readonly sourceId: string
  readonly id: string
  /** undefined only in a format 2 value. */
  readonly ord: number | undefined
}

const writeStr16 = (parts: Array<Buffer>, s: string) => {
  const body = Buffer.from(s, "utf8")
  const len = zeroed(2)
  len.writeUInt16BE(body.length, 0)
  parts.push(len, body)
}

export const deadValue = (v: { readonly sourceId: string; readonly id: string; readonly ord: number }): Uint8Array => {
  const head = zeroed(5)
  head[0] = 3
  head.writeUInt32BE(v.ord, 1)
  const parts = [head]
  writeStr16(parts, v.sourceId)
  writeStr16(parts, v.id)
  return Buffer.concat(parts)
}

export const deadValueV2 = (v: { readonly sourceId: string; readonly id: string }): Uint8Array => {
  const parts = [Buffer.from([2])]
  writeStr16(parts, v.sourceId)
  writeStr16(parts, v.id)
  return Buffer.concat(parts)
}

export const decodeDeadValue = (v: Uint8Array): DeadValue => {
  const b = asBuffer(v)
  const version = b[0]
  let off: number
  let ord: number | undefined
  if (version === 3 && b.length >= 9) {
    ord = b.readUInt32BE(1)
    off = 5
  } else if (version === 2 && b.length >= 5) {
    ord = undefined
    off = 1
  } else return fail("dead value", v)
  const srcLen = b.readUInt16BE(off)
  const sourceId = b.toString("utf8", off + 2, off + 2 + srcLen)
  off += 2 + srcLen
  const idLen = b.readUInt16BE(off)
  const id = b.toString("utf8", off + 2, off + 2 + idLen)
  if (off + 2 + idLen !== b.length) return fail("dead value", v)
  return { sourceId, id, ord }
}

// ---------------------------------------------------------------------------
// dead by tenant ?X <<?X, ord::32, at::64, seq::64, sink::16>>, empty value

export const deadByTenantKey = (ord: number, at: number, seq: number, sink: number): Uint8Array => {
  const b = zeroed(23)
  b[0] = P.deadByTenant
  b.writeUInt32BE(ord, 1)
  writeU64(b, at, 5)
  writeU64(b, seq, 13)
  b.writeUInt16BE(sink, 21)
  return b
}
export const decodeDeadByTenantKey = (k: Uint8Array): DueRef =>
  k.length === 23 && k[0] === P.deadByTenant
    ? { ord: readU32(k, 1), at: readU64(k, 5), seq: readU64(k, 13), sink: readU16(k, 21) }
    : fail("dead_by_tenant", k)
export const deadByTenantPrefix = (ord: number): Uint8Array => {
  const b = zeroed(5)
  b[0] = P.deadByTenant
  b.writeUInt32BE(ord, 1)
  return b
}

// ---------------------------------------------------------------------------
// archive obligation ?a <<?a, seq::64>>: format 3 value <<size::32, ord::32>>, format 2 <<size::32>>

export const archiveKey = (seq: number): Uint8Array => {
  const b = zeroed(9)
  b[0] = P.archive
  writeU64(b, seq, 1)
  return b
}
export const decodeArchiveKey = (k: Uint8Array): number =>
  k.length === 9 && k[0] === P.archive ? readU64(k, 1) : fail("archive", k)
export const archiveValue = (size: number, ord: number): Uint8Array => {
  const b = zeroed(8)
  b.writeUInt32BE(size, 0)
  b.writeUInt32BE(ord, 4)
  return b
}
export const decodeArchiveValue = (v: Uint8Array): { readonly size: number; readonly ord: number } =>
  v.length === 8 ? { size: readU32(v, 0), ord: readU32(v, 4) } : fail("archive value", v)

// ---------------------------------------------------------------------------
// active tenants ?A <<?A, bucket::64, ord::32>>, bucket = floor(at / 1000)

export const bucketOf = (at: number): number => Math.floor(at / 1000)

export const activeKey = (bucket: number, ord: number): Uint8Array => {
  const b = zeroed(13)
  b[0] = P.active
  writeU64(b, bucket, 1)
  b.writeUInt32BE(ord, 9)
  return b
}
export const decodeActiveKey = (k: Uint8Array): { readonly bucket: number; readonly ord: number } =>
  k.length === 13 && k[0] === P.active ? { bucket: readU64(k, 1), ord: readU32(k, 9) } : fail("active", k)
/** Exclusive upper bound of markers with bucket <= `bucket`. */
export const activeUpTo = (bucket: number): Uint8Array => {
  const b = zeroed(9)
  b[0] = P.active
  writeU64(b, bucket + 1, 1)
  return b
}

// ---------------------------------------------------------------------------
// cleared ?c <<?c, seq::64>> and claim ?k <<?k, seq::64, sink::16>>

export const clearedKey = (seq: number): Uint8Array => {
  const b = zeroed(9)
  b[0] = P.cleared
  writeU64(b, seq, 1)
  return b
}
export const decodeClearedKey = (k: Uint8Array): number =>
  k.length === 9 && k[0] === P.cleared ? readU64(k, 1) : fail("cleared", k)

export const claimKey = (seq: number, sink: number): Uint8Array => {
  const b = zeroed(11)
  b[0] = P.claim
  writeU64(b, seq, 1)
  b.writeUInt16BE(sink, 9)
  return b
}
export const decodeClaimKey = (k: Uint8Array): DeliveryRef =>
  k.length === 11 && k[0] === P.claim ? { seq: readU64(k, 1), sink: readU16(k, 9) } : fail("claim", k)

// ---------------------------------------------------------------------------
// dedupe ?u <<?u, tenant, 0, key>> and expiry ?e <<?e, at::64, tenant, 0, key>>

const tenantAndKey = (tenant: string, key: string): Buffer =>
  Buffer.concat([Buffer.from(tenant, "utf8"), Buffer.from([0]), Buffer.from(key, "utf8")])

const splitTenantAndKey = (b: Buffer, what: string, k: Uint8Array): { readonly tenant: string; readonly key: string } => {
  const z = b.indexOf(0)
  if (z < 0) return fail(what, k)
  return { tenant: b.toString("utf8", 0, z), key: b.toString("utf8", z + 1) }
}

export const dedupeKey = (tenant: string, key: string): Uint8Array =>
  Buffer.concat([Buffer.from([P.dedupe]), tenantAndKey(tenant, key)])
export const decodeDedupeKey = (k: Uint8Array): { readonly tenant: string; readonly key: string } =>
  k[0] === P.dedupe ? splitTenantAndKey(asBuffer(k).subarray(1), "dedupe", k) : fail("dedupe", k)
/** All dedupe keys of a tenant: `<<?u, tenant, 0>>` (TEN-5 erases with this prefix). */
export const dedupeTenantPrefix = (tenant: string): Uint8Array =>
  Buffer.concat([Buffer.from([P.dedupe]), Buffer.from(tenant, "utf8"), Buffer.from([0])])

export const expiryKey = (at: number, tenant: string, key: string): Uint8Array => {
  const head = zeroed(9)
  head[0] = P.expiry
  writeU64(head, at, 1)
  return Buffer.concat([head, tenantAndKey(tenant, key)])
}
export const decodeExpiryKey = (k: Uint8Array): { readonly at: number; readonly tenant: string; readonly key: string } =>
  k.length > 9 && k[0] === P.expiry
    ? { at: readU64(k, 1), ...splitTenantAndKey(asBuffer(k).subarray(9), "expiry", k) }
    : fail("expiry", k)
export const expiryUpTo = (at: number): Uint8Array => {
  const b = zeroed(9)
  b[0] = P.expiry
  writeU64(b, at + 1, 1)
  return b
}

// ---------------------------------------------------------------------------
// quarantine ?q <<?q, at::64, qid::64>>

export const quarantineKey = (at: number, qid: number): Uint8Array => {
  const b = zeroed(17)
  b[0] = P.quarantine
  writeU64(b, at, 1)
  writeU64(b, qid, 9)
  return b
}
export const decodeQuarantineKey = (k: Uint8Array): { readonly at: number; readonly qid: number } =>
  k.length === 17 && k[0] === P.quarantine ? { at: readU64(k, 1), qid: readU64(k, 9) } : fail("quarantine", k)

// ---------------------------------------------------------------------------
// audit (audit column family) <<?a, seq::64, at::64>>

export const auditKey = (seq: number, at: number): Uint8Array => {
  const b = zeroed(17)
  b[0] = P.audit
  writeU64(b, seq, 1)
  writeU64(b, at, 9)
  return b
}
export const decodeAuditKey = (k: Uint8Array): { readonly seq: number; readonly at: number } =>
  k.length === 17 && k[0] === P.audit ? { seq: readU64(k, 1), at: readU64(k, 9) } : fail("audit", k)

// ---------------------------------------------------------------------------
// tenants ?t <<?t, ord::32>> -> tenant id; ?n <<?n, tenant_id>> -> <<ord::32>>

export const tenantKey = (ord: number): Uint8Array => {
  const b = zeroed(5)
  b[0] = P.tenant
  b.writeUInt32BE(ord, 1)
  return b
}
export const decodeTenantKey = (k: Uint8Array): number =>
  k.length === 5 && k[0] === P.tenant ? readU32(k, 1) : fail("tenant", k)
export const tenantOrdKey = (tenantId: string): Uint8Array =>
  Buffer.concat([Buffer.from([P.tenantOrd]), Buffer.from(tenantId, "utf8")])
export const decodeTenantOrdKey = (k: Uint8Array): string =>
  k.length > 1 && k[0] === P.tenantOrd ? asBuffer(k).toString("utf8", 1) : fail("tenant_ord", k)

// ---------------------------------------------------------------------------
// counters <<ord::32, field::8>> -> int64 (merged)

export const counterKey = (ord: number, field: number): Uint8Array => {
  const b = zeroed(5)
  b.writeUInt32BE(ord, 0)
  b[4] = field
  return b
}
export const decodeCounterKey = (k: Uint8Array): { readonly ord: number; readonly field: number } =>
  k.length === 5 ? { ord: readU32(k, 0), field: k[4]! } : fail("counter", k)

// ---------------------------------------------------------------------------
// Format 2 only (survive inside the migration): ?d <<?d, at, seq, sink>>, ?f <<?f, seq, sink>>

export const dueV2Key = (at: number, seq: number, sink: number): Uint8Array => {
  const b = zeroed(19)
  b[0] = P.dueV2
  writeU64(b, at, 1)
  writeU64(b, seq, 9)
  b.writeUInt16BE(sink, 17)
  return b
}
export const decodeDueV2Key = (k: Uint8Array): DeadRef =>
  k.length === 19 && k[0] === P.dueV2 ? { at: readU64(k, 1), seq: readU64(k, 9), sink: readU16(k, 17) } : fail("due_v2", k)

export const inflightV2Key = (seq: number, sink: number): Uint8Array => {
  const b = zeroed(11)
  b[0] = P.inflightV2
  writeU64(b, seq, 1)
  b.writeUInt16BE(sink, 9)
  return b
}
export const decodeInflightV2Key = (k: Uint8Array): DeliveryRef =>
  k.length === 11 && k[0] === P.inflightV2 ? { seq: readU64(k, 1), sink: readU16(k, 9) } : fail("inflight_v2", k)

// ---------------------------------------------------------------------------

/** Whether `key` is one of `family`'s two sentinels. */
export const isSentinel = (f: Family, key: Uint8Array): boolean => compare(key, f.lo) === 0 || compare(key, f.hi) === 0
