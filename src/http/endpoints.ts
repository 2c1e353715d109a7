/**
 * The handlers of `EndpointsApi` (endpoints-api.ts; docs/api.md "Endpoints"): a tenant's
 * endpoints through the `Endpoints` service. A scoped or portal token reaches only its tenants;
 * every change (and every secret revealed) leaves an audit row, committed with the change. The
 * order of refusals: the body's schema (400, 422), the scope (403), the tenant (404), the SSRF
 * guard and the bound (422).
 */
import { Effect, Result } from "effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { currentOf, type Generation } from "../config/live.js"
import { auditUrl } from "../domain/audit.js"
import type { Config } from "../domain/config.js"
import { allowList } from "../domain/config-endpoints.js"
import * as E from "../domain/endpoints.js"
import { endpointDestination } from "../domain/fanout.js"
import { checkUrl } from "../domain/ssrf.js"
import type { TenantErased } from "../domain/tenants.js"
import { Audit, audited } from "../lifecycle/audit.js"
import { type BreakerView } from "../delivery/breaker.js"
import { Pipeline } from "../delivery/pipeline.js"
import { Endpoints } from "../queue/endpoints.js"
import { Tenants } from "../queue/tenants.js"
import { Writer } from "../queue/writer.js"
import { Admin, Api } from "./api.js"
import { type AdminError, issueMessage, toApi } from "./api-errors.js"
import { requireTenant } from "./auth.js"
import { readJson } from "./body.js"
import { ENDPOINT_BODY_MAX_BYTES } from "./endpoints-api.js"

const answer = <A, E extends AdminError, R>(effect: Effect.Effect<A, E, R>) => Effect.mapError(effect, toApi)

const iso = (ms: number) => new Date(ms).toISOString()

/** A breaker's answer form (endpoints and the console's sinks). */
export const breakerView = (b: BreakerView | undefined) =>
  b === undefined
    ? null
    : {
        state: b.state,
        openUntil: b.openUntil === null ? null : iso(b.openUntil),
        failures: b.failures,
        trips: b.trips,
        lastSuccessAt: b.lastSuccessAt === null ? null : iso(b.lastSuccessAt)
      }

/** The breakers the node's pipeline holds now, by destination name (none without a pipeline). */
export const breakersNow = Effect.map(Effect.serviceOption(Pipeline), (p) =>
  p._tag === "None" ? new Map<string, BreakerView>() : new Map(p.value.breakers().map((b) => [b.destination, b]))
)

/** The answer's form of an endpoint: no secret, times in ISO 8601, its breaker from `breakers`. */
export const view = (tenant: string, e: E.Endpoint, breakers: ReadonlyMap<string, BreakerView>) => {
  const { secret: _secret, previousSecret: _previous, createdAt, updatedAt, ...rest } = e
  return { ...rest, tenant, createdAt: iso(createdAt), updatedAt: iso(updatedAt), breaker: breakerView(breakers.get(endpointDestination(e.id))) }
}

/** The body, read under its bound (413 past it; not JSON: 400) and decoded strictly: a refused field is 422 naming it. */
const body = <A>(decode: (u: unknown) => Result.Result<A, { readonly issue: Parameters<typeof issueMessage>[0] }>) =>
  Effect.flatMap(readJson(ENDPOINT_BODY_MAX_BYTES, "body: expected a JSON object"), (doc) => {
    const decoded = decode(doc)
    return Result.isSuccess(decoded)
      ? Effect.succeed(decoded.success)
      : Effect.fail(new E.InvalidEndpoint({ message: issueMessage(decoded.failure.issue, "body") }))
  })

/** A create for a tenant its erase refused (TEN-5), at the edge or inside the commit. */
const erasedRefusal = (e: TenantErased) => Effect.fail(new E.InvalidEndpoint({ message: `tenant: ${e.tenant} was erased; lift the refusal first` }))

/** The principal may act on `tenant`, and the node knows it: its ordinal. */
const tenantOrd = (tenant: string) =>
  Effect.gen(function* () {
    const p = yield* Admin
    yield* requireTenant(p, tenant)
    return { p, ord: yield* Effect.flatMap(Tenants, (t) => t.ord(tenant)) }
  })

/**
 * A tenant's endpoints as the principal may act on them, from decoded inputs: the `/v1/` handlers
 * below and the Svix adapter (src/http/svix/) call these, so no rule is written twice.
 */
