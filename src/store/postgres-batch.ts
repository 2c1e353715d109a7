/**
 * A batch as one PostgreSQL statement. The ops are folded per family, in batch order, into what
 * each key ends as (a value, a delete, or for counters a total or a delta to add) plus the ranges
 * deleted from the rows the batch found, exactly as the memory layer applies them one by one. Each
 * family's part is one multi-row statement over arrays (`unnest`, `= ANY`), keys sorted so that
 * two batches lock shared rows in one order; the parts are the data-modifying CTEs of a single
 * statement: one round trip, and atomic as every statement is. Folding first makes the parts'
 * keys disjoint, so it does not matter in which order PostgreSQL runs them.
 */
import { asBuffer, compare } from "../domain/keys.js"
import { type Batch, type ColumnFamily, decodeInt64LE } from "../domain/ops.js"
import type { Range } from "./store.js"
import { appliedTableOf, confirmFunctionOf, fenceFunctionOf, Tables, tableOf } from "./postgres-schema.js"

type Final =
  | { readonly tag: "put"; readonly value: Uint8Array }
  | { readonly tag: "del" }
  /** counters: the total, whatever the row held. */
  | { readonly tag: "set"; readonly total: bigint }
  /** counters: added to the row's total (0 when missing). */
  | { readonly tag: "add"; readonly delta: bigint }

interface Row {
  readonly key: Uint8Array
  final: Final
}

interface FamilyFold {
  readonly rows: Map<string, Row>
  readonly ranges: Array<Range>
}

export interface Statement {
  readonly sql: string
  readonly params: ReadonlyArray<unknown>
}

const wrap = (n: bigint) => BigInt.asIntN(64, n)
const inRange = (key: Uint8Array, r: Range) => compare(key, r.lo) >= 0 && compare(key, r.hi) < 0
const byKey = (a: { readonly key: Uint8Array }, b: { readonly key: Uint8Array }) => compare(a.key, b.key)

/** Why the layer refuses `batch` before sending it, or undefined. */
export const refusal = (batch: Batch, open: ReadonlySet<ColumnFamily>, supported: number): string | undefined => {
  for (const op of batch) {
    if (!open.has(op.cf)) return `column family ${op.cf} is not open in a format ${supported} build`
    if (op._tag === "merge" && op.cf !== "counters") return `merge into ${op.cf}: only counters has a merge operator`
    if (op._tag === "put" && op.cf === "counters" && op.value.length !== 8) {
      return `put into counters: a counter value has 8 bytes, not ${op.value.length}`
    }
  }
  return undefined
}

/** Every family's final state after `batch`, in op order (the memory layer's `apply`). */
export const fold = (batch: Batch): Map<ColumnFamily, FamilyFold> => {
  const out = new Map<ColumnFamily, FamilyFold>()
  const familyOf = (cf: ColumnFamily) => {
    let f = out.get(cf)
    if (f === undefined) out.set(cf, (f = { rows: new Map(), ranges: [] }))
    return f
  }
  const set = (f: FamilyFold, key: Uint8Array, final: Final) => {
    const id = asBuffer(key).toString("latin1")
    const row = f.rows.get(id)
    if (row === undefined) f.rows.set(id, { key, final })
    else row.final = final
  }
  for (const op of batch) {
    const f = familyOf(op.cf)
    switch (op._tag) {
      case "put":
        set(f, op.key, op.cf === "counters" ? { tag: "set", total: decodeInt64LE(op.value) } : { tag: "put", value: op.value })
        break
      case "del":
        set(f, op.key, { tag: "del" })
        break
      case "merge": {
        const cur = f.rows.get(asBuffer(op.key).toString("latin1"))?.final
        const next: Final =
          cur === undefined
            ? f.ranges.some((r) => inRange(op.key, r))
              ? { tag: "set", total: wrap(op.delta) }
              : { tag: "add", delta: wrap(op.delta) }
            : cur.tag === "add"
              ? { tag: "add", delta: wrap(cur.delta + op.delta) }
              : cur.tag === "set"
                ? { tag: "set", total: wrap(cur.total + op.delta) }
                : { tag: "set", total: wrap(op.delta) } // after a delete (a put into counters folds to a "set")
        set(f, op.key, next)
        break
      }
      case "deleteRange": {
        if (compare(op.lo, op.hi) >= 0) break
        const r = { lo: op.lo, hi: op.hi }
        f.ranges.push(r)
        for (const row of f.rows.values()) if (inRange(row.key, r)) row.final = { tag: "del" }
        break
      }
    }
  }
  return out
}

/** Sorted, with overlapping and touching ranges joined. */
const coalesce = (ranges: ReadonlyArray<Range>): Array<Range> => {
  const sorted = [...ranges].sort((a, b) => compare(a.lo, b.lo))
  const out: Array<{ lo: Uint8Array; hi: Uint8Array }> = []
  for (const r of sorted) {
    const last = out[out.length - 1]
    if (last !== undefined && compare(r.lo, last.hi) <= 0) {
      if (compare(r.hi, last.hi) > 0) last.hi = r.hi
    } else out.push({ lo: r.lo, hi: r.hi })
  }
  return out
}

