/**
 * The PostgreSQL layer's tables (docs/storage.md, "The PostgreSQL layer"), read like the family
 * table in src/domain/families.ts: one table per column family, TEN-1's keys unchanged as a
 * `bytea` primary key, and one meta table whose schema version fences the tables against a
 * release that does not know their layout. `bytea` has no collation: it compares byte by byte,
 * a prefix before its extensions, which is RocksDB's bytewise order.
 */
import { type ColumnFamily, ColumnFamilies } from "../domain/ops.js"

/**
 * The layout of the tables this build creates and reads; a database stamped higher is refused.
 * 2: the lease row and the fence function (docs/architecture.md "High availability"); a version 1
 * database gets them at its next open.
 * 3: the `applied` table of commit tokens (postgres.ts: a commit whose answer was lost is found
 * there, so it is never applied twice); an older database gets it at its next open.
 * 4: the confirm function (postgres-commit.ts: a commit checks that the unsynced commits acknowledged
 * before it are still there); an older database gets it at its next open.
 */
export const POSTGRES_SCHEMA_VERSION = 4

/** The PostgreSQL schema (namespace) that holds the tables unless the options name another. */
export const DEFAULT_POSTGRES_SCHEMA = "ankusa"

export interface Table {
  readonly cf: ColumnFamily
  /** The value column: the value's bytes, or (counters) the signed 64-bit total. */
  readonly value: "bytea" | "bigint"
  /** Storage parameters: counters leave room on each page, so a merge updates in place (HOT). */
  readonly with?: string
}

const bytes = (cf: ColumnFamily): Table => ({ cf, value: "bytea" })

/** Every column family a table, by the families' own list (domain/ops.ts): the counters' values are bigint. */
export const Tables: Readonly<Record<ColumnFamily, Table>> = Object.fromEntries(
  ColumnFamilies.map((cf) => [cf, cf === "counters" ? { cf, value: "bigint", with: "fillfactor = 50" } : bytes(cf)])
) as Record<ColumnFamily, Table>

/** The meta table's row holding the schema version. */
export const SCHEMA_VERSION_ROW = "schema_version"

/** An advisory lock key held while a store's tables are created or checked (two nodes opening one database). */
export const SCHEMA_LOCK_KEY = 0x616e6b75 // "anku"

export const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`

/** The table of `cf` in `schema`, quoted (`default` and `index` are SQL keywords). */
export const tableOf = (schema: string, cf: ColumnFamily): string => `${quoteIdent(schema)}.${quoteIdent(cf)}`

export const metaTableOf = (schema: string): string => `${quoteIdent(schema)}."meta"`

/** Run first at every open, under the lock: the schema and the meta table, if missing. */
export const metaDdl = (schema: string): ReadonlyArray<string> => [
  `CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`,
  `CREATE TABLE IF NOT EXISTS ${metaTableOf(schema)} (name text PRIMARY KEY, value bigint NOT NULL)`
]

/** The tables of a new store, then its version stamp: run once, in the open's transaction. */
export const tablesDdl = (schema: string): ReadonlyArray<string> => [
  ...ColumnFamilies.map((cf) => {
    const t = Tables[cf]
    return `CREATE TABLE ${tableOf(schema, cf)} (k bytea PRIMARY KEY, v ${t.value} NOT NULL)${t.with === undefined ? "" : ` WITH (${t.with})`}`
  }),
  ...leaseDdl(schema),
  ...appliedDdl(schema),
  ...confirmDdl(schema),
  `INSERT INTO ${metaTableOf(schema)} (name, value) VALUES ('${SCHEMA_VERSION_ROW}', ${POSTGRES_SCHEMA_VERSION})`
]

export const appliedTableOf = (schema: string): string => `${quoteIdent(schema)}."applied"`

/**
 * The tokens of the commits of the last APPLIED_KEEP_MS: each batch inserts its own (postgres-batch.ts);
 * a commit whose answer was lost is settled by its token (postgres-commit.ts), `poisoned` when the
 * settling found no batch and put the token there first, so that the batch can never commit.
 */
export const appliedDdl = (schema: string): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${appliedTableOf(schema)} (token bigint PRIMARY KEY, poisoned boolean NOT NULL DEFAULT false, at timestamptz NOT NULL DEFAULT now())`
]