export const operations = (current: () => Generation) => {
  const safeUrl = (url: string | undefined) => {
    if (url === undefined) return Effect.void
    const c = current().config
    const v = checkUrl(url, { allow: allowList(c.endpoints.allowNetworks), httpsOnly: c.endpoints.httpsOnly })
    return v.ok ? Effect.void : Effect.fail(new E.UnsafeUrl({ message: v.message }))
  }

  /** The audit row of a change, staged for the service's batch. */
  const stage = (
    actor: string,
    tenant: string,
    action: "endpoint.create" | "endpoint.update" | "endpoint.delete",
    params: (e: E.Endpoint) => Record<string, unknown>
  ) =>
    Effect.map(Audit, (a) => (e: E.Endpoint) => a.stage({ actor, tenants: [tenant], action, params: { id: e.id, ...params(e) } }))

  const list = (tenant: string) =>
    Effect.gen(function* () {
      const { ord } = yield* tenantOrd(tenant)
      const breakers = yield* breakersNow
      return { items: (yield* Effect.flatMap(Endpoints, (s) => s.list(ord))).map((e) => view(tenant, e, breakers)) }
    })

  const create = (tenant: string, input: E.EndpointCreate) =>
    Effect.gen(function* () {
      const p = yield* Admin
      yield* requireTenant(p, tenant)
      // A customer registers its URLs before its first event: the tenant gets its ordinal here if it has none.
      const writer = yield* Writer
      const ord = yield* writer.tenantOrd(tenant).pipe(
        Effect.catchTags({
          TenantLimit: (e) => Effect.fail(new E.InvalidEndpoint({ message: `tenant: this node allocates at most ${e.max} tenants (tenants.max)` })),
          TenantErased: erasedRefusal
        })
      )
      yield* safeUrl(input.url)
      const audit = yield* stage(p.name, tenant, "endpoint.create", (e) => ({ url: auditUrl(e.url) }))
      // The refusal again inside the commit: an erase may have begun since the ordinal was resolved.
      const made = yield* Effect.flatMap(Endpoints, (s) => s.create(ord, input, current().config.tenants.maxEndpoints, audit, { tenant, erased: writer.erased })).pipe(
        Effect.catchTag("TenantErased", erasedRefusal)
      )
      return { ...view(tenant, made, new Map()), secret: made.secret }
    })

  const get = (tenant: string, id: string) =>
    Effect.gen(function* () {
      const { ord } = yield* tenantOrd(tenant)
      return view(tenant, yield* Effect.flatMap(Endpoints, (s) => s.get(ord, id)), yield* breakersNow)
    })

  const secret = (tenant: string, id: string) =>
    Effect.gen(function* () {
      const { p, ord } = yield* tenantOrd(tenant)
      const e = yield* Effect.flatMap(Endpoints, (s) => s.get(ord, id))
      yield* audited({ actor: p.name, tenants: [tenant], action: "endpoint.secret", params: { id: e.id } }, Effect.void)
      return { id: e.id, secret: e.secret }
    })

  const update = (tenant: string, id: string, patch: E.EndpointPatch) =>
    Effect.gen(function* () {
      const { p, ord } = yield* tenantOrd(tenant)
      yield* safeUrl(patch.url)
      // The audit row names the fields changed, never a secret or a header value.
      const audit = yield* stage(p.name, tenant, "endpoint.update", () => ({
        fields: Object.keys(patch),
        ...(patch.url === undefined ? {} : { url: auditUrl(patch.url) })
      }))
      const changed = yield* Effect.flatMap(Endpoints, (s) => s.update(ord, id, patch, audit))
      return view(tenant, changed, yield* breakersNow)
    })

  const remove = (tenant: string, id: string) =>
    Effect.gen(function* () {
      const { p, ord } = yield* tenantOrd(tenant)
      const audit = yield* stage(p.name, tenant, "endpoint.delete", () => ({}))
      const gone = yield* Effect.flatMap(Endpoints, (s) => s.remove(ord, id, audit))
      return { id: gone.id, deleted: true as const }
    })

  return { list, create, get, secret, update, remove }
}

export const layer = (boot: Config) =>
  HttpApiBuilder.group(Api, "endpoints", (handlers) =>
    Effect.gen(function* () {
      const ops = operations(yield* currentOf(boot))
      return handlers
        .handle("list", ({ params }) => answer(ops.list(params.tenant)))
        // Raw: the body is read by body.ts under its bound, not buffered whole by the builder.
        .handleRaw("create", ({ params }) => answer(Effect.flatMap(body(E.decodeCreate), (input) => ops.create(params.tenant, input))))
        .handle("get", ({ params }) => answer(ops.get(params.tenant, params.id)))
        .handle("secret", ({ params }) => answer(ops.secret(params.tenant, params.id)))
        .handleRaw("update", ({ params }) => answer(Effect.flatMap(body(E.decodePatch), (patch) => ops.update(params.tenant, params.id, patch))))
        .handle("remove", ({ params }) => answer(ops.remove(params.tenant, params.id)))
    })
  )
