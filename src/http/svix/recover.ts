/**
 * `POST …/endpoint/:id/recover` (docs/svix-compat.md "Recover"): the DLQ replay of
 * `POST /v1/dlq/replay` with the tenant, the endpoint as its destination and `[since, until]` as
 * its dead-letter window, run to its end in the replay's bounded, synced chunks, audited as a
 * replay. Answered 202 with a finished task.
 */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { currentOf } from "../../config/live.js"
import type { Config } from "../../domain/config.js"
import { endpointDestination } from "../../domain/fanout.js"
import { audited } from "../../lifecycle/audit.js"
import { Endpoints } from "../../queue/endpoints.js"
import { Replay } from "../../queue/replay.js"
import { Tenants } from "../../queue/tenants.js"
import { Admin } from "../api.js"
import { readJson } from "../body.js"
import { SvixInvalid, SMALL_BODY_MAX_BYTES } from "./answers.js"

/** Replay calls one recover makes at most (each revives up to `admin.replayMax` rows). */
export const RECOVER_MAX_CALLS = 100

const time = (doc: Record<string, unknown>, key: string, required: boolean): Effect.Effect<number | undefined, SvixInvalid> => {
  const v = doc[key]
  if (v === undefined || v === null) return required ? Effect.fail(new SvixInvalid({ field: key, message: "required" })) : Effect.succeed(undefined)
  const ms = typeof v === "string" ? Date.parse(v) : NaN
  return Number.isNaN(ms) ? Effect.fail(new SvixInvalid({ field: key, message: "expected an ISO 8601 time" })) : Effect.succeed(ms)
}

const recoverWindow = Effect.flatMap(readJson(SMALL_BODY_MAX_BYTES, "body: expected a JSON object"), (u) =>
  Effect.gen(function* () {
    const doc = (typeof u === "object" && u !== null ? u : {}) as Record<string, unknown>
    const unknown = Object.keys(doc).find((k) => k !== "since" && k !== "until")
    if (unknown !== undefined) return yield* new SvixInvalid({ field: unknown.slice(0, 64), message: "not a field; expected since or until" })
    const since = (yield* time(doc, "since", true))!
    const until = yield* time(doc, "until", false)
    if (until !== undefined && until < since) return yield* new SvixInvalid({ field: "until", message: "earlier than since" })
    return { since, until }
  })
)

export const recover = (boot: Config, tenant: string, endpointId: string) =>
  Effect.gen(function* () {
    const { since, until } = yield* recoverWindow
    const ord = yield* Effect.flatMap(Tenants, (t) => t.ord(tenant))
    const endpoint = yield* Effect.flatMap(Endpoints, (s) => s.get(ord, endpointId))
    const admin = (yield* currentOf(boot))().config.admin
    const destination = endpointDestination(endpoint.id)
    const filter = { ords: [ord], fromAt: since, toAt: until, destination }
    const limits = { chunk: admin.replayChunk, maxRevived: admin.replayMax, maxScanned: admin.replayScanMax }
    const params = { tenants: [tenant], source: null, from: since, to: until ?? null, ids: null, destination }
    const run = Effect.gen(function* () {
      const replay = yield* Replay
      let revived = 0
      let done = false
      for (let calls = 0; !done && calls < RECOVER_MAX_CALLS; calls++) {
        const r = yield* replay.replay(filter, limits)
        revived += r.revived
        done = r.done
      }
      return { revived, done }
    })
    const result = yield* audited({ actor: (yield* Admin).name, tenants: [tenant], action: "replay", params }, run)
    return {
      id: `qtask_${randomBytes(12).toString("hex")}`,
      status: result.done ? ("finished" as const) : ("failed" as const),
      task: "endpoint.recover" as const,
      updatedAt: new Date().toISOString(),
      data: { messagesSent: result.revived }
    }
  })
