/**
 * `/api/v1/app/:app/msg…` (docs/svix-compat.md "Messages"): a message is a hook of the tenant,
 * routed to its endpoints by event type (`tenant-endpoints`), admitted and committed as
 * ../endpoint-ops.ts `submitMade` does for any hook the node makes: the tenant's disk reserve,
 * quota and rate, then the Writer's synced commit before the 202. `eventId` is the Writer's
 * idempotency key (a repeat is 409, as Svix answers); without one, the request's
 * `Idempotency-Key` is, and a repeat answers the first message again.
 */
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import { currentOf } from "../../config/live.js"
import { TENANT_ENDPOINTS } from "../../domain/config.js"
import * as Dedupe from "../../domain/dedupe.js"
import { validPattern } from "../../domain/endpoints.js"
import { type Envelope, tenantOf } from "../../domain/envelope.js"
import type { Config } from "../../domain/config.js"
import * as HookId from "../../domain/hook-id.js"
import { Queue } from "../../queue/queue.js"
import { Admin } from "../api.js"
import { readJson } from "../body.js"
import { submitMade, writerRefusal } from "../endpoint-ops.js"
import { TooLarge } from "../errors.js"
import { SvixConflict, SvixInvalid } from "./answers.js"
import { isRequestKey, requestKeyOf } from "./ids.js"

/** The source id a message's envelope names (no configured source has it: ids cannot hold a colon). */
export const MESSAGE_SOURCE = "svix:msg"
/** Svix's `eventId` form. */
const EVENT_ID = /^[A-Za-z0-9._-]{1,256}$/
/** A body's room besides its payload: the event type, the event id, JSON's punctuation. */
const ENVELOPE_ROOM = 4096

const refuse = (field: string, message: string) => Effect.fail(new SvixInvalid({ field, message }))

const messageIn = (maxBodyBytes: number) =>
  Effect.flatMap(readJson(maxBodyBytes + ENVELOPE_ROOM, "body: expected a JSON object"), (u) =>
    Effect.gen(function* () {
      const doc = (typeof u === "object" && u !== null && !Array.isArray(u) ? u : {}) as Record<string, unknown>
      const unknown = Object.keys(doc).find((k) => !["eventType", "payload", "eventId"].includes(k) && doc[k] !== null && doc[k] !== undefined)
      if (unknown !== undefined) return yield* refuse(unknown.slice(0, 64), "Ankusa cannot honour this field; expected eventType, payload, eventId")
      const eventType = doc["eventType"]
      if (typeof eventType !== "string" || eventType.endsWith(".*") || !validPattern(eventType)) {
        return yield* refuse("eventType", "expected an event type of at most 128 characters: A-Z a-z 0-9 _ . : -")
      }
      const payload = doc["payload"]
      if (typeof payload !== "object" || payload === null || Array.isArray(payload)) return yield* refuse("payload", "expected a JSON object")
      const eventId = doc["eventId"] ?? null
      if (eventId !== null && (typeof eventId !== "string" || !EVENT_ID.test(eventId))) return yield* refuse("eventId", "expected 1 to 256 of A-Z a-z 0-9 . _ -")
      const body = Buffer.from(JSON.stringify(payload), "utf8")
      if (body.length > maxBodyBytes) return yield* new TooLarge({ limit: maxBodyBytes })
      return { eventType, body, eventId: eventId as string | null }
    })
  )

/** A hook as Svix shows a message: its JSON body as the payload (null when it is not JSON). */
export const messageOut = (env: Envelope) => {
  let payload: unknown = null
  try {
    payload = JSON.parse(Buffer.from(env.body).toString("utf8"))
  } catch {
    payload = null
  }
  return {
    id: env.id,
    eventType: env.eventType ?? null,
    eventId: env.idempotencyKey === null || isRequestKey(env.idempotencyKey) ? null : env.idempotencyKey,
    payload,
    channels: null,
    tags: null,
    timestamp: new Date(env.receivedAt).toISOString()
  }
}

/** The tenant's hook of this id, or undefined (another tenant's answers as a missing one). */
export const envelopeOf = (tenant: string, id: string) =>
  Effect.gen(function* () {
    const parsed = HookId.parse(id)
    if (parsed === undefined) return undefined
    const env = (yield* Effect.flatMap(Queue, (q) => q.envelopes([parsed.seq]))).get(parsed.seq)
    return env === undefined || env.id !== id || tenantOf(env) !== tenant ? undefined : env
  })

export const create = (boot: Config, tenant: string) =>
  Effect.gen(function* () {
    const current = yield* currentOf(boot)
    const input = yield* messageIn(current().config.ingest.maxBodyBytes)
    const header = (yield* HttpServerRequest.HttpServerRequest).headers["idempotency-key"]
    if (header !== undefined && !Dedupe.validKey(header)) return yield* refuse("idempotency-key", `expected 1 to ${Dedupe.MAX_KEY_BYTES} bytes`)
    const key = input.eventId ?? (header === undefined ? null : requestKeyOf((yield* Admin).name, header))
    const r = yield* submitMade({
      tenantId: tenant,
      sourceId: MESSAGE_SOURCE,
      sinks: [TENANT_ENDPOINTS],
      body: input.body,
      contentType: "application/json",
      headers: {},
      idempotencyKey: key,
      archive: false,
      eventType: input.eventType
    }).pipe(Effect.mapError(writerRefusal))
    if (!r.duplicate) {
      return { id: r.id, eventType: input.eventType, eventId: input.eventId, payload: JSON.parse(input.body.toString("utf8")), channels: null, tags: null, timestamp: new Date().toISOString() }
    }
    if (input.eventId !== null) return yield* new SvixConflict({ message: `a message with eventId ${input.eventId} was sent: ${r.id}` })
    // The same token, key and application: the first message, answered again.
    const first = yield* envelopeOf(tenant, r.id)
    if (first === undefined) return yield* new SvixConflict({ message: `this Idempotency-Key answered ${r.id}, which is gone` })
    return messageOut(first)
  })
