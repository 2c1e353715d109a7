/** The answer of `POST /v1/config/reload` (docs/api.md; docs/configuration.md "Reloading"). */
import { Schema } from "effect"
import { Count } from "./schema-fields.js"

export const ReloadAnswer = Schema.Struct({
  generation: Count,
  loadedAt: Schema.String,
  /** Live keys whose value changed and now applies. */
  applied: Schema.Array(Schema.String),
  /** Keys changed in the file that keep their running value until a restart. */
  needsRestart: Schema.Array(Schema.Struct({ key: Schema.String, message: Schema.String }))
}).annotate({ identifier: "ReloadAnswer" })
