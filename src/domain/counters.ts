/**
 * The per-tenant counters (TEN-1 §4, and `waiting` of ordered delivery), kept exact by blind merge operands
 * in the same atomic batch as every transition: never read-modify-write.
 * Every delta is mirrored onto ord 0, the node aggregate.
 */
import { counterKey } from "./keys.js"
import { merge, type Op } from "./ops.js"

export const Fields = {
  pending: 1,
  scheduled: 2,
  inflight: 3,
  dead: 4,
  bytes: 5,
  archive_pending: 6,
  /** Rows of ordered lanes held back behind their head (the waiting family), not yet due. */
  waiting: 7
} as const

export type FieldName = keyof typeof Fields
export const FieldNames = Object.keys(Fields) as ReadonlyArray<FieldName>

/** ord 0 holds the node aggregate; real tenants are 1, 2, 3, … */
export const AGGREGATE = 0

export interface Delta {
  readonly ord: number
  readonly field: FieldName
  readonly delta: number
}

export type TenantCounters = Readonly<Record<FieldName, number>>

export const zero: TenantCounters = { pending: 0, scheduled: 0, inflight: 0, dead: 0, bytes: 0, archive_pending: 0, waiting: 0 }

export const delta = (ord: number, field: FieldName, d: number): Delta => ({ ord, field, delta: d })

/**
 * Merge ops for a batch's deltas: coalesced per (ord, field), mirrored onto
 * the aggregate, zero sums dropped. Keys come out in (ord, field) order.
 */
export const ops = (deltas: ReadonlyArray<Delta>): Array<Op> => {
  const sums = new Map<number, number>()
  const add = (ord: number, field: number, d: number) => {
    const k = ord * 8 + field
    sums.set(k, (sums.get(k) ?? 0) + d)
  }
  for (const d of deltas) {
    if (d.delta === 0) continue
    if (d.ord === AGGREGATE) throw new Error("a transition's delta names ord 0; the aggregate is derived")
    const f = Fields[d.field]
    add(d.ord, f, d.delta)
    add(AGGREGATE, f, d.delta)
  }
  const out: Array<Op> = []
  for (const k of [...sums.keys()].sort((a, b) => a - b)) {
    const sum = sums.get(k)!
    if (sum !== 0) out.push(merge("counters", counterKey(Math.floor(k / 8), k % 8), BigInt(sum)))
  }
  return out
}

/** The counter keys of a tenant (or of the aggregate), in field order. */
export const keysOf = (ord: number): ReadonlyArray<Uint8Array> => FieldNames.map((f) => counterKey(ord, Fields[f]))

/** The merged totals (in `keysOf` order) as a record. */
export const fromTotals = (totals: ReadonlyArray<bigint>): TenantCounters => {
  const out: Record<FieldName, number> = { ...zero }
  FieldNames.forEach((f, i) => {
    out[f] = Number(totals[i] ?? 0n)
  })
  return out
}
