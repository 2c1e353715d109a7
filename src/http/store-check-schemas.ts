/** The answer of `POST /v1/store/check` (api.ts `StoreApi`; docs/api.md "`POST /v1/store/check`"). */
import { Schema } from "effect"

const Difference = Schema.Struct({
  /** Which check found it: `store` (counters, markers, mirrors, tenant maps) or `lifecycle`. */
  check: Schema.Literals(["store", "lifecycle"]),
  problem: Schema.String,
  family: Schema.String,
  ord: Schema.optionalKey(Schema.Int),
  seq: Schema.optionalKey(Schema.Int),
  field: Schema.optionalKey(Schema.String),
  expected: Schema.optionalKey(Schema.Union([Schema.Number, Schema.String])),
  found: Schema.optionalKey(Schema.Union([Schema.Number, Schema.String])),
  key: Schema.optionalKey(Schema.String),
  /** The documented path that leaves it (then it is not corruption). */
  leftover: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "StoreCheckDifference" })

export const StoreCheckAnswer = Schema.Struct({
  /** No difference that means corruption. */
  ok: Schema.Boolean,
  format: Schema.Int,
  corruptions: Schema.Int,
  leftovers: Schema.Int,
  /** Differences of the first pass that a later one did not find alike: writes in flight. */
  unconfirmed: Schema.Int,
  passes: Schema.Int,
  /** The differences listed (at most 1,000 per check). */
  differences: Schema.Array(Difference),
  /** One per leftover path found: what leaves it and what clears it. */
  notes: Schema.Array(Schema.String),
  /** The text `ankusa store check` prints. */
  report: Schema.String
}).annotate({ identifier: "StoreCheckAnswer" })
