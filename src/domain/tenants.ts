/**
 * Tenant ordinals (TEN-1 §2): dense 32-bit, 1, 2, 3, … in first-sight order,
 * never reused; ord 0 is the node aggregate. Allocation is pure: the ops put
 * `?t`, `?n` and `m:next_ord`, and ride in the same synced batch as the first
 * rows that use the ordinal.
 */
import { Data } from "effect"
import { decodeU32, encodeU32, Meta, tenantKey, tenantOrdKey } from "./keys.js"
import { type Op, put } from "./ops.js"

export const MAX_TENANTS_LIMIT = 4_294_967_294
export const DEFAULT_MAX_TENANTS = 1_000_000
/** The Writer's tenant id → ord cache: cleared whole when full. */
export const CACHE_ENTRIES = 65_536
/** Longest tenant id accepted, in UTF-8 bytes. */
export const MAX_TENANT_ID_BYTES = 256

export class TenantLimit extends Data.TaggedError("TenantLimit")<{ readonly max: number }> {}

/** The tenant id is being erased or was erased (TEN-5), and no operator has lifted the refusal. */
/** The tenant of the gateway's operational events (src/delivery/operations.ts); refused at ingest: no source may use it. */
export const SYSTEM_TENANT = "ankusa.system"

export class TenantErased extends Data.TaggedError("TenantErased")<{ readonly tenant: string }> {}

/** `m:next_ord` of a store that has never allocated: the first ordinal is 1. */
export const nextOrdOf = (stored: Uint8Array | undefined): number => (stored === undefined ? 1 : decodeU32(stored))

/** Number of ordinals ever allocated (tombstones included): `m:next_ord - 1`. */
export const countOf = (stored: Uint8Array | undefined): number => nextOrdOf(stored) - 1

/** Ops that allocate `ord` to `tenantId`. `nextOrd` is the value `m:next_ord` takes after this allocation. */
export const allocate = (tenantId: string, ord: number): ReadonlyArray<Op> => [
  put("tenants", tenantKey(ord), Buffer.from(tenantId, "utf8")),
  put("tenants", tenantOrdKey(tenantId), encodeU32(ord))
]

export const nextOrdOp = (nextOrd: number): Op => put("default", Meta.nextOrd, encodeU32(nextOrd))

/** No lone surrogate, so the id round-trips through UTF-8 (ES2024's String#isWellFormed; the ES2023 lib does not declare it). */
const wellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed()

/** A valid tenant id: non-empty UTF-8 without NUL (dedupe keys use NUL as separator), bounded length. */
export const validTenantId = (id: string): boolean =>
  id.length > 0 &&
  !id.includes("\u0000") &&
  wellFormed(id) &&
  // A UTF-16 unit is at most 3 UTF-8 bytes: short ids need no count.
  (id.length * 3 <= MAX_TENANT_ID_BYTES || Buffer.byteLength(id, "utf8") <= MAX_TENANT_ID_BYTES)
