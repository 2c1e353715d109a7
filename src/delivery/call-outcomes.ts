/**
 * How a sink call's row is settled (docs/delivery.md "Outcomes"): a 2xx, a failure with attempts
 * left (a retry at the schedule's next time) or none (the DLQ), and a row that cannot be called
 * (its hook gone, or its destination: a sink removed, an endpoint deleted or disabled).
 */
import { Clock, Effect, Random } from "effect"
import { type Envelope, tenantOf } from "../domain/envelope.js"
import { endpointIdOf } from "../domain/fanout.js"
import * as Retry from "../domain/retry-schedule.js"
import * as Ordering from "../domain/ordering.js"
import type { DeliveryRow, LaneOf, QueueShape } from "../queue/queue.js"
import type { StoreError } from "../store/store.js"
import type { Claimed } from "./calls.js"
import { ENDPOINTS_LABEL, type Job, type Sink } from "./destinations.js"
import type { Outcomes, Settled } from "./outcomes.js"
import { makeRetryLog } from "./retry-log.js"
import { underSpan } from "./call-trace.js"
import type * as SinkClient from "./sink-client.js"

/**
 * The lane of a claimed row whose hook has an ordering key (docs/delivery.md "Ordered delivery"),
 * whether or not its destination orders now: a lane made while it did still has a head to settle.
 */
export const laneOf = (env: Envelope, sink: number, options: { readonly ordered?: { readonly onDead: "skip" | "hold" } | undefined } | undefined): LaneOf | undefined =>
  env.orderingKey === undefined
    ? undefined
    : { lane: Ordering.laneOf(env.sinks[sink] ?? "", env.orderingKey), hold: options?.ordered?.onDead === "hold" }

/** The metric label of a destination: a sink's name, one label for every tenant endpoint. */
export const labelOf = (name: string): string => (endpointIdOf(name) === undefined ? name : ENDPOINTS_LABEL)

export const makeCallOutcomes = (queue: QueueShape, outcomes: Outcomes) => {
  /** Queue `c`'s outcome, with the bytes its claim counted. */
  const settle = (c: Claimed, s: Omit<Settled, "bytes">) => Effect.sync(() => outcomes.settle({ ...s, bytes: c.entry.value.size }))

  const logRetry = makeRetryLog()

  /** Nothing else writes an inflight row's delivery row; a 2xx needs only the size the claim carries. */
  const rowOf = (c: Claimed): Effect.Effect<DeliveryRow, StoreError> => queue.deliveryRow(c.ref, c.entry.value.size)

  /** Settle a claimed row that cannot be called: its hook is gone or undecodable (`name` undefined), or its destination is not there (`reason`). */
  const settleUnroutable = (
    c: Claimed,
    env: Envelope | undefined,
    name: string | undefined,
    reason = "sink removed: no sink of that name is configured"
  ): Effect.Effect<void, StoreError> =>
    Effect.gen(function* () {
      if (env === undefined || name === undefined) {
        // No envelope, so no tenant id to name: the row is named by its sequence number and sink position.
        yield* Effect.logWarning("pipeline: hook envelope gone or undecodable; row dropped", { seq: c.ref.seq, sinkIndex: c.ref.sink })
        return yield* settle(c, { result: { _tag: "Dropped", ref: c.ref, size: c.entry.value.size, lane: env === undefined ? undefined : laneOf(env, c.ref.sink, undefined) }, sink: "unknown", outcome: "dropped" })
      }
      // A sink removed or an endpoint deleted or disabled: keep the row in the DLQ, where replay can find it.
      const row = yield* rowOf(c)
      const now = yield* Clock.currentTimeMillis
      yield* Effect.logWarning("pipeline: row dead-lettered", { tenant: tenantOf(env), hookId: env.id, sink: name, reason })
      return yield* settle(c, {
        result: { _tag: "DeadLetter", ref: c.ref, row: { ...row, lastAt: now }, at: now, hook: { sourceId: env.sourceId, id: env.id }, lane: laneOf(env, c.ref.sink, undefined) },
        sink: labelOf(name),
        outcome: "dead"
      })
    })

  /** A call that did not deliver: a retry at the schedule's next time, or the DLQ. */
  const failed = (sink: Sink, job: Job, a: SinkClient.Attempt): Effect.Effect<void, StoreError> =>
    underSpan(job, Effect.gen(function* () {
      const { claimed: c, env, name } = job
      const row = yield* rowOf(c)
      const after: DeliveryRow = { attempts: row.attempts + 1, lastStatus: a.status, size: row.size, lastAt: a.endedAt }
      const random = yield* Random.next
      const d = Retry.next(sink.options.retry, { attempt: after.attempts, status: a.status, retryAfter: a.retryAfter, now: a.endedAt, random })
      const tenant = tenantOf(env)
      if (d._tag === "Retry") {
        yield* logRetry(a.endedAt, { sink: name, tenant, hookId: env.id, status: a.status, error: a.error, body: a.body, attempt: after.attempts, nextAt: d.at })
        return yield* settle(c, { result: { _tag: "Retry", ref: c.ref, row: after, at: d.at }, sink: labelOf(name), outcome: "retried", trace: job.span?.context() })
      }
      yield* Effect.logInfo("pipeline: row dead-lettered", { tenant, hookId: env.id, sink: name, status: a.status, error: a.error, ...(a.body === undefined ? {} : { body: a.body }), attempts: after.attempts, reason: d.reason })
      return yield* settle(c, {
        result: { _tag: "DeadLetter", ref: c.ref, row: after, at: a.endedAt, hook: { sourceId: env.sourceId, id: env.id }, lane: laneOf(env, c.ref.sink, sink.options) },
        sink: labelOf(name),
        outcome: "dead",
        trace: job.span?.context()
      })
    }))

  const delivered = (job: Job): Settled => ({
    result: { _tag: "Delivered", ref: job.claimed.ref, size: job.claimed.entry.value.size, lane: laneOf(job.env, job.claimed.ref.sink, undefined) },
    bytes: job.claimed.entry.value.size,
    sink: labelOf(job.name),
    outcome: "delivered",
    trace: job.span?.context()
  })

  return { settleUnroutable, failed, delivered }
}
