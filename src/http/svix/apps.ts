/**
 * `/api/v1/app…` (docs/svix-compat.md "Applications"): an application is a tenant. A create
 * gives the tenant its ordinal through the Writer (as an endpoint create does on `/v1/`), a
 * delete is the tenant's erase (TEN-5, ../erase.ts's service), and nothing else is kept: a tenant
 * has no name, metadata or creation time of its own, so an answer shows none.
 */
import { Effect, Option } from "effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { Tenants } from "../../queue/tenants.js"
import { Writer } from "../../queue/writer.js"
import { Admin, Api } from "../api.js"
import { requireGlobal, requireTenant } from "../auth.js"
import { readJson } from "../body.js"
import { service as eraseService } from "../erase.js"
import { InvalidEndpoint } from "../../domain/endpoints.js"
import type { Config } from "../../domain/config.js"
import { answer, json, limitOf, page, refusal, SvixConflict, SvixInvalid, APP_BODY_MAX_BYTES } from "./answers.js"
import { once } from "./once.js"
import { appIdOf, tenantOfSegment, uidRefusal } from "./ids.js"

/** A tenant keeps no creation time: its answers show the epoch (docs/svix-compat.md). */
const NO_TIME = new Date(0).toISOString()

export const appOut = (tenant: string) => ({
  id: appIdOf(tenant),
  uid: tenant,
  name: tenant,
  throttleRate: null,
  metadata: {},
  createdAt: NO_TIME,
  updatedAt: NO_TIME
})

const refuse = (field: string, message: string) => Effect.fail(new SvixInvalid({ field, message }))

/** The tenant an ApplicationIn names: `uid`, else `name`; a name, rate or metadata Ankusa cannot keep is refused. */
const tenantOfBody = Effect.flatMap(readJson(APP_BODY_MAX_BYTES, "body: expected a JSON object"), (u) =>
  Effect.gen(function* () {
    const doc = (typeof u === "object" && u !== null && !Array.isArray(u) ? u : {}) as Record<string, unknown>
    const unknown = Object.keys(doc).find((k) => !["name", "uid", "throttleRate", "metadata"].includes(k))
    if (unknown !== undefined) return yield* refuse(unknown.slice(0, 64), "not a field; expected name, uid, throttleRate or metadata")
    const uid = doc["uid"] ?? doc["name"]
    if (typeof uid !== "string") return yield* refuse("name", "required: the tenant id, unless uid gives it")
    if (doc["name"] !== undefined && doc["name"] !== null && doc["name"] !== uid) {
      return yield* refuse("name", "Ankusa keeps no application name: give the tenant id as name or leave name out")
    }
    if (doc["throttleRate"] !== undefined && doc["throttleRate"] !== null) {
      return yield* refuse("throttleRate", "set the tenant's limits with PUT /v1/tenants/:tenant/limits")
    }
    const metadata = doc["metadata"]
    if (metadata !== undefined && metadata !== null && (typeof metadata !== "object" || Object.keys(metadata).length > 0)) {
      return yield* refuse("metadata", "Ankusa keeps no application metadata; only {} is accepted")
    }
    const why = uidRefusal(uid)
    if (why !== undefined) return yield* refuse("uid", why)
    return uid
  })
)

/** The tenant's ordinal, given now if it has none (the Writer allocates it, as for a first hook). */
const allocate = (tenant: string) =>
  Effect.flatMap(Writer, (w) => w.tenantOrd(tenant)).pipe(
    Effect.catchTag("TenantErased", () => Effect.fail(new InvalidEndpoint({ message: `uid: ${tenant} was erased; lift the refusal first` })))
  )

const exists = (tenant: string) => Effect.map(Effect.option(Effect.flatMap(Tenants, (t) => t.ord(tenant))), Option.isSome)

