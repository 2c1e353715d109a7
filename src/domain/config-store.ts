/**
 * The configuration of the store (docs/configuration.md "Store"): `store.kind` picks the layer,
 * RocksDB in `<dataDir>/store` (the embedded default) or PostgreSQL at `store.postgres.url`
 * (docs/storage.md "The PostgreSQL layer"). A Schema config.ts puts in the file's.
 */
import { Schema } from "effect"
import { int, withDefault } from "./schema-parts.js"

const MiB = 1024 * 1024

export const STORE_KINDS = ["rocksdb", "postgres"] as const
export type StoreKind = (typeof STORE_KINDS)[number]

/** Defaults and ceilings of `store.postgres.*`. */
export const POSTGRES_MAX_CONNECTIONS_DEFAULT = 8
export const POSTGRES_MAX_CONNECTIONS_LIMIT = 256
export const POSTGRES_CONNECT_TIMEOUT_MS_DEFAULT = 10_000
export const POSTGRES_SCHEMA_DEFAULT = "ankusa"

/** The password of `store.postgres.url` when the URL has none: kept out of the file. */
export const ENV_POSTGRES_PASSWORD = "ANKUSA_STORE_POSTGRES_PASSWORD"

const PostgresUrl = Schema.String.check(
  Schema.makeFilter((s: string) => {
    if (s === "") return true
    try {
      const u = new URL(s)
      if (u.protocol !== "postgres:" && u.protocol !== "postgresql:") return "expected a postgres:// URL"
      return u.hostname !== "" || "expected a postgres:// URL with a host"
    } catch {
      return "expected a postgres:// URL such as postgres://ankusa@127.0.0.1:5432/ankusa"
    }
  })
)

const Postgres = Schema.Struct({
  /** `postgres://user[:password]@host:port/database`; required when `kind` is `postgres`. */
  url: withDefault(PostgresUrl, () => ""),
  /** The schema (namespace) holding the tables: one store a schema. */
  schema: withDefault(Schema.String.check(Schema.isPattern(/^[a-z_][a-z0-9_]{0,62}$/, { message: "expected a lower-case SQL identifier" })), () => POSTGRES_SCHEMA_DEFAULT),
  /** Connections in the node's pool. */
  maxConnections: withDefault(int(1, POSTGRES_MAX_CONNECTIONS_LIMIT), () => POSTGRES_MAX_CONNECTIONS_DEFAULT),
  /** Bound on opening one connection; a boot that cannot connect fails after it. */
  connectTimeoutMs: withDefault(int(100, 600_000), () => POSTGRES_CONNECT_TIMEOUT_MS_DEFAULT)
})

export const Store = Schema.Struct({
  kind: withDefault(Schema.Literals(STORE_KINDS), () => "rocksdb" as const),
  /** Free bytes on the store's filesystem below which ingest answers 503 `disk_reserve` (0: off; RocksDB only). */
  minFreeBytes: withDefault(int(0, Number.MAX_SAFE_INTEGER), () => 512 * MiB),
  postgres: withDefault(Postgres, () => Schema.decodeSync(Postgres)({}))
})
export type StoreSettings = typeof Store.Type

/** Defaults of `ha.*` (docs/architecture.md "High availability"). */
export const HA_LEASE_MS_DEFAULT = 10_000
export const HA_RENEW_MS_DEFAULT = 2_000
export const HA_POLL_MS_DEFAULT = 1_000

/** The lease of a store several nodes share (`store.kind: postgres`); RocksDB ignores it. */
export const Ha = Schema.Struct({
  /** A lease not renewed for this long may be taken by a standby. */
  leaseMs: withDefault(int(1_000, 600_000), () => HA_LEASE_MS_DEFAULT),
  /** How often the active node renews its lease; below half of leaseMs. */
  renewMs: withDefault(int(100, 300_000), () => HA_RENEW_MS_DEFAULT),
  /** How often a standby tries to take the lease. */
  pollMs: withDefault(int(100, 60_000), () => HA_POLL_MS_DEFAULT)
})

/** `store.postgres.url` with the password from `ENV_POSTGRES_PASSWORD` when the URL has none. */
export const postgresUrl = (s: StoreSettings, env: Readonly<Record<string, string | undefined>>): string => {
  const password = env[ENV_POSTGRES_PASSWORD]
  if (s.postgres.url === "" || password === undefined || password === "") return s.postgres.url
  const u = new URL(s.postgres.url)
  if (u.password !== "") return s.postgres.url
  u.password = encodeURIComponent(password)
  return u.toString()
}

/** A URL as `GET /v1/config` and the logs show it: no password. */
export const redactUrl = (url: string): string => {
  if (url === "") return url
  try {
    const u = new URL(url)
    if (u.password !== "") u.password = "redacted"
    return u.toString()
  } catch {
    return "[redacted]"
  }
}
