/** Answer fields shared by several API documents (api.ts, console-schemas.ts). */
import { Schema } from "effect"

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
