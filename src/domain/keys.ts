/**
 * Every key of store formats 2 and 3 (TEN-1 §1, §3), built and parsed here by name.
 *
 * Each family's constructors come from its layout's codec (key-codec.ts), so families of one
 * layout share one encoder and decoder. Rule (TEN-1 §3, §9): the `?D`, `?F`, `?X` and `?A`
 * constructors (and the format 2 `?d`/`?f` ones) are called only from `deliveries.ts` (and the
 * migration's read side uses only decoders); a source test enforces it.
 */
import { atTenantKeyCodec, fixedCodec, tenantKeyCodec, utf8Codec } from "./key-codec.js"
import { Families as F } from "./families.js"
import { Layouts as L } from "./layouts.js"

export * from "./bytes.js"
export * from "./families.js"
export * from "./layouts.js"
export * from "./meta.js"
export * from "./values.js"

export interface DeliveryRef {
  readonly seq: number
  readonly sink: number
}
export interface DueRef {
  readonly ord: number
  readonly at: number
  readonly seq: number
  readonly sink: number
}
export interface InflightRef {
  readonly ord: number
  readonly seq: number
  readonly sink: number
}
export interface DeadRef {
  readonly at: number
  readonly seq: number
  readonly sink: number
}

// hooks <<seq::64>>, deliveries <<seq::64, sink::16>> (seq-keyed; unchanged between formats)
const hook = fixedCodec(F.hooks, L.seq)
export const hookKey = (seq: number): Uint8Array => hook.encode(seq)
export const decodeHookKey = (k: Uint8Array): number => hook.decode(k).seq

const delivery = fixedCodec(F.deliveries, L.seqSink)
export const deliveryKey = (seq: number, sink: number): Uint8Array => delivery.encode(seq, sink)
export const decodeDeliveryKey = (k: Uint8Array): DeliveryRef => delivery.decode(k)
export const deliveryPrefix = (seq: number): Uint8Array => delivery.lead(seq)

// due ?D <<?D, ord::32, at::64, seq::64, sink::16>>, value dueValue
const due = fixedCodec(F.due, L.ordAtSeqSink)
export const dueKey = (ord: number, at: number, seq: number, sink: number): Uint8Array => due.encode(ord, at, seq, sink)
export const decodeDueKey = (k: Uint8Array): DueRef => due.decode(k)
/** The tenant of a due key, read in place (the write marks). */
export const dueKeyOrd = (k: Uint8Array): number => due.first(k)
export const duePrefix = (ord: number): Uint8Array => due.lead(ord)
/** Upper bound (exclusive) of a tenant's due rows with at <= `at`. */
export const dueUpTo = (ord: number, at: number): Uint8Array => due.lead(ord, at + 1)
/** Lower bound (inclusive) of a tenant's due rows with at >= `at`. */
export const dueFrom = (ord: number, at: number): Uint8Array => due.lead(ord, at)

// inflight ?F <<?F, ord::32, seq::64, sink::16>>, value sizeValue
const inflight = fixedCodec(F.inflight, L.ordSeqSink)
export const inflightKey = (ord: number, seq: number, sink: number): Uint8Array => inflight.encode(ord, seq, sink)
export const decodeInflightKey = (k: Uint8Array): InflightRef => inflight.decode(k)
export const inflightPrefix = (ord: number): Uint8Array => inflight.lead(ord)

// dead ?x <<?x, at::64, seq::64, sink::16>> (global time order; key unchanged from format 2)
const dead = fixedCodec(F.dead, L.atSeqSink)
export const deadKey = (at: number, seq: number, sink: number): Uint8Array => dead.encode(at, seq, sink)
export const decodeDeadKey = (k: Uint8Array): DeadRef => dead.decode(k)

// dead by tenant ?X <<?X, ord::32, at::64, seq::64, sink::16>>, empty value
const deadByTenant = fixedCodec(F.dead_by_tenant, L.ordAtSeqSink)
export const deadByTenantKey = (ord: number, at: number, seq: number, sink: number): Uint8Array =>
  deadByTenant.encode(ord, at, seq, sink)