/** `POST /api/v1/app`: 201 new, 200 with `get_if_exists=true` for an existing one, else 409; once per `Idempotency-Key`. */
const create = (boot: Config, getIfExists: boolean) =>
  Effect.gen(function* () {
    const tenant = yield* tenantOfBody
    yield* requireTenant(yield* Admin, tenant)
    const made = Effect.gen(function* () {
      if (yield* exists(tenant)) {
        if (!getIfExists) return yield* new SvixConflict({ message: "an application with this uid exists" })
        return json(200, appOut(tenant))
      }
      yield* allocate(tenant)
      return json(201, appOut(tenant))
    })
    return yield* once(boot, tenant, Effect.catch(made, (e) => Effect.succeed(refusal(e))))
  })

/** Global tokens: every tenant by ordinal, tombstones skipped; a scoped token: its own that exist. */
const list = (limit: number, iterator: string | undefined) =>
  Effect.gen(function* () {
    const p = yield* Admin
    const tenants = yield* Tenants
    const after = iterator === undefined ? 0 : Number(iterator)
    if (!Number.isInteger(after) || after < 0) return yield* refuse("query.iterator", "not an iterator this API returned")
    let ords: Array<readonly [number, string]>
    if (p.tenants === null) {
      const last = Math.min(yield* tenants.count, after + limit)
      const range = Array.from({ length: Math.max(0, last - after) }, (_, i) => after + 1 + i)
      const names = yield* tenants.labels(range)
      ords = range.map((o, i) => [o, names[i]!] as const).filter(([o, n]) => n !== `#${o}`)
      return page(ords.map(([, t]) => appOut(t)), last < (yield* tenants.count) ? String(last) : null)
    }
    const found = yield* Effect.forEach(p.tenants, (t) => Effect.option(Effect.map(tenants.ord(t), (o) => [o, t] as const)))
    ords = found.flatMap((o) => (Option.isSome(o) && o.value[0] > after ? [o.value] : [])).sort((a, b) => a[0] - b[0])
    const data = ords.slice(0, limit)
    return page(data.map(([, t]) => appOut(t)), ords.length > limit ? String(data[data.length - 1]![0]) : null)
  })

const get = (segment: string) =>
  Effect.gen(function* () {
    const tenant = tenantOfSegment(segment)
    yield* requireTenant(yield* Admin, tenant)
    yield* Effect.flatMap(Tenants, (t) => t.ord(tenant))
    return appOut(tenant)
  })

/** `PUT`: the body must name the path's tenant; a new one is created (Svix's upsert). */
const update = (segment: string) =>
  Effect.gen(function* () {
    const tenant = tenantOfSegment(segment)
    const named = yield* tenantOfBody
    if (named !== tenant) return yield* refuse("uid", "differs from the application in the path; an application cannot be renamed")
    yield* requireTenant(yield* Admin, tenant)
    yield* allocate(tenant)
    return appOut(tenant)
  })

/** `DELETE`: the tenant's erase, for global tokens only; its `?confirm=` is the path itself (the SDK sends no more). */
const remove = (segment: string) =>
  Effect.gen(function* () {
    const tenant = tenantOfSegment(segment)
    const p = yield* Admin
    yield* requireGlobal(p)
    const erase = yield* eraseService
    yield* erase.start(tenant, p.name)
  })

const isTrue = (v: string | undefined) => v === "true"

export const layer = (boot: Config) => HttpApiBuilder.group(Api, "svixApps", (handlers) =>
  handlers
    .handle("list", ({ query }) => answer(200, Effect.flatMap(limitOf(query.limit), (limit) => list(limit, query.iterator))))
    .handleRaw("create", ({ query }) => Effect.catch(create(boot, isTrue(query.get_if_exists)), (e) => Effect.succeed(refusal(e))))
    .handle("get", ({ params }) => answer(200, get(params.app_id)))
    .handleRaw("update", ({ params }) => answer(200, update(params.app_id)))
    .handle("remove", ({ params }) => answer(204, remove(params.app_id)))
)
