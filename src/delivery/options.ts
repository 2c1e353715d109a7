/**
 * The pipeline's options (docs/configuration.md, `pipeline.*` and `sinks[]`),
 * their defaults and ranges, the fixed bounds of docs/delivery.md "Limits",
 * and the run state its parts share (src/delivery/pipeline.ts wires them).
 */
import { Effect } from "effect"
import type { Config } from "../domain/config.js"
import { parseSecret } from "../domain/signature.js"
import type { SinkOptions } from "./sink-client.js"
import type { LimitsOf } from "./tick.js"

export interface PipelineOptions {
  /** Dispatch tick period (ms). */
  readonly tickMs: number
  /** Rows claimed per tick at most, across tenants. */
  readonly claimLimit: number
  /** Bytes (delivery row sizes) claimed per tick at most; a tenant's first row is taken even past it. */
  readonly claimBytes: number
  /** Rows claimed and not yet settled, across sinks: bounds sink calls and envelopes in memory. */
  readonly maxInflight: number
  /** Bytes (delivery row sizes) of the rows claimed and not yet settled: bounds the envelopes in memory (a claim's first row is taken even past it). */
  readonly maxInflightBytes: number
  /** The most of `maxInflight` one tenant holds, in percent, even with nobody else waiting (docs/delivery.md "A tenant's share"). */
  readonly tenantSharePercent: number
  /** Tenants in the dispatch round at once (TEN-3, src/delivery/fair.ts). */
  readonly activeTenants: number
  /** Rows per unit of weight a tenant is offered per round at least (the DRR quantum). */
  readonly quantumRows: number
  /** Outcomes committed together in one write at most. */
  readonly commitBatch: number
  /** Shutdown: how long inflight sink calls may finish before their rows are left to boot recovery. */
  readonly graceMs: number
  /** The sinks by name, as hook envelopes name them. */
  readonly sinks: ReadonlyArray<DispatchSinkOptions>
}

/** A sink as the pipeline runs it: its client's options and its dispatch bounds (docs/delivery.md "Fair dispatch"). */
export interface DispatchSinkOptions extends SinkOptions {
  /**
   * Claimed rows waiting for one of its connections at most, while they are busy (default
   * `concurrency × SINK_WAIT_FACTOR`); more only while the sink starts more calls than this in
   * SINK_PACE_WINDOW_MS (a fast sink is kept fed between ticks).
   */
  readonly maxWaiting?: number | undefined
  /** How long a 429's `Retry-After` pauses the whole sink at most (default DEFAULT_MAX_PAUSE_MS); the row itself waits all of it. */
  readonly maxPauseMs?: number | undefined
  /** The destination orders hooks by key (docs/delivery.md "Ordered delivery"): what its lanes do with a dead head. */
  readonly ordered?: { readonly onDead: "skip" | "hold" } | undefined
}

/** A sink's `maxWaiting` by default: this many times its `concurrency`. */
export const SINK_WAIT_FACTOR = 4
/** A sink may hold as many waiting rows as it started calls in about this long, when that is more than `maxWaiting`. */
export const SINK_PACE_WINDOW_MS = 100
/** A sink's `maxPauseMs` by default. */
export const DEFAULT_MAX_PAUSE_MS = 60_000
/** Ranges of the two (checked when the layer is built, as the configuration's). */
export const MAX_WAITING_MAX = 100_000
export const MAX_PAUSE_MS_MAX = 604_800_000
/** Rows a tenant's visit steps over at most because their sinks are full, before the claim moves on to the next tenant. */
export const CLAIM_REFUSE_MAX = 256

export const maxWaitingOf = (s: DispatchSinkOptions): number => s.maxWaiting ?? s.concurrency * SINK_WAIT_FACTOR

export const Defaults = {
  tickMs: 100,
  claimLimit: 1_000,
  claimBytes: 64 * 1024 * 1024,
  maxInflight: 1_024,
  maxInflightBytes: 64 * 1024 * 1024,
  tenantSharePercent: 50,
  activeTenants: 4_096,
  quantumRows: 64,
  commitBatch: 256,
  graceMs: 10_000
} as const satisfies Omit<PipelineOptions, "sinks">

/** Inclusive ranges, checked when the layer is built. */
export const Ranges: Readonly<Record<keyof typeof Defaults, readonly [number, number]>> = {
  tickMs: [1, 60_000],
  claimLimit: [1, 100_000],
  claimBytes: [1, 1024 * 1024 * 1024],
  maxInflight: [1, 100_000],
  maxInflightBytes: [1, 4 * 1024 * 1024 * 1024],
  tenantSharePercent: [1, 100],
  activeTenants: [1, 100_000],
  quantumRows: [1, 10_000],
  commitBatch: [1, 10_000],
  graceMs: [0, 600_000]
}

