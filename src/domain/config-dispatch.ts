/**
 * The Writer's and the pipeline's settings of the configuration (`writer`,
 * `pipeline`): their Schemas, each key's default and range. src/domain/config.ts
 * puts them in the whole file; docs/configuration.md lists every key.
 */
import { Schema } from "effect"
import { int, withDefault } from "./schema-parts.js"

const MiB = 1024 * 1024

/** Passed to the Writer (src/queue/writer.ts `WriterOptions`); ranges are its `Ranges`, defaults its `Defaults` but the linger (docs/architecture.md "The Writer"). */
export const Writer = Schema.Struct({
  /** Requests per synced commit. */
  maxBatch: withDefault(int(1, 4_096), () => 256),
  /** Body bytes per commit (a single larger request still commits alone). */
  maxBatchBytes: withDefault(int(1, 256 * MiB), () => 16 * MiB),
  /** How long a batch that is not full waits for more requests: 1 ms lets a loaded node's batches double. */
  lingerMs: withDefault(int(0, 100), () => 1),
  /** Requests waiting for the Writer; past it, 503 unavailable. */
  queueCapacity: withDefault(int(1, 1_048_576), () => 4_096),
  /** Body bytes waiting for the Writer; past it, 503 unavailable. */
  queueBytes: withDefault(int(1, 4_096 * MiB), () => 64 * MiB)
})

/** Passed to the Pipeline (src/delivery/pipeline.ts `PipelineOptions`); ranges are its `Ranges`, defaults its `Defaults`. */
export const Pipeline = Schema.Struct({
  /** Dispatch tick period. */
  tickMs: withDefault(int(1, 60_000), () => 100),
  /** Rows, and their bytes, claimed per tick at most across tenants (a tenant's first row is taken even past the bytes). */
  claimLimit: withDefault(int(1, 100_000), () => 1_000),
  claimBytes: withDefault(int(1, 1_024 * MiB), () => 64 * MiB),
  /** Rows claimed and not yet settled, across sinks, and their bytes (a claim's first row is taken even past those). */
  maxInflight: withDefault(int(1, 100_000), () => 1_024),
  maxInflightBytes: withDefault(int(1, 4_096 * MiB), () => 64 * MiB),
  /** The most of `maxInflight` one tenant holds, in percent, even alone; with others waiting, its weight's share (docs/delivery.md "A tenant's share"). */
  tenantSharePercent: withDefault(int(1, 100), () => 50),
  /** Tenants in the dispatch round at once (TEN-3). */
  activeTenants: withDefault(int(1, 100_000), () => 4_096),
  /** Rows per unit of weight a tenant is offered per round at least (TEN-3 quantum). */
  quantumRows: withDefault(int(1, 10_000), () => 64),
  /** Outcomes committed together in one write at most. */
  commitBatch: withDefault(int(1, 10_000), () => 256),
  /** Shutdown: how long inflight sink calls may finish before their rows are left to boot recovery. */
  graceMs: withDefault(int(0, 600_000), () => 10_000)
})
