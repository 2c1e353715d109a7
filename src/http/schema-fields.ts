/** Fields shared by several API documents (api.ts, console-schemas.ts, endpoint-ops-api.ts). */
import { Effect, Schema, SchemaIssue, SchemaTransformation } from "effect"

export const Count = Schema.Int

/** The six counters of a tenant or of the node (TEN-1 §4), as answers name them. */
export const CounterFields = {
  pending: Count,
  scheduled: Count,
  inflight: Count,
  dead: Count,
  bytes: Count,
  archive_pending: Count
}

/** A `limit` query: an integer from 1 to `max`. */
export const Limit = (max: number, description = `An integer from 1 to ${max}`) => {
  const message = `expected an integer from 1 to ${max}`
  return Schema.String.annotate({ description }).pipe(
    Schema.decodeTo(
      Schema.Int,
      SchemaTransformation.transformEffect({
        decode: (s, options) => (/^\d{1,7}$/.test(s) ? Effect.succeed(Number(s)) : Effect.fail(new SchemaIssue.InvalidValue({ message }, s, options))),
        encode: (n) => Effect.succeed(String(n))
      })
    )
  ).check(Schema.isBetween({ minimum: 1, maximum: max }, { message }))
}