/** Markers of the active index one tick reads at most to find tenants with work (TEN-3 discovery, a rotating slice). */
export const DISCOVERY_MARKERS = 64
/**
 * Tenants whose visit in the current second left that second's marker (TEN-1 §5 keeps it), handed
 * back to the round once the second has passed so their next visit deletes it (tick.ts); past it,
 * the discovery slice finds the marker as before.
 */
export const LINGERING_MAX = 65_536
/** Plan-and-claim passes per tick at most: a pass whose tenants drained leaves its budget to the next. */
export const CLAIM_PASSES = 3
/** A wake never starts ticks closer together than this, so a busy Writer cannot spin the tick. */
export const MIN_TICK_GAP_MS = 5
/** Backoff between attempts of an outcome commit that failed (the rows stay `?F` meanwhile). */
export const COMMIT_RETRY_MS = 200
/** An outcome batch short of `commitBatch` waits this long for more before it is written. */
export const COMMIT_LINGER_MS = 2
/**
 * A commit wakes the tick only once at least this share of what a claim could take is free: of
 * `maxInflight`, or of the sinks' places when they are fewer (at least one slot). So a drain
 * claims in batches instead of ticking for every outcome; below it the periodic tick still runs.
 */
export const WAKE_FREE_FRACTION = 0.5

export type Input = Partial<Omit<PipelineOptions, "sinks">> & {
  readonly sinks: ReadonlyArray<DispatchSinkOptions>
  /** Each tenant's weight and limits (TEN-3), read every tick; every tenant gets the defaults when absent. */
  readonly limitsOf?: LimitsOf
  /** The circuit breakers' settings where there is no LiveConfig (tests; default DEFAULT_BREAKER). */
  readonly breaker?: import("./breaker.js").BreakerSettings
  /** Tenant endpoints' SSRF allow list, https rule and pool bound where there is no LiveConfig (tests). */
  readonly endpointSettings?: { readonly allowNetworks: ReadonlyArray<string>; readonly httpsOnly: boolean; readonly maxPools: number; readonly rotationOverlapMs: number }
  /** A reloaded configuration's sinks (serve: `{self}` resolved); without it the sinks never change. */
  readonly sinksOf?: (config: Config) => ReadonlyArray<DispatchSinkOptions>
}

export const resolve = (input: Input): Effect.Effect<PipelineOptions> =>
  Effect.suspend(() => {
    const out = { ...Defaults, ...input } as PipelineOptions
    for (const [key, [lo, hi]] of Object.entries(Ranges) as Array<[keyof typeof Defaults, readonly [number, number]]>) {
      const v = out[key]
      if (!Number.isInteger(v) || v < lo || v > hi) return Effect.die(new Error(`pipeline option ${key} = ${v} is outside ${lo}..${hi}`))
    }
    for (const s of out.sinks) {
      if (!Number.isInteger(s.concurrency) || s.concurrency < 1) return Effect.die(new Error(`sink ${s.name}: concurrency ${s.concurrency} < 1`))
      if (!(s.timeoutMs > 0)) return Effect.die(new Error(`sink ${s.name}: timeoutMs ${s.timeoutMs} <= 0`))
      if (s.secret !== undefined && parseSecret(s.secret) === undefined) return Effect.die(new Error(`sink ${s.name}: secret is not whsec_<base64>`))
      const w = maxWaitingOf(s)
      if (!Number.isInteger(w) || w < 0 || w > MAX_WAITING_MAX) return Effect.die(new Error(`sink ${s.name}: maxWaiting ${w} is outside 0..${MAX_WAITING_MAX}`))
      const p = s.maxPauseMs ?? DEFAULT_MAX_PAUSE_MS
      if (!Number.isInteger(p) || p < 0 || p > MAX_PAUSE_MS_MAX) return Effect.die(new Error(`sink ${s.name}: maxPauseMs ${p} is outside 0..${MAX_PAUSE_MS_MAX}`))
    }
    return Effect.succeed(out)
  })

/** What the tick, the sink calls and the committer share, owned by the pipeline's `make`. */
export interface PipelineState {
  /** Claimed rows whose outcome is not committed: the global inflight bound. */
  inflight: number
  /** Their bytes (delivery row sizes): `maxInflightBytes`. */
  inflightBytes: number
  /** Set at shutdown once the tick is stopped: no claim after it, and failed commits stop retrying. */
  stopping: boolean
  /** The sinks' free places, and all their places (calls.ts sets both; a claim never takes more than the first). */
  room: () => number
  capacity: () => number
}