export const decodeDeadByTenantKey = (k: Uint8Array): DueRef => deadByTenant.decode(k)
export const deadByTenantPrefix = (ord: number): Uint8Array => deadByTenant.lead(ord)

// archive obligation ?a <<?a, seq::64>>, value archiveValue
const archive = fixedCodec(F.archive, L.seq)
export const archiveKey = (seq: number): Uint8Array => archive.encode(seq)
export const decodeArchiveKey = (k: Uint8Array): number => archive.decode(k).seq

// active tenants ?A <<?A, bucket::64, ord::32>>, bucket = floor(at / 1000)
/** Marker buckets are this many ms wide. */
export const BUCKET_MS = 1000
export const bucketOf = (at: number): number => Math.floor(at / BUCKET_MS)
/** The first ms of `bucket` (its rows have at in [bucketStart(b), bucketStart(b + 1))). */
export const bucketStart = (bucket: number): number => bucket * BUCKET_MS
const active = fixedCodec(F.active, L.bucketOrd)
export const activeKey = (bucket: number, ord: number): Uint8Array => active.encode(bucket, ord)
export const decodeActiveKey = (k: Uint8Array): { readonly bucket: number; readonly ord: number } => active.decode(k)
/** Exclusive upper bound of markers with bucket <= `bucket`. */
export const activeUpTo = (bucket: number): Uint8Array => active.lead(bucket + 1)

// cleared ?c <<?c, seq::64>> and claim ?k <<?k, seq::64, sink::16>>
const cleared = fixedCodec(F.cleared, L.seq)
export const clearedKey = (seq: number): Uint8Array => cleared.encode(seq)
export const decodeClearedKey = (k: Uint8Array): number => cleared.decode(k).seq

const claim = fixedCodec(F.claim, L.seqSink)
export const claimKey = (seq: number, sink: number): Uint8Array => claim.encode(seq, sink)
export const decodeClaimKey = (k: Uint8Array): DeliveryRef => claim.decode(k)

// dedupe ?u <<?u, tenant, 0, key>> and expiry ?e <<?e, at::64, tenant, 0, key>>
const dedupe = tenantKeyCodec(F.dedupe)
export const dedupeKey = dedupe.encode
export const decodeDedupeKey = dedupe.decode
/** All dedupe keys of a tenant: `<<?u, tenant, 0>>` (TEN-5 erases with this prefix). */
export const dedupeTenantPrefix = dedupe.lead

const expiry = atTenantKeyCodec(F.expiry)
export const expiryKey = expiry.encode
export const decodeExpiryKey = expiry.decode
export const expiryUpTo = (at: number): Uint8Array => expiry.lead(at + 1)

// quarantine ?q <<?q, at::64, qid::64>>
const quarantine = fixedCodec(F.quarantine, L.atQid)
export const quarantineKey = (at: number, qid: number): Uint8Array => quarantine.encode(at, qid)
export const decodeQuarantineKey = (k: Uint8Array): { readonly at: number; readonly qid: number } => quarantine.decode(k)

// audit (audit column family) <<?a, seq::64, at::64>>
const audit = fixedCodec(F.audit, L.seqAt)
export const auditKey = (seq: number, at: number): Uint8Array => audit.encode(seq, at)
export const decodeAuditKey = (k: Uint8Array): { readonly seq: number; readonly at: number } => audit.decode(k)

// tenants ?t <<?t, ord::32>> -> tenant id; ?n <<?n, tenant_id>> -> <<ord::32>>
const tenant = fixedCodec(F.tenants, L.ord)
export const tenantKey = (ord: number): Uint8Array => tenant.encode(ord)
export const decodeTenantKey = (k: Uint8Array): number => tenant.decode(k).ord

