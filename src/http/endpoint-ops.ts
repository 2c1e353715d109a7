/**
 * The handlers of `EndpointOpsApi` (endpoint-ops-api.ts): a test event, admitted and submitted to
 * the Writer like any hook of the tenant but routed to the one endpoint (it is signed, retried and fairly
 * dispatched as any delivery), and the endpoint's recent attempts from the pipeline's log.
 */
import { Effect } from "effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { LiveConfig } from "../config/live.js"
import { AttemptLog } from "../delivery/attempt-log.js"
import type { Endpoint } from "../domain/endpoints.js"
import { Audit } from "../lifecycle/audit.js"
import { endpointDestination } from "../domain/fanout.js"
import { Endpoints } from "../queue/endpoints.js"
import { Tenants } from "../queue/tenants.js"
import { type IngestRequest, type SubmitError, Writer } from "../queue/writer.js"
import type { AdmissionRefusal } from "../domain/admission.js"
import { admitMade } from "./admission.js"
import { Admin, Api } from "./api.js"
import { type AdminError, toApi } from "./api-errors.js"
import { requireTenant } from "./auth.js"
import { TEST_EVENT_TYPE } from "./endpoint-ops-api.js"
import { NotReady } from "./errors.js"
import type { ApiServices } from "./gate.js"

const answer = <A, E extends AdminError, R>(effect: Effect.Effect<A, E, R>) => Effect.mapError(effect, toApi)

/** The endpoint exists under a tenant the principal may act on: its ordinal. */
const endpointOf = (tenant: string, id: string) =>
  Effect.gen(function* () {
    yield* requireTenant(yield* Admin, tenant)
    const ord = yield* Effect.flatMap(Tenants, (t) => t.ord(tenant))
    return { ord, endpoint: yield* Effect.flatMap(Endpoints, (s) => s.get(ord, id)) }
  })

/** `endpoints.rotationOverlapMs`'s default, for a node without a live configuration (tests). */
const DEFAULT_OVERLAP_MS = 24 * 3_600_000

/** The source id a test event's envelope names (no configured source has it: ids cannot hold a colon). */
export const TEST_SOURCE = "endpoint:test"

/**
 * A hook the node makes for a tenant (a test event, a Svix message): admitted as any hook of the
 * tenant (the disk reserve, its queued bytes and its rate), then the Writer's synced commit.
 */
export const submitMade = (req: IngestRequest) =>
  Effect.gen(function* () {
    const refused = admitMade(yield* Effect.context<ApiServices>(), req.tenantId ?? "default")
    if (refused !== undefined) return yield* Effect.fail(refused)
    return yield* Effect.flatMap(Writer, (w) => w.submit(req))
  })

/** A refusal of admission (or the Writer's own quota check) as itself; any other Writer failure as 503. */
export const writerRefusal = (e: AdmissionRefusal | SubmitError): AdmissionRefusal | NotReady =>
  e._tag === "DiskReserve" || e._tag === "TenantRate" || e._tag === "TenantQuota" || e._tag === "Busy" ? e : new NotReady({ phase: "writer" })

/** A new secret; the old one signs beside it for `endpoints.rotationOverlapMs`. */
export const rotate = (tenant: string, id: string) =>
  Effect.gen(function* () {
    const p = yield* Admin
    const { ord, endpoint } = yield* endpointOf(tenant, id)
    const live = yield* Effect.serviceOption(LiveConfig)
    const overlap = live._tag === "Some" ? live.value.get().config.endpoints.rotationOverlapMs : DEFAULT_OVERLAP_MS
    const audit = yield* Effect.map(Audit, (a) => (e: Endpoint) =>
      a.stage({ actor: p.name, tenants: [tenant], action: "endpoint.rotate", params: { id: e.id, overlapMs: overlap } })
    )
    const rotated = yield* Effect.flatMap(Endpoints, (s) => s.rotate(ord, endpoint.id, overlap, audit))
    const until = rotated.previousSecret?.until
    return { id: rotated.id, secret: rotated.secret, previousUntil: until === undefined ? null : new Date(until).toISOString() }
  })

export const layer = HttpApiBuilder.group(Api, "endpointOps", (handlers) =>
  handlers
    .handle("test", ({ params }) =>
      answer(
        Effect.gen(function* () {
          const { endpoint } = yield* endpointOf(params.tenant, params.id)
          const at = new Date().toISOString()
          const body = Buffer.from(JSON.stringify({ type: TEST_EVENT_TYPE, endpoint: endpoint.id, tenant: params.tenant, at }), "utf8")
          const r = yield* submitMade({
            tenantId: params.tenant,
            sourceId: TEST_SOURCE,
            sinks: [endpointDestination(endpoint.id)],
            body,
            contentType: "application/json",
            headers: {},
            idempotencyKey: null,
            archive: false,
            eventType: TEST_EVENT_TYPE
          }).pipe(Effect.mapError(writerRefusal))
          return { id: r.id, seq: r.seq }
        })
      )
    )
    .handle("rotate", ({ params }) => answer(rotate(params.tenant, params.id)))
    .handle("attempts", ({ params, query }) =>
      answer(
        Effect.gen(function* () {
          const { endpoint } = yield* endpointOf(params.tenant, params.id)
          const log = yield* Effect.serviceOption(AttemptLog)
          const items = log._tag === "None" ? [] : log.value.recent(endpointDestination(endpoint.id), query.limit ?? 50)
          return { items: items.map((a) => ({ ...a, at: new Date(a.at).toISOString() })) }
        })
      )
    )
)
