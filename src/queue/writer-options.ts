/**
 * The Writer's options (docs/configuration.md "writer"): defaults and the
 * ranges checked when its layer is built.
 */
import { Effect } from "effect"
import * as Dedupe from "../domain/dedupe.js"
import * as TenantOrds from "../domain/tenants.js"

export interface WriterOptions {
  /** `writer.maxBatch`: requests per commit. */
  readonly maxBatch?: number
  /** `writer.maxBatchBytes`: body bytes per commit (a single larger request still commits alone). */
  readonly maxBatchBytes?: number
  /** `writer.lingerMs`: how long a batch that is not full waits for more requests. */
  readonly lingerMs?: number
  /** `writer.queueCapacity`: requests waiting for the Writer; past it, `Overloaded`. */
  readonly queueCapacity?: number
  /** `writer.queueBytes`: body bytes waiting for the Writer; past it, `Overloaded`. */
  readonly queueBytes?: number
  /** `tenants.max` (TEN-1 §2). */
  readonly tenantsMax?: number
  /** `dedupe.windowMs`: how long an idempotency key answers with the first hook. */
  readonly dedupeWindowMs?: number
  /** Tenant cache entries (TEN-1 §2 fixes 65,536; smaller only in tests). */
  readonly tenantCacheEntries?: number
}

const MiB = 1024 * 1024

export const Defaults = {
  maxBatch: 256,
  maxBatchBytes: 16 * MiB,
  // The Writer's own default, for tests and tools; a served node's is writer.lingerMs, 1 (domain/config.ts).
  lingerMs: 0,
  queueCapacity: 4096,
  queueBytes: 64 * MiB,
  tenantsMax: TenantOrds.DEFAULT_MAX_TENANTS,
  dedupeWindowMs: Dedupe.DEFAULT_WINDOW_MS,
  tenantCacheEntries: TenantOrds.CACHE_ENTRIES
} as const satisfies Required<WriterOptions>

/** Inclusive ranges, checked when the layer is built. */
export const Ranges: Readonly<Record<keyof WriterOptions, readonly [number, number]>> = {
  maxBatch: [1, 4096],
  maxBatchBytes: [1, 256 * MiB],
  lingerMs: [0, 100],
  queueCapacity: [1, 1_048_576],
  queueBytes: [1, 4096 * MiB],
  tenantsMax: [1, TenantOrds.MAX_TENANTS_LIMIT],
  dedupeWindowMs: [1000, 30 * 24 * 60 * 60 * 1000],
  tenantCacheEntries: [1, TenantOrds.CACHE_ENTRIES]
}

export const resolveOptions = (o: WriterOptions): Effect.Effect<Required<WriterOptions>> =>
  Effect.suspend(() => {
    const out = { ...Defaults, ...o } as Required<WriterOptions>
    for (const [key, [lo, hi]] of Object.entries(Ranges) as Array<[keyof WriterOptions, readonly [number, number]]>) {
      const v = out[key]
      if (!Number.isInteger(v) || v < lo || v > hi) return Effect.die(new Error(`writer option ${key} = ${v} is outside ${lo}..${hi}`))
    }
    return Effect.succeed(out)
  })
