/** The erase group of the API (TEN-5; erase.ts implements it; docs/api.md "Erasing a tenant"). */
import { Schema } from "effect"
import * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import * as HttpApiGroup from "effect/http-api/HttpApiGroup"
import * as HttpApiSchema from "effect/http-api/HttpApiSchema"
import * as OpenApi from "effect/http-api/OpenApi"
import { ForbiddenError, Unavailable503, UnknownTenantError } from "./api-errors.js"
import { AdminAuth, RequestErrors, Services } from "./api-security.js"
import { EraseConflictError, UnknownEraseError } from "./erase-errors.js"
import { Count } from "./schema-fields.js"

/** A tenant's erase job (src/domain/erase.ts). */
const EraseJob = Schema.Struct({
  id: Schema.String,
  tenant: Schema.String,
  step: Count,
  step_name: Schema.String,
  done: Schema.Boolean,
  counts: Schema.Record(Schema.String, Schema.Number),
  actor: Schema.String,
  started_at: Schema.String,
  updated_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
}).annotate({ identifier: "EraseJob" })

const tenantPath = { tenant: Schema.String }
const confirm = { confirm: Schema.String.check(Schema.isMinLength(1, { message: "required" })).annotateKey({ messageMissingKey: "required" }) }

export class EraseApi extends HttpApiGroup.make("erase")
  .add(
    HttpApiEndpoint.delete("erase", "/v1/tenants/:tenant", {
      params: tenantPath,
      query: confirm,
      success: EraseJob.pipe(HttpApiSchema.status(202)),
      error: [ForbiddenError, UnknownTenantError, Unavailable503]
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "Erase every row of the tenant (?confirm=<tenant>); answers the job at once; global tokens only"),
    HttpApiEndpoint.get("status", "/v1/tenants/:tenant/erase", {
      params: tenantPath,
      success: EraseJob,
      error: [ForbiddenError, UnknownEraseError, Unavailable503]
    }).annotate(OpenApi.Summary, "The tenant's erase job and its progress; global tokens only"),
    HttpApiEndpoint.delete("lift", "/v1/tenants/:tenant/erase", {
      params: tenantPath,
      query: confirm,
      success: EraseJob,
      error: [ForbiddenError, UnknownEraseError, EraseConflictError, Unavailable503]
    })
      .middleware(RequestErrors)
      .annotate(OpenApi.Summary, "Lift the refusal of an erased tenant id (it then gets a new ordinal); global tokens only")
  )
  .middleware(Services)
  .middleware(AdminAuth)
  .annotate(OpenApi.Description, "Needs `Authorization: Bearer <token>` of a global token")
{}
