/**
 * The PostgreSQL `Store` (on Effect's `@effect/sql-pg` client): one table per column family
 * (postgres-schema.ts), a batch as one atomic statement (postgres-batch.ts), reads as bounded
 * key-ordered queries, counters as bigint totals read back as RocksDB's 8-byte little-endian
 * values. Same semantics as the memory and RocksDB layers; all pass test/store-conformance.ts.
 * Opening creates the tables of a new database and refuses one whose schema is newer than this
 * build; the store format fence (open.ts) then runs over the tables as over RocksDB's families.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted, Stream } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import type { SqlClient } from "effect/sql/SqlClient"
import { decodeU32, familyOf, Meta } from "../domain/keys.js"
import { type Batch, type ColumnFamily, ColumnFamilies, ColumnFamiliesV2, decodeInt64LE, encodeInt64LE } from "../domain/ops.js"
import { CURRENT_FORMAT, initialize } from "./open.js"
import { refusal } from "./postgres-batch.js"
import { makeCommits } from "./postgres-commit.js"
import {
  DEFAULT_POSTGRES_SCHEMA,
  metaDdl,
  metaTableOf,
  POSTGRES_SCHEMA_VERSION,
  readSchemaVersion,
  SCHEMA_LOCK_KEY,
  tableOf,
  tablesDdl,
  upgradeDdl
} from "./postgres-schema.js"
import { makeRoundTrips, readHealth, type RoundTrips } from "./postgres-health.js"
import { makeStats } from "./stats.js"
import { makeLease } from "./postgres-lease.js"
import { type Entry, type LeaseOps, type Range, Store, StoreError, StoreFormatNewer, type StoreShape } from "./store.js"
import { makeWriteMarks, summarize } from "./write-marks.js"

export interface PostgresOptions {
  /** `postgres://user:password@host:port/database`; the password is never logged. */
  readonly url: string | Redacted.Redacted
  /** The schema (namespace) of the tables (default `ankusa`). */
  readonly schema?: string
  /** Connections in the pool (default `DEFAULT_POSTGRES_MAX_CONNECTIONS`). */
  readonly maxConnections?: number
  /** Bound on opening a connection (default `DEFAULT_POSTGRES_CONNECT_TIMEOUT_MS`). */
  readonly connectTimeoutMs?: number
  /** `synchronous_commit` of synced batches (default `on`; `remote_apply` waits for a standby's replay too). */
  readonly synchronousCommit?: "on" | "remote_write" | "remote_apply"
  /** The highest store format this build supports (tests of the format fence use 2). */
  readonly supportedFormat?: number
}

export const DEFAULT_POSTGRES_MAX_CONNECTIONS = 8
export const DEFAULT_POSTGRES_CONNECT_TIMEOUT_MS = 10_000
export { POSTGRES_DEADLOCK_RETRIES } from "./postgres-commit.js"

type Values = ReadonlyArray<ReadonlyArray<unknown>>

const passwordOf = (url: string): string | undefined => {
  try {
    const p = decodeURIComponent(new URL(url).password)
    return p === "" ? undefined : p
  } catch {
    return undefined
  }
}

/** `host:port/database` of a URL: what an open error names (never the user or password). */
const targetOf = (url: string): string => {
  try {
    const u = new URL(url)
    return `${u.hostname}:${u.port === "" ? "5432" : u.port}${u.pathname}`
  } catch {
    return "(an unparsable URL)"
  }
}

/** The client's message, then the server's (or the socket's) and its SQLSTATE. */
const describe = (e: unknown): string => {
  if (!(e instanceof Error)) return String(e)
  const cause = (e as { reason?: { cause?: unknown } }).reason?.cause
  if (!(cause instanceof Error) || cause.message === e.message) return e.message
  const code = (cause as { code?: unknown }).code
  return `${e.message}: ${cause.message}${typeof code === "string" ? ` (SQLSTATE ${code})` : ""}`
}

/** The client's error as a `StoreError` of `op`, the password (should a message ever carry it) masked. */
const errorOf = (op: string, password: string | undefined, target?: string) => (e: unknown): StoreError => {
  let message = (target === undefined ? "" : `postgres at ${target}: `) + describe(e)
  if (password !== undefined) message = message.replaceAll(password, "***")
  return new StoreError({ op, message })
}


const bytesOf = (v: unknown): Buffer => Buffer.from(v as Uint8Array)

