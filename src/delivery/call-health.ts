/**
 * A call's outcome for its destination's health (docs/delivery.md "Failing destinations",
 * "Auto-disable"): its breaker (a trip or a close logged, counted and told as an operational
 * event) and a tenant endpoint's auto-disable clock (failing without a success for
 * `endpoints.disableAfterMs`: disabled, as the system).
 */
import { Effect } from "effect"
import { tenantOf } from "../domain/envelope.js"
import { endpointIdOf } from "../domain/fanout.js"
import type { BreakerSettings } from "./breaker.js"
import type { Job, Sink } from "./destination.js"
import type { Operations } from "./operations.js"

export interface CallHealthDeps {
  /** The destinations' `record` (destinations.ts): true on a trip. */
  readonly record: (sink: Sink, settings: BreakerSettings, status: number, probe: boolean, at: number) => boolean
  readonly breaker: () => BreakerSettings
  readonly operations: Operations
  readonly disable: ((ord: number, tenant: string, id: string, reason: string) => Effect.Effect<void, unknown>) | undefined
  readonly disableAfterMs: () => number
  /** Run in the calls' fiber set. */
  readonly run: (effect: Effect.Effect<void>) => void
  readonly trips: () => void
  readonly breakerState: (sink: Sink) => void
  /** The breaker opened: what waits for its connections goes back. */
  readonly tripped: (sink: Sink) => void
}

export const makeCallHealth = (deps: CallHealthDeps) => {
  /** A tenant endpoint failing without a single success for `endpoints.disableAfterMs` is disabled. */
  const failingFor = (sink: Sink, job: Job, id: string, ok: boolean, at: number): void => {
    const f = sink.failing
    if (ok) f.since = undefined
    else f.since ??= at
    if (f.since === undefined || f.disabling || deps.disable === undefined || at - f.since < deps.disableAfterMs()) return
    f.disabling = true
    const tenant = tenantOf(job.env)
    const reason = `failing without a success since ${new Date(f.since).toISOString()}`
    deps.run(
      deps.disable(job.claimed.ref.ord, tenant, id, reason).pipe(
        Effect.andThen(deps.operations.emit({ type: "endpoint.disabled", tenant, destination: job.name, reason, at })),
        Effect.catchCause((cause) => Effect.logWarning("pipeline: endpoint not disabled", { sink: job.name, cause: String(cause) }))
      )
    )
  }

  return (sink: Sink, job: Job, status: number, at: number): void => {
    const ok = status >= 200 && status < 300
    const was = sink.breaker.state
    const endpoint = endpointIdOf(job.name)
    const event = (what: "breaker_opened" | "breaker_closed", reason: string) =>
      deps.run(deps.operations.emit({ type: `${endpoint === undefined ? "sink" : "endpoint"}.${what}`, tenant: endpoint === undefined ? null : tenantOf(job.env), destination: job.name, reason, at }))
    if (endpoint !== undefined) failingFor(sink, job, endpoint, ok, at)
    if (deps.record(sink, deps.breaker(), status, job.probe, at)) {
      deps.trips()
      event("breaker_opened", `failures past breaker.failureRatio; open until ${new Date(sink.breaker.openUntil).toISOString()}`)
      deps.run(Effect.logWarning("pipeline: breaker opened", { sink: job.name, until: new Date(sink.breaker.openUntil).toISOString(), trips: sink.breaker.trips }))
      deps.tripped(sink)
    } else if (was !== "closed" && sink.breaker.state === "closed") {
      deps.run(Effect.logInfo("pipeline: breaker closed", { sink: job.name }))
      event("breaker_closed", "a probe was answered without a failure")
    }
    if (sink.breaker.state !== was) deps.breakerState(sink)
  }
}