export const confirmFunctionOf = (schema: string): string => `${quoteIdent(schema)}."confirm"`

/** The SQLSTATE of a commit that found acknowledged commits missing: the database lost them (postgres-commit.ts). */
export const LOST_SQLSTATE = "AKL01"

/**
 * The check a commit makes of the unsynced commits acknowledged before it was sent: every token is
 * in `applied`, unpoisoned. A database that lost some (a primary's crash, or a failover to a
 * standby that never received them) fails the commit, and nothing of it applies.
 */
export const confirmDdl = (schema: string): ReadonlyArray<string> => [
  `CREATE OR REPLACE FUNCTION ${confirmFunctionOf(schema)}(tokens bigint[]) RETURNS void LANGUAGE plpgsql AS $confirm$
   DECLARE present bigint;
   BEGIN
     SELECT count(*) INTO present FROM ${appliedTableOf(schema)} WHERE token = ANY(tokens) AND NOT poisoned;
     IF present < cardinality(tokens) THEN
       RAISE EXCEPTION 'lost: % of % acknowledged commits are not in the database', cardinality(tokens) - present, cardinality(tokens) USING ERRCODE = '${LOST_SQLSTATE}';
     END IF;
   END $confirm$`
]

export const leaseTableOf = (schema: string): string => `${quoteIdent(schema)}."lease"`
export const fenceFunctionOf = (schema: string): string => `${quoteIdent(schema)}."fence"`

/** The SQLSTATE a fenced commit fails with: its lease epoch is no longer the current one. */
export const FENCED_SQLSTATE = "AKF01"

/** A session advisory lock the lease's holder keeps on its lease connection: a standby that gets it knows that session ended. */
export const LEASE_LOCK_KEY = 0x616e6b6c // "ankl"

/**
 * The lease (one row: the epoch, its holder, its expiry on the server's clock) and the fence a
 * fenced batch calls: it share-locks the row, so a takeover's update of the epoch waits for the
 * commits under the old epoch, and a commit after the takeover finds the new epoch and fails.
 */
export const leaseDdl = (schema: string): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${leaseTableOf(schema)} (id int PRIMARY KEY CHECK (id = 1), epoch bigint NOT NULL, holder text, expires_at timestamptz NOT NULL)`,
  `INSERT INTO ${leaseTableOf(schema)} (id, epoch, holder, expires_at) VALUES (1, 0, NULL, '-infinity') ON CONFLICT (id) DO NOTHING`,
  `CREATE OR REPLACE FUNCTION ${fenceFunctionOf(schema)}(e bigint) RETURNS void LANGUAGE plpgsql AS $fence$
   BEGIN
     PERFORM 1 FROM ${leaseTableOf(schema)} WHERE id = 1 AND epoch = e FOR SHARE;
     IF NOT FOUND THEN
       RAISE EXCEPTION 'fenced: lease epoch % is no longer current', e USING ERRCODE = '${FENCED_SQLSTATE}';
     END IF;
   END $fence$`
]

/** An older database at its next open: the lease and the fence (from 1), the commit tokens (from 1 or 2), the confirm function, then the stamp. */
export const upgradeDdl = (schema: string, from: number): ReadonlyArray<string> =>
  from >= POSTGRES_SCHEMA_VERSION
    ? []
    : [
        ...(from < 2 ? leaseDdl(schema) : []),
        ...appliedDdl(schema),
        ...confirmDdl(schema),
        `UPDATE ${metaTableOf(schema)} SET value = ${POSTGRES_SCHEMA_VERSION} WHERE name = '${SCHEMA_VERSION_ROW}'`
      ]

export const readSchemaVersion = (schema: string): string =>
  `SELECT value FROM ${metaTableOf(schema)} WHERE name = '${SCHEMA_VERSION_ROW}'`