export const makePostgresStore = (options: PostgresOptions) =>
  Effect.gen(function* () {
    const url = typeof options.url === "string" ? options.url : Redacted.value(options.url)
    const password = passwordOf(url)
    const fail = (op: string) => errorOf(op, password)
    const schema = options.schema ?? DEFAULT_POSTGRES_SCHEMA
    const supported = options.supportedFormat ?? CURRENT_FORMAT
    const open = new Set<ColumnFamily>(supported >= 3 ? ColumnFamilies : ColumnFamiliesV2)
    const sql = yield* PgClient.make({
      url: Redacted.make(url),
      maxConnections: options.maxConnections ?? DEFAULT_POSTGRES_MAX_CONNECTIONS,
      connectTimeout: `${options.connectTimeoutMs ?? DEFAULT_POSTGRES_CONNECT_TIMEOUT_MS} millis`,
      // A checkout waits at most as long as a connect: with the database gone, a write fails instead of queueing for good.
      acquireTimeout: `${options.connectTimeoutMs ?? DEFAULT_POSTGRES_CONNECT_TIMEOUT_MS} millis`,
      applicationName: "ankusa",
      startupParameters: { synchronous_commit: options.synchronousCommit ?? "on" }
    }).pipe(Effect.mapError(errorOf("open", password, targetOf(url))))
    yield* openSchema(sql, schema).pipe(
      Effect.mapError((e) => (e._tag === "StoreFormatNewer" ? e : errorOf("open", password, targetOf(url))(e)))
    )
    // The lease's own session (postgres-lease.ts): one connection, kept while the store is open.
    const leaseSql = yield* PgClient.make({
      url: Redacted.make(url),
      maxConnections: 1,
      minConnections: 1,
      idleTimeout: "1 days",
      connectTimeout: `${options.connectTimeoutMs ?? DEFAULT_POSTGRES_CONNECT_TIMEOUT_MS} millis`,
      acquireTimeout: `${options.connectTimeoutMs ?? DEFAULT_POSTGRES_CONNECT_TIMEOUT_MS} millis`,
      applicationName: "ankusa-lease"
    }).pipe(Effect.mapError(errorOf("open", password, targetOf(url))))
    let fence: bigint | undefined
    const lease = makeLease(leaseSql, schema, fail, (epoch) => void (fence = epoch))
    return yield* makeStore(sql, schema, supported, open, fail, makeRoundTrips(options.maxConnections ?? DEFAULT_POSTGRES_MAX_CONNECTIONS), {
      lease,
      fence: () => fence
    })
  })

/** Under an advisory lock, in one transaction: the meta table, the fence, and a new store's tables. */
const openSchema = (sql: SqlClient, schema: string) =>
  sql.withTransaction(
    Effect.gen(function* () {
      yield* sql.unsafe(`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK_KEY})`).raw
      // Only a database without the meta table is sent DDL: later opens need no CREATE privilege.
      const [exists] = yield* sql.unsafe(`SELECT to_regclass($1) IS NOT NULL`, [metaTableOf(schema)]).values
      if (exists?.[0] !== true) for (const ddl of metaDdl(schema)) yield* sql.unsafe(ddl).raw
      const [row] = yield* sql.unsafe(readSchemaVersion(schema)).values
      const found = row === undefined ? undefined : Number(row[0])
      if (found !== undefined && found > POSTGRES_SCHEMA_VERSION) {
        return yield* Effect.fail(new StoreFormatNewer({ found, supported: POSTGRES_SCHEMA_VERSION, of: "postgres schema" }))
      }
      for (const ddl of found === undefined ? tablesDdl(schema) : upgradeDdl(schema, found)) yield* sql.unsafe(ddl).raw
    })
  )

