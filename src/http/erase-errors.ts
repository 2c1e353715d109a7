/** The wire errors of the erase endpoints (api.ts `EraseApi`; docs/api.md "Erasing a tenant"). */
import { Schema } from "effect"

export class UnknownEraseError extends Schema.Error<UnknownEraseError>("UnknownErase")(
  { error: Schema.Literal("unknown_erase"), message: Schema.String },
  { httpApiStatus: 404, description: "No erase job for this tenant id" }
) {}

export class EraseConflictError extends Schema.Error<EraseConflictError>("EraseConflict")(
  { error: Schema.Literal("erase_running"), message: Schema.String },
  { httpApiStatus: 409, description: "The erase is not done yet: its refusal cannot be lifted" }
) {}
