/**
 * The family table of store formats 2 and 3 (TEN-1 §1, §3): for each family its column family,
 * prefix byte, layout and the two sentinels every scan checks.
 */
import { CF_END, compare, successor } from "./bytes.js"
import { type Layout, Layouts } from "./layouts.js"
import type { ColumnFamily } from "./ops.js"

const ch = (c: string): number => c.charCodeAt(0)

/** Prefix bytes of the index, tenants and audit column families. */
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
  tenantLimits: ch("l"),
  endpoints: ch("e"),
  erasure: ch("r"),
  waiting: ch("W"),
  head: ch("H"),
  audit: ch("a")
} as const

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
  | "tenant_limits"
  | "endpoints"
  | "erasures"
  | "counters"
  | "waiting"
  | "heads"

export interface Family {
  readonly name: FamilyName
  readonly cf: ColumnFamily
  /** Store formats the family exists in. */
  readonly formats: ReadonlyArray<2 | 3>
  /** First byte of every key; undefined where the family has its column family to itself. */
  readonly prefix: number | undefined
  readonly layout: Layout
  /** Lowest key of the family; itself a sentinel. */
  readonly lo: Uint8Array
  /** Highest key of the family; itself a sentinel, above every real key. */
  readonly hi: Uint8Array
  /** Sentinel value (counters: an 8-byte zero so that merges read back cleanly). */
  readonly sentinelValue: Uint8Array
}

const EMPTY = new Uint8Array(0)
const V2: ReadonlyArray<2 | 3> = [2]
const V3: ReadonlyArray<2 | 3> = [3]
const BOTH: ReadonlyArray<2 | 3> = [2, 3]

/**
 * A family that shares its column family: lo = <<prefix>>, hi = <<prefix, 0xFF × hiWidth>>.
 * hiWidth is the layout's width; variable layouts give theirs (UTF-8 never contains 0xFF).
 */
const prefixed = (
  name: FamilyName,
  cf: ColumnFamily,
  formats: ReadonlyArray<2 | 3>,
  prefix: number,
  layout: Layout,
  hiWidth = layout._tag === "fixed" ? layout.width : 1
): Family => {
  const hi = Buffer.alloc(hiWidth + 1, 0xff)
  hi[0] = prefix
  return { name, cf, formats, prefix, layout, lo: Buffer.from([prefix]), hi, sentinelValue: EMPTY }
}

/** A family alone in its column family: lo = all zero, hi = 0xFF × (width + 1). */
const whole = (name: FamilyName & ColumnFamily, layout: Layout & { readonly _tag: "fixed" }): Family => ({
  name,
  cf: name,
  formats: BOTH,
  prefix: undefined,
  layout,
  lo: Buffer.alloc(layout.width, 0),
  hi: Buffer.alloc(layout.width + 1, 0xff),
  sentinelValue: EMPTY
})

const L = Layouts

export const Families: Readonly<Record<FamilyName, Family>> = {
  hooks: whole("hooks", L.seq),
  deliveries: whole("deliveries", L.seqSink),
  due: prefixed("due", "index", V3, P.due, L.ordAtSeqSink),
  inflight: prefixed("inflight", "index", V3, P.inflight, L.ordSeqSink),
  dead: prefixed("dead", "index", BOTH, P.dead, L.atSeqSink),
  dead_by_tenant: prefixed("dead_by_tenant", "index", V3, P.deadByTenant, L.ordAtSeqSink),
  archive: prefixed("archive", "index", BOTH, P.archive, L.seq),
  active: prefixed("active", "index", V3, P.active, L.bucketOrd),
  cleared: prefixed("cleared", "index", BOTH, P.cleared, L.seq),
  claim: prefixed("claim", "index", BOTH, P.claim, L.seqSink),
  dedupe: prefixed("dedupe", "index", BOTH, P.dedupe, L.tenantKey),
  // The hi sentinel format 2 wrote: 16 bytes of 0xFF after the prefix.
  expiry: prefixed("expiry", "index", BOTH, P.expiry, L.atTenantKey, 16),
  quarantine: prefixed("quarantine", "index", BOTH, P.quarantine, L.atQid),
  due_v2: prefixed("due_v2", "index", V2, P.dueV2, L.atSeqSink),
  inflight_v2: prefixed("inflight_v2", "index", V2, P.inflightV2, L.seqSink),
  audit: prefixed("audit", "audit", BOTH, P.audit, L.seqAt),
  tenants: prefixed("tenants", "tenants", V3, P.tenant, L.ord),
  tenant_ords: prefixed("tenant_ords", "tenants", V3, P.tenantOrd, L.utf8),
  // Added to format 3 after it shipped: src/store/open.ts gives older format 3 stores its sentinels once.
  tenant_limits: prefixed("tenant_limits", "tenants", V3, P.tenantLimits, L.ord),
  // Added to format 3 after it shipped, as tenant_limits: a tenant's endpoints (src/domain/endpoints.ts).
  endpoints: prefixed("endpoints", "tenants", V3, P.endpoints, L.ordId),
  // TEN-5: an erase job and its refusal, by tenant id; added like tenant_limits.
  erasures: prefixed("erasures", "tenants", V3, P.erasure, L.utf8),
  // Ordered delivery (docs/delivery.md "Ordered delivery"), added like tenant_limits: the rows of an
  // ordered lane behind its head, in accepted order, and each busy lane's head.
  waiting: prefixed("waiting", "index", V3, P.waiting, L.ordLaneSeqSink),
  heads: prefixed("heads", "index", V3, P.head, L.ordLane),
  // TEN-1 §3: counters lo = <<0::40>>, hi = <<0xFFFFFFFF::32, 0xFF>>; merges read the value.
  counters: {
    name: "counters",
    cf: "counters",
    formats: V3,
    prefix: undefined,
    layout: L.ordField,
    lo: Buffer.alloc(5, 0),
    hi: Buffer.alloc(5, 0xff),
    sentinelValue: new Uint8Array(8)
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

/** Whether `key` is one of `family`'s two sentinels. */
export const isSentinel = (f: Family, key: Uint8Array): boolean => compare(key, f.lo) === 0 || compare(key, f.hi) === 0

const INDEX_BY_BYTE = new Map<number, FamilyName>(
  Object.values(Families).flatMap((f) => (f.cf === "index" && f.prefix !== undefined ? [[f.prefix, f.name] as const] : []))
)

const TENANTS_BY_BYTE = new Map<number, FamilyName>(
  Object.values(Families).flatMap((f) => (f.cf === "tenants" && f.prefix !== undefined ? [[f.prefix, f.name] as const] : []))
)

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
      return TENANTS_BY_BYTE.get(key[0]!) ?? "unknown"
    case "index":
      return (key.length > 0 && INDEX_BY_BYTE.get(key[0]!)) || "unknown"
  }
}
