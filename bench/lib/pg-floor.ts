/**
 * The floor's store on PostgreSQL: a plain script that writes a batch's rows with no Ankusa code
 * on the write path. Per batch one statement: for each table the last value of each key as one
 * `INSERT … SELECT * FROM unnest($k, $v) ON CONFLICT (k) DO UPDATE`, its deleted keys as one
 * `DELETE … WHERE k = ANY($k)`, and the counters' summed deltas as one additive upsert, joined
 * as the data-modifying parts of one `WITH` statement, sent with @effect/sql-pg's client. The
 * tables have the layout of the PostgreSQL layer's (docs/storage.md): same rows, same indexes.
 * CPU of a window: this process (the ops' build, the statement and the client) plus every
 * PostgreSQL process (pg-cpu.ts).
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import type { Batch, ColumnFamily } from "../../src/domain/ops.js"
import { pgCpuMs } from "./pg-cpu.js"

const FAMILIES: ReadonlyArray<ColumnFamily> = ["default", "hooks", "deliveries", "index", "audit", "tenants", "counters"]
const table = (cf: ColumnFamily) => `"${cf}"`

export const plainTablesDdl = FAMILIES.map(
  (cf) => `CREATE TABLE ${table(cf)} (k bytea PRIMARY KEY, v ${cf === "counters" ? "bigint" : "bytea"} NOT NULL)${cf === "counters" ? " WITH (fillfactor = 50)" : ""}`
)

type Last = { readonly key: Uint8Array; value?: Uint8Array | bigint; delta?: bigint }

/** The one statement that writes `batch`: last write of a key wins; merges of a key summed. */
export const plainStatement = (batch: Batch): { readonly sql: string; readonly params: Array<unknown> } => {
  const byCf = new Map<ColumnFamily, Map<string, Last>>()
  for (const op of batch) {
    if (op._tag === "deleteRange") throw new Error("the plain writer has no range deletes (none in these batches)")
    let rows = byCf.get(op.cf)
    if (rows === undefined) byCf.set(op.cf, (rows = new Map()))
    const id = Buffer.from(op.key.buffer, op.key.byteOffset, op.key.byteLength).toString("latin1")
    const cur = rows.get(id)
    if (op._tag === "merge") {
      if (cur !== undefined && cur.delta === undefined) throw new Error("the plain writer merges only into untouched counters (as these batches do)")
      rows.set(id, { key: op.key, delta: (cur?.delta ?? 0n) + op.delta })
    } else if (op._tag === "put") {
      const value = op.cf === "counters" ? Buffer.from(op.value).readBigInt64LE(0) : op.value
      rows.set(id, { key: op.key, value })
    } else rows.set(id, { key: op.key })
  }
  const params: Array<unknown> = []
  const p = (v: unknown) => `$${params.push(v)}`
  const parts: Array<string> = []
  for (const [cf, rows] of byCf) {
    const puts = [...rows.values()].filter((r) => r.value !== undefined)
    const dels = [...rows.values()].filter((r) => r.value === undefined && r.delta === undefined)
    const adds = [...rows.values()].filter((r) => r.delta !== undefined)
    const v = cf === "counters" ? "bigint" : "bytea"
    if (puts.length > 0) {
      parts.push(
        `INSERT INTO ${table(cf)} (k, v) SELECT * FROM unnest(${p(puts.map((r) => r.key))}::bytea[], ${p(puts.map((r) => r.value))}::${v}[]) ON CONFLICT (k) DO UPDATE SET v = excluded.v`
      )
    }
    if (dels.length > 0) parts.push(`DELETE FROM ${table(cf)} WHERE k = ANY(${p(dels.map((r) => r.key))}::bytea[])`)
    if (adds.length > 0) {
      parts.push(
        `INSERT INTO ${table(cf)} AS t (k, v) SELECT * FROM unnest(${p(adds.map((r) => r.key))}::bytea[], ${p(adds.map((r) => r.delta))}::bigint[]) ON CONFLICT (k) DO UPDATE SET v = t.v + excluded.v`
      )
    }
  }
  const last = parts.pop()!
  return { sql: (parts.length === 0 ? "" : `WITH ${parts.map((s, i) => `w${i} AS (${s})`).join(", ")} `) + last, params }
}

export interface PlainWriter {
  /** One batch, one statement, one round trip; committed as the connection's synchronous_commit says. */
  readonly write: (batch: Batch) => Effect.Effect<void, unknown>
  readonly exec: (sql: string) => Effect.Effect<void, unknown>
}

/** A one-connection client on a fresh database with the tables created; `synchronousCommit` "off" for unsynced batches. */
export const plainWriter = (url: string, synchronousCommit: "on" | "off") =>
  Effect.gen(function* () {
    const sql = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 1, startupParameters: { synchronous_commit: synchronousCommit } })
    const exec = (text: string) => Effect.asVoid(sql.unsafe(text).raw)
    for (const ddl of plainTablesDdl) yield* exec(ddl)
    const writer: PlainWriter = {
      exec,
      write: (batch) =>
        Effect.suspend(() => {
          const s = plainStatement(batch)
          return Effect.asVoid(sql.unsafe(s.sql, s.params).raw)
        })
    }
    return writer
  }).pipe(Effect.provide(Reactivity.layer))

export interface FloorCost {
  /** µs a hook (or delivery): this process (all threads), the PostgreSQL processes. */
  readonly nodeUs: number
  readonly pgUs: number
  /** Wall seconds of the measured writes. */
  readonly seconds: number
}

/** CPU of `work` (which handles `n` hooks or deliveries) in this process and in the cluster of `postmaster`, µs each. */
export const measureWithPg = async (postmaster: number, n: number, work: () => Promise<void>): Promise<FloorCost> => {
  const node0 = process.cpuUsage()
  const pg0 = pgCpuMs(postmaster)
  const t0 = performance.now()
  await work()
  const seconds = (performance.now() - t0) / 1000
  const pg1 = pgCpuMs(postmaster)
  const node = process.cpuUsage(node0)
  return { nodeUs: (node.user + node.system) / n, pgUs: ((pg1 - pg0) * 1000) / n, seconds }
}