const makeStore = (
  sql: SqlClient,
  schema: string,
  supported: number,
  open: ReadonlySet<ColumnFamily>,
  fail: (op: string) => (e: unknown) => StoreError,
  trips: RoundTrips,
  ha: { readonly lease: LeaseOps; readonly fence: () => bigint | undefined }
) =>
  Effect.gen(function* () {
    const stats = makeStats()
    const marks = makeWriteMarks()
    const table = (cf: ColumnFamily) => tableOf(schema, cf)
    const values = (op: string, text: string, params: ReadonlyArray<unknown>): Effect.Effect<Values, StoreError> =>
      trips.time(sql.unsafe(text, params).values).pipe(Effect.mapError(fail(op)))
    const refuse = (op: string, cf: ColumnFamily) =>
      open.has(cf) ? undefined : new StoreError({ op, message: `column family ${cf} is not open in a format ${supported} build` })
    // Counters hold bigint totals; every other read gives back RocksDB's bytes.
    const valueOf = (cf: ColumnFamily) => (v: unknown): Buffer =>
      cf === "counters" ? Buffer.from(encodeInt64LE(v as bigint)) : bytesOf(v)

    const commits = makeCommits({
      schema,
      run: (text, params) => trips.time(sql.unsafe(text, params).raw),
      query: (text, params) => trips.time(sql.unsafe(text, params).values),
      fail,
      committed: trips.committed,
      fence: ha.fence
    })
    const commit = commits.commit
    yield* Effect.forkScoped(commits.prune)
    yield* Effect.forkScoped(commits.confirmer)
    const write = (batch: Batch, sync: boolean) =>
      Effect.suspend(() => {
        const why = refusal(batch, open, supported)
        if (why !== undefined) return Effect.fail(new StoreError({ op: "write", message: why }))
        if (batch.length === 0) return Effect.void
        return marks.trackSummary(summarize(batch), commit(batch, sync))
      })

    const getMany = (op: string, cf: ColumnFamily, keys: ReadonlyArray<Uint8Array>): Effect.Effect<ReadonlyArray<Buffer | undefined>, StoreError> => {
      const refused = refuse(op, cf)
      if (refused !== undefined) return Effect.fail(refused)
      if (keys.length === 0) return Effect.succeed([])
      const toValue = valueOf(cf)
      if (keys.length === 1) {
        return Effect.map(values(op, `SELECT v FROM ${table(cf)} WHERE k = $1`, [keys[0]]), (rows) => [
          rows[0] === undefined ? undefined : toValue(rows[0][0])
        ])
      }
      return Effect.map(values(op, `SELECT k, v FROM ${table(cf)} WHERE k = ANY($1::bytea[])`, [keys]), (rows) => {
        const found = new Map<string, Buffer>()
        for (const [k, v] of rows) found.set(bytesOf(k).toString("latin1"), toValue(v))
        return keys.map((k) => found.get(Buffer.from(k.buffer, k.byteOffset, k.byteLength).toString("latin1")))
      })
    }

    const isEmpty = (range: Range) => Buffer.compare(range.lo, range.hi) >= 0

    /** At most `limit` entries of [lo, hi) in key order (or reverse), after `after` when given. */
    const page = (op: string, cf: ColumnFamily, range: Range, limit: number, reverse: boolean, after?: Uint8Array) => {
      const refused = refuse(op, cf)
      if (refused !== undefined) return Effect.fail(refused)
      if (limit <= 0 || isEmpty(range)) return Effect.succeed<Array<Entry>>([])
      const [lo, hi] = after === undefined ? [range.lo, range.hi] : reverse ? [range.lo, after] : [after, range.hi]
      const lower = after !== undefined && !reverse ? "k > $1" : "k >= $1"
      const text = `SELECT k, v FROM ${table(cf)} WHERE ${lower} AND k < $2 ORDER BY k${reverse ? " DESC" : ""} LIMIT $3`
      const toValue = valueOf(cf)
      return Effect.map(values(op, text, [lo, hi, limit]), (rows) => rows.map(([k, v]): Entry => ({ key: bytesOf(k), value: toValue(v) })))
    }

    const readFormat = Effect.map(getMany("format", "default", [Meta.format]), ([v]) => (v === undefined ? supported : decodeU32(v)))

    yield* initialize({ get: (cf, key) => Effect.map(getMany("open", cf, [key]), (vs) => vs[0]), write: (b) => write(b, true) }, supported)

    const store: StoreShape = {
      write: (batch, opts) => write(batch, opts.sync),
      get: (cf, key) =>
        Effect.suspend(() => {
          stats.point(familyOf(cf, key), 1)
          return Effect.map(getMany("get", cf, [key]), (vs) => vs[0])
        }),
      multiGet: (cf, keys) =>
        Effect.suspend(() => {
          for (const k of keys) stats.point(familyOf(cf, k), 1)
          return getMany("multiGet", cf, keys)
        }),
      getCounters: (cf, keys) =>
        Effect.suspend(() => {
          for (const k of keys) stats.point(familyOf(cf, k), 1)
          return Effect.flatMap(getMany("getCounters", cf, keys), (vs) =>
            Effect.try({ try: () => vs.map(decodeInt64LE), catch: fail("getCounters") })
          )
        }),
      scan: (cf, range, o) =>
        Effect.suspend(() => {
          stats.scan(familyOf(cf, range.lo))
          return page("scan", cf, range, o.limit, o.reverse === true)
        }),
      stream: (cf, range, o) =>
        Stream.suspend(() => {
          stats.scan(familyOf(cf, range.lo))
          const chunk = Math.max(1, o?.chunk ?? 1000)
          const reverse = o?.reverse === true
          return Stream.paginate(undefined as Uint8Array | undefined, (after) =>
            Effect.map(page("stream", cf, range, chunk, reverse, after), (rows) => {
              const last = rows[rows.length - 1]
              return [rows, rows.length < chunk || last === undefined ? Option.none() : Option.some(last.key)] as const
            })
          )
        }),
      first: (cf, range, o) =>
        Effect.suspend(() => {
          stats.scan(familyOf(cf, range.lo))
          return Effect.map(page("first", cf, range, 1, o?.reverse === true), (rows) => rows[0])
        }),
      format: readFormat,
      stats: stats.snapshot,
      health: readHealth(values, schema, trips),
      resetStats: stats.reset,
      marks,
      lease: ha.lease,
      // VACUUM FULL writes each table anew and drops its old files: a deleted row's bytes go with them.
      scrub: Effect.forEach([...open], (cf) => Effect.asVoid(values("scrub", `VACUUM (FULL) ${table(cf)}`, [])), { discard: true })
    }
    return store
  })

/** The PostgreSQL store at `options.url`, its pool open for the layer's scope. */
export const layerPostgres = (options: PostgresOptions): Layer.Layer<Store, StoreError | StoreFormatNewer> =>
  Layer.effect(Store, makePostgresStore(options)).pipe(Layer.provide(Reactivity.layer))


/** The store for a scope of its own (the CLI, tests): the pool closes with the scope. */
export const openPostgresStore = (options: PostgresOptions) => makePostgresStore(options).pipe(Effect.provide(Reactivity.layer))
