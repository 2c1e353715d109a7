/**
 * What a destination of the pipeline is (destinations.ts owns them): a shared sink or a tenant
 * endpoint's pool, with its transport, its waiting rows, its places, its health and its pace; what
 * a row's destination name resolves to; and the jobs its calls carry.
 */
import type { Effect } from "effect"
import type { Envelope } from "../domain/envelope.js"
import type { TraceSpan } from "../observability/trace-span.js"
import type { EndpointsShape } from "../queue/endpoints.js"
import type { Breaker, BreakerSettings } from "./breaker.js"
import type { Claimed } from "./calls.js"
import type { Failing } from "./health.js"
import type { DispatchSinkOptions } from "./options.js"
import type { Places } from "./sink-places.js"
import type { SinkPace } from "./sink-pace.js"
import type { TenantQueue } from "./sink-queue.js"
import type * as SinkClient from "./sink-client.js"

/** A tenant endpoint's call timeout (shared sinks have `sinks[].timeoutMs`). */
export const ENDPOINT_TIMEOUT_MS = 10_000
/** Tenants whose endpoints the pipeline holds resolved; cleared whole when full. */
export const ENDPOINT_TENANTS_HELD = 65_536
/** The metric label of every tenant endpoint (ids would make a series each). */
export const ENDPOINTS_LABEL = "tenant-endpoints"

export interface Job {
  readonly claimed: Claimed
  readonly env: Envelope
  readonly name: string
  /** The probe its destination's half-open breaker admitted: only its outcome decides the breaker. */
  readonly probe: boolean
  /** Tracing on: the span of its call (call-trace.ts), which the failure's log lines and the outcome commit name. */
  span?: TraceSpan | undefined
}

export interface Sink {
  readonly options: DispatchSinkOptions
  readonly key: Uint8Array | undefined
  /** Its keep-alive connections (`concurrency` at most). */
  readonly transport: SinkClient.Transport
  /** Claimed rows waiting for a call: round-robin by tenant, each tenant's in claim order. */
  readonly waiting: TenantQueue<Job>
  /** Calls in flight (`concurrency` at most). */
  running: number
  /** Its places: the rows admitted for it and not done calling, and the tenants parked (sink-places.ts). */
  readonly places: Places
  /** Its circuit breaker (breaker.ts); a reload or an endpoint change that keeps the URL keeps it. */
  readonly breaker: Breaker
  /** A tenant endpoint's auto-disable clock (memory only), kept as its breaker is. */
  readonly failing: Failing
  readonly maxPauseMs: number
  readonly latency: (seconds: number) => void
  /** Its rate limit and 429 pause, shared by every tenant routed to it. */
  readonly pace: SinkPace
  /** A pump scheduled for when the pace allows the next call. */
  timer: ReturnType<typeof setTimeout> | undefined
  readonly throttled: { readonly rate: () => void; readonly retry_after: () => void }
  /** Replaced or removed by a reload: no call starts on it; its transport closes when its last call ends. */
  retired: boolean
  /** A tenant endpoint's: the version it was opened for (its `updatedAt`), under the settings then in force. */
  readonly version: number | undefined
  readonly settings: object | undefined
  /** The key a rotation replaced (an endpoint's, or a sink's changed by reload): it signs beside `key` until `until`. */
  readonly previous: { readonly key: Uint8Array; readonly until: number } | undefined
  /** A tenant endpoint whose URL the SSRF guard refuses now: every call fails at once with this reason. */
  readonly refusal: string | undefined
}

/** What a destination name comes to for a row of tenant `ord`. */
export type Resolved =
  | { readonly _tag: "open"; readonly sink: Sink }
  /** Nothing to call: the row goes to the DLQ with `reason` (replay brings it back once it exists or is enabled). */
  | { readonly _tag: "gone"; readonly reason: string }
  /** The tenant's endpoints are being read; the pipeline is woken when they are. */
  | { readonly _tag: "loading" }
  /** Every endpoint pool is busy and `endpoints.maxPools` are open. */
  | { readonly _tag: "full" }
  /** An endpoint without a pool whose remembered breaker is open: the row waits for its probe time `until`. */
  | { readonly _tag: "held"; readonly until: number }

export interface DestinationDeps {
  readonly endpoints: EndpointsShape | undefined
  /** The configuration in force (the SSRF allow list, `endpoints.maxPools`). */
  readonly settings: () => { readonly allowNetworks: ReadonlyArray<string>; readonly httpsOnly: boolean; readonly maxPools: number; readonly rotationOverlapMs: number }
  /** The breaker settings in force (`breaker.*`). */
  readonly breaker: () => BreakerSettings
  /** Run a tenant's endpoint read in the background. */
  readonly fork: (effect: Effect.Effect<void>) => void
  /** The breakers' clock. */
  readonly now: () => number
  /** An idle pool closed with tenants parked behind its open breaker: they go back to the round. */
  readonly orphan: (places: Places) => void
}

/** What a breaker's view needs of a destination (the pools, the shared sinks, the remembered health). */
export interface WithBreaker {
  readonly options: { readonly name: string }
  readonly breaker: Breaker
}
