/**
 * The lifecycle's and the admin API's settings of the configuration
 * (`archive`, `quarantine`, `audit`, `dlq`, `admin`): their Schemas, each
 * key's default and range. src/domain/config.ts puts them in the whole file;
 * docs/configuration.md lists every key.
 */
import { Schema } from "effect"
import { int, withDefault } from "./schema-parts.js"

const MiB = 1024 * 1024
const DAY = 24 * 3_600_000
const GiB = 1024 * MiB

/** Passed to the Archive (src/lifecycle/archive.ts `ArchiveOptions`). */
export const Archive = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  /** Obligations of hooks received longer ago than this are dropped unwritten (counted). */
  retentionMs: withDefault(int(60_000, 365 * DAY), () => 7 * DAY),
  /** A segment past this size is closed. */
  segmentBytes: withDefault(int(MiB, 4 * GiB), () => 64 * MiB)
})

/** Passed to the Quarantine (src/lifecycle/quarantine.ts `QuarantineOptions`). */
export const QuarantineSettings = Schema.Struct({
  /** Records kept at most; past it the oldest are dropped. 0 keeps none (failures are only refused). */
  maxCount: withDefault(int(0, 10_000_000), () => 10_000),
  /** Bytes kept at most (key + value of every record). */
  maxBytes: withDefault(int(1_024, 16 * GiB), () => 64 * MiB),
  retentionMs: withDefault(int(60_000, 365 * DAY), () => 7 * DAY)
})

/** Passed to the Audit service (src/lifecycle/audit.ts `AuditOptions`). */
export const AuditSettings = Schema.Struct({
  retentionMs: withDefault(int(DAY, 3_650 * DAY), () => 90 * DAY)
})

/** Passed to the DLQ ceiling (src/lifecycle/dlq-ceiling.ts `DlqCeilingOptions`). */
export const Dlq = Schema.Struct({
  /** Dead rows kept at most (the `dead` counter); past it the oldest are dropped (counted). */
  maxRows: withDefault(int(1, 1_000_000_000), () => 1_000_000),
  /** Queue bytes (the `bytes` counter) past which the oldest dead rows are shed. */
  maxBytes: withDefault(int(MiB, 1_024 * GiB), () => 8 * GiB)
})

export const Admin = Schema.Struct({
  /** Rows per page of `GET /v1/dlq` when `limit` is not given, and its ceiling. */
  dlqPageDefault: withDefault(int(1, 1_000), () => 100),
  dlqPageMax: withDefault(int(1, 1_000), () => 1_000),
  /** Dead rows examined per synced batch of a replay. */
  replayChunk: withDefault(int(1, 10_000), () => 500),
  /** Most rows one replay request revives (the answer says whether more remain). */
  replayMax: withDefault(int(1, 10_000_000), () => 100_000),
  /** Most dead rows one replay request examines (filters may match few of them). */
  replayScanMax: withDefault(int(1, 100_000_000), () => 1_000_000),
  /** Synced chunks (500 rows each) one purge request runs at most; the answer says whether more remain. */
  purgeMaxChunks: withDefault(int(1, 1_000_000), () => 200)
})