/** The additive upsert's total: a signed 64-bit add that wraps, as RocksDB's `uint64add` does. */
const ADD_WRAPPING =
  "CASE WHEN excluded.v > 0 AND t.v > 9223372036854775807 - excluded.v" +
  " THEN (t.v::numeric + excluded.v - 18446744073709551616)::bigint" +
  " WHEN excluded.v < 0 AND t.v < (-9223372036854775807 - 1) - excluded.v" +
  " THEN (t.v::numeric + excluded.v + 18446744073709551616)::bigint" +
  " ELSE t.v + excluded.v END"

/** The parts of one family: range deletes, point deletes, upserts, additive upserts. */
const familyParts = (
  schema: string,
  cf: ColumnFamily,
  f: FamilyFold,
  param: (value: unknown) => string
): Array<string> => {
  const table = tableOf(schema, cf)
  const ranges = coalesce(f.ranges)
  const covered = (key: Uint8Array) => ranges.some((r) => inRange(key, r))
  const rows = [...f.rows.values()].sort(byKey)
  const dels: Array<Uint8Array> = []
  const putKeys: Array<Uint8Array> = []
  const putValues: Array<unknown> = []
  const addKeys: Array<Uint8Array> = []
  const addDeltas: Array<bigint> = []
  // Rows the batch writes inside a range it deletes: the range delete leaves them to the upsert.
  const keep: Array<Uint8Array> = []
  for (const { key, final } of rows) {
    switch (final.tag) {
      case "del":
        if (!covered(key)) dels.push(key)
        break
      case "put":
      case "set":
        putKeys.push(key)
        putValues.push(final.tag === "put" ? final.value : final.total)
        if (ranges.length > 0 && covered(key)) keep.push(key)
        break
      case "add":
        addKeys.push(key)
        addDeltas.push(final.delta)
        break
    }
  }
  const value = Tables[cf].value
  const parts: Array<string> = []
  if (ranges.length > 0) {
    parts.push(
      `DELETE FROM ${table} AS t USING unnest(${param(ranges.map((r) => r.lo))}::bytea[], ${param(ranges.map((r) => r.hi))}::bytea[]) AS r(lo, hi)` +
        ` WHERE t.k >= r.lo AND t.k < r.hi` +
        (keep.length > 0 ? ` AND NOT (t.k = ANY(${param(keep)}::bytea[]))` : "")
    )
  }
  if (dels.length > 0) parts.push(`DELETE FROM ${table} WHERE k = ANY(${param(dels)}::bytea[])`)
  if (putKeys.length > 0) {
    parts.push(
      `INSERT INTO ${table} (k, v) SELECT * FROM unnest(${param(putKeys)}::bytea[], ${param(putValues)}::${value}[])` +
        ` ON CONFLICT (k) DO UPDATE SET v = excluded.v`
    )
  }
  if (addKeys.length > 0) {
    parts.push(
      `INSERT INTO ${table} AS t (k, v) SELECT * FROM unnest(${param(addKeys)}::bytea[], ${param(addDeltas)}::bigint[])` +
        ` ON CONFLICT (k) DO UPDATE SET v = ${ADD_WRAPPING}`
    )
  }
  return parts
}

/**
 * The statement that commits `batch` (already checked by `refusal`), or undefined when it changes
 * nothing and confirms nothing. An unsynced batch sets `synchronous_commit` off for its own
 * transaction only (`set_config(..., true)` is `SET LOCAL`): the commit does not wait for the WAL
 * flush. `confirm`: the tokens of acknowledged unsynced commits that must still be there
 * (postgres-commit.ts); the statement fails with `LOST_SQLSTATE` if one is not.
 */
export const batchStatement = (
  schema: string,
  batch: Batch,
  sync: boolean,
  fence?: bigint,
  token?: bigint,
  confirm: ReadonlyArray<bigint> = []
): Statement | undefined => {
  const params: Array<unknown> = []
  const param = (value: unknown) => {
    params.push(value)
    return `$${params.length}`
  }
  const parts: Array<string> = []
  // Families in a fixed order, like the keys within each.
  const folded = fold(batch)
  for (const cf of [...folded.keys()].sort()) parts.push(...familyParts(schema, cf, folded.get(cf)!, param))
  if (parts.length === 0 && confirm.length === 0) return undefined
  // The commit's token: sent again after a lost answer, the batch fails on the key instead of applying twice.
  if (token !== undefined) parts.unshift(`INSERT INTO ${appliedTableOf(schema)} (token) VALUES (${param(token.toString())}::bigint)`)
  const ctes = (ps: ReadonlyArray<string>) => (ps.length === 0 ? "" : `WITH ${ps.map((p, i) => `w${i} AS (${p})`).join(", ")} `)
  // Fenced (a lease holder's batch): the main query calls the fence, whose failure aborts every part;
  // so does the confirmation's.
  const last = [
    ...(confirm.length === 0 ? [] : [`${confirmFunctionOf(schema)}(${param(confirm.map(String))}::bigint[])`]),
    ...(fence === undefined ? [] : [`${fenceFunctionOf(schema)}(${param(fence.toString())}::bigint)`]),
    ...(sync ? [] : ["set_config('synchronous_commit', 'off', true)"])
  ]
  const sql = last.length === 0 ? ctes(parts.slice(0, -1)) + parts[parts.length - 1]! : ctes(parts) + `SELECT ${last.join(", ")}`
  return { sql, params }
}