const tenantOrd = utf8Codec(F.tenant_ords)
export const tenantOrdKey = tenantOrd.encode
export const decodeTenantOrdKey = tenantOrd.decode

// tenant limits ?l <<?l, ord::32>> -> the limits override (src/domain/limits.ts)
const tenantLimits = fixedCodec(F.tenant_limits, L.ord)
export const tenantLimitsKey = (ord: number): Uint8Array => tenantLimits.encode(ord)
export const decodeTenantLimitsKey = (k: Uint8Array): number => tenantLimits.decode(k).ord

// endpoints ?e <<?e, ord::32, id::64>> -> the endpoint (src/domain/endpoints.ts)
const endpoint = fixedCodec(F.endpoints, L.ordId)
export const endpointKey = (ord: number, id: number): Uint8Array => endpoint.encode(ord, id)
export const decodeEndpointKey = (k: Uint8Array): { readonly ord: number; readonly id: number } => endpoint.decode(k)
/** Every endpoint key of a tenant starts with it. */
export const endpointPrefix = (ord: number): Uint8Array => endpoint.lead(ord)
// erasures ?r <<?r, tenant_id>> -> the erase job of the tenant id (src/domain/erase.ts)
const erasure = utf8Codec(F.erasures)
export const erasureKey = erasure.encode
export const decodeErasureKey = erasure.decode

// Ordered delivery (src/domain/ordering.ts builds these; nothing else): the waiting rows of a lane
// ?W <<?W, ord::32, lane::64, seq::64, sink::16>> -> <<size::32>>, and each busy lane's head
// ?H <<?H, ord::32, lane::64>> -> headValue
export interface LaneRef {
  readonly ord: number
  readonly lane: number
}
export interface WaitingRef extends LaneRef {
  readonly seq: number
  readonly sink: number
}
const waiting = fixedCodec(F.waiting, L.ordLaneSeqSink)
export const waitingKey = (ord: number, lane: number, seq: number, sink: number): Uint8Array => waiting.encode(ord, lane, seq, sink)
export const decodeWaitingKey = (k: Uint8Array): WaitingRef => waiting.decode(k)
/** Every waiting key of a tenant, or of one lane, starts with it. */
export const waitingPrefix = (ord: number): Uint8Array => waiting.lead(ord)
export const waitingLanePrefix = (ord: number, lane: number): Uint8Array => waiting.lead(ord, lane)

const head = fixedCodec(F.heads, L.ordLane)
export const headKey = (ord: number, lane: number): Uint8Array => head.encode(ord, lane)
export const decodeHeadKey = (k: Uint8Array): LaneRef => head.decode(k)
export const headPrefix = (ord: number): Uint8Array => head.lead(ord)

// counters <<ord::32, field::8>> -> int64 (merged)
const counter = fixedCodec(F.counters, L.ordField)
export const counterKey = (ord: number, field: number): Uint8Array => counter.encode(ord, field)
export const decodeCounterKey = (k: Uint8Array): { readonly ord: number; readonly field: number } => counter.decode(k)
/** The ordinal of a counter key, read in place (no decoded object: the store's write marks read one per merge). */
export const counterKeyOrd = (k: Uint8Array): number => counter.first(k)

// Format 2 only (survive inside the migration): ?d <<?d, at, seq, sink>>, ?f <<?f, seq, sink>>
const dueV2 = fixedCodec(F.due_v2, L.atSeqSink)
export const dueV2Key = (at: number, seq: number, sink: number): Uint8Array => dueV2.encode(at, seq, sink)
export const decodeDueV2Key = (k: Uint8Array): DeadRef => dueV2.decode(k)

const inflightV2 = fixedCodec(F.inflight_v2, L.seqSink)
export const inflightV2Key = (seq: number, sink: number): Uint8Array => inflightV2.encode(seq, sink)
export const decodeInflightV2Key = (k: Uint8Array): DeliveryRef => inflightV2.decode(k)
