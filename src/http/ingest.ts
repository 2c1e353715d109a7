/**
 * `POST /v1/hooks/:source` (product.md "Ingest"; docs/api.md): the body as
 * bytes under the size limit, the tenant from the source (fixed or a header),
 * Standard Webhooks verification (failures quarantined and answered 401),
 * the idempotency key, and the Writer's synced commit before `202 {id, seq}`.
 * Admission (admission.ts: disk reserve, bytes being read, the tenant's
 * quota and rate) is asked once the tenant is known, before the body is read;
 * the body then arrives at `http.minBodyBytesPerSec` or is cut (body-pace.ts).
 * Every answer is counted by outcome with its latency.
 *
 * This route is the hot path, so it is a plain Node request listener rather
 * than a handler on the platform router: no fiber per request, one callback
 * from the Writer after the commit (docs/architecture.md "The ingest path").
 * Only the rare quarantine write runs as an Effect.
 */
import { Cause, Context, Effect, Exit, type Scope } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { currentOf, type Generation } from "../config/live.js"
import type { Config, EventTypeRule, Source } from "../domain/config.js"
import { onDeadOf } from "../domain/config-ordering.js"
import * as Ordering from "../domain/ordering.js"
import * as Dedupe from "../domain/dedupe.js"
import * as Signature from "../domain/signature.js"
import { SYSTEM_TENANT, TenantErased, validTenantId } from "../domain/tenants.js"
import { Quarantine } from "../lifecycle/quarantine.js"
import { type IngestResult, type SubmitError, Writer, WriterClosed } from "../queue/writer.js"
import * as Admission from "./admission.js"
import { readIncoming } from "./body.js"
import { BadRequest, BodyTooSlow, type EdgeError, NotReady, type Outcome, refusalOf, UnknownSource, VerificationFailed } from "./errors.js"
import { makeBodyPace } from "./body-pace.js"
import { type ApiServices, Gate, perServices } from "./gate.js"
import * as Metrics from "./metrics.js"
import { tracingOf } from "../observability/tracing.js"
import { contextOf, endIngest, startIngest } from "./ingest-trace.js"

type Headers = Readonly<Record<string, string>>

/** Header names that look like credentials meant for the gateway: never kept, never forwarded. */
const CREDENTIAL = /auth|token|secret|passw|api-?key|cookie|session/

/**
 * Request headers kept with the hook and forwarded on delivery: event metadata, not transport or
 * credentials. `headers` is node:http's, whose names are lower case.
 */
export const keptHeaders = (headers: Headers, tenantHeader: string | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const n in headers) {
    // Custom event headers (X-GitHub-Event, X-Shopify-Topic, …) and the sender's user agent;
    // proxy headers describe our network, not the event.
    const event = n.startsWith("x-") ? !n.startsWith("x-forwarded-") && n !== "x-real-ip" : n === "user-agent"
    if (event && n !== tenantHeader && !CREDENTIAL.test(n)) out[n] = headers[n]!
  }
  return out
}

/** Headers a quarantined request is kept with: everything but credentials. */
const quarantineHeaders = (headers: Headers): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    const n = name.toLowerCase()
    if (n !== "authorization" && n !== "proxy-authorization" && n !== "cookie") out[n] = value
  }
  return out
}

const tenantOf = (source: Source, headers: Headers): string | BadRequest => {
  if (source.tenant === SYSTEM_TENANT) return new BadRequest({ code: "invalid_tenant", message: `${SYSTEM_TENANT} is reserved for the gateway's own events` })
  if (typeof source.tenant === "string") return source.tenant
  const name = source.tenant.header
  const raw = headers[name]
  if (raw === undefined || raw.trim() === "") {
    return new BadRequest({ code: "missing_tenant", message: `source ${source.id} takes the tenant from header ${name}` })
  }
  const tenant = raw.trim()
  if (tenant === SYSTEM_TENANT) return new BadRequest({ code: "invalid_tenant", message: `header ${name}: ${SYSTEM_TENANT} is reserved for the gateway's own events` })
  return validTenantId(tenant)
    ? tenant
    : new BadRequest({ code: "invalid_tenant", message: `header ${name}: expected 1 to 256 UTF-8 bytes without NUL` })
}

/** Characters of an event type at most (the endpoints' filter patterns have the same bound). */
export const EVENT_TYPE_MAX_CHARS = 128

/**
 * The hook's event type by the source's rule: the header's value, or the string at the JSON
 * Pointer in a JSON body. None (undefined) when the header is absent or the pointer finds no
 * string; over EVENT_TYPE_MAX_CHARS is a 400.
 */
/** What a header or JSON Pointer rule finds: the trimmed header, or the JSON value at the pointer. */
const ruleValue = (rule: EventTypeRule, headers: Headers, body: Uint8Array): unknown => {
  if ("header" in rule) return headers[rule.header]?.trim()
  try {
    return pointerOf(JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8")), rule.jsonPointer)
  } catch {
    return undefined
  }
}

const nonEmpty = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined)

/**
 * The hook's ordering key by the source's rule, as `eventTypeOf` finds an event type (a number at
 * the pointer counts too, as its decimal string). None: the hook is never held back. Over
 * Ordering.MAX_KEY_BYTES (UTF-8) is a 400.
 */
const orderingKeyOf = (rule: EventTypeRule, headers: Headers, body: Uint8Array): string | undefined | BadRequest => {
  const v = ruleValue(rule, headers, body)
  const found = typeof v === "number" && Number.isFinite(v) ? String(v) : nonEmpty(v)
  if (found === undefined) return undefined
  return Ordering.validKey(found)
    ? found
    : new BadRequest({ code: "invalid_ordering_key", message: `ordering key: expected at most ${Ordering.MAX_KEY_BYTES} bytes` })
}

const eventTypeOf = (rule: EventTypeRule, headers: Headers, body: Uint8Array): string | undefined | BadRequest => {
  const found = nonEmpty(ruleValue(rule, headers, body))
  if (found === undefined) return undefined
  return found.length > EVENT_TYPE_MAX_CHARS
    ? new BadRequest({ code: "invalid_event_type", message: `event type: expected at most ${EVENT_TYPE_MAX_CHARS} characters` })
    : found
}

/** RFC 6901: `""` is the whole document; `~1` is `/` and `~0` is `~` in a token. */
const pointerOf = (doc: unknown, pointer: string): unknown => {
  if (pointer === "") return doc
  let at: unknown = doc
  for (const raw of pointer.slice(1).split("/")) {
    const token = raw.replace(/~1/g, "/").replace(/~0/g, "~")
    if (typeof at !== "object" || at === null || !Object.hasOwn(at, token)) return undefined
    at = (at as Record<string, unknown>)[token]
  }
  return at
}

const idempotencyKeyOf = (headers: Headers): string | null | BadRequest => {
  const key = headers["webhook-id"] ?? headers["idempotency-key"]
  if (key === undefined) return null
  return Dedupe.validKey(key) ? key : new BadRequest({ code: "invalid_idempotency_key", message: `expected 1 to ${Dedupe.MAX_KEY_BYTES} bytes` })
}

const PREFIX = "/v1/hooks/"

/**
 * The source of a `POST /v1/hooks/:source` request (percent-decoded, query
 * dropped), or undefined for any other request: those go to the router.
 */
export const sourceOf = (method: string | undefined, url: string | undefined): string | undefined => {
  if (method !== "POST" || url === undefined || !url.startsWith(PREFIX)) return undefined
  const q = url.indexOf("?", PREFIX.length)
  const raw = url.slice(PREFIX.length, q < 0 ? url.length : q)
  if (raw === "" || raw.includes("/")) return undefined
  if (!raw.includes("%")) return raw
  try {
    return decodeURIComponent(raw)
  } catch {
    return undefined
  }
}

/** A source with its verification key decoded once. */
type LiveSource = Source & { readonly key: Uint8Array | undefined }

const viewOf = (g: Generation) => ({
  of: g,
  sources: new Map<string, LiveSource>(
    g.config.sources.map((s) => [s.id, { ...s, key: s.verification === "none" ? undefined : Signature.parseSecret(s.verification.secret) }])
  ),
  maxBodyBytes: g.config.ingest.maxBodyBytes,
  /** The sinks that order hooks by key (docs/delivery.md "Ordered delivery"). */
  orderedSinks: new Set(g.config.sinks.filter((s) => onDeadOf(s.ordered) !== undefined).map((s) => s.name))
})

export type Listener = (req: IncomingMessage, res: ServerResponse, source: string) => void

/** The ingest listener: it runs outside any fiber and answers through `res` itself. */
export const listener = (config: Config): Effect.Effect<Listener, never, Gate | Scope.Scope> =>
  Effect.gen(function* () {
    const gate = yield* Gate
    const context = yield* Effect.context<never>()
    const runFork = Effect.runForkWith(context)
    const runCallback = Effect.runCallbackWith(context)
    const record = yield* Metrics.recorder
    // The sources of the generation in force, worked out once per generation (a reload swaps them).
    const current = yield* currentOf(config)
    let view = viewOf(current())
    // `ingest.maxBufferedBytes` sizes the listener: it needs a restart.
    const admission = Admission.make({ maxBufferedBytes: config.ingest.maxBufferedBytes })
    // So do the body pace's bounds (`http.minBodyBytesPerSec`, `http.bodyGraceMs`).
    const { minBodyBytesPerSec, bodyGraceMs } = config.http
    const pace = makeBodyPace({ minBytesPerSec: minBodyBytesPerSec, graceMs: bodyGraceMs })
    yield* Effect.addFinalizer(() => Effect.sync(pace.close))
    const archive = config.archive.enabled
    // The Writer of the services context in force, looked up once per context.
    const writerIn = perServices((services) => Context.get(services, Writer))
    // Tracing on: each request is a span (ingest-trace.ts); off, the checks of `tracing` are all it costs.
    const tracing = yield* tracingOf

    const send = (res: ServerResponse, started: number, outcome: Outcome, status: number, body: unknown, headers?: Headers) => {
      record(outcome, (performance.now() - started) / 1000)
      if (tracing !== undefined) endIngest(res, status, outcome === "duplicate" ? (body as { id: string }).id : undefined)
      const text = JSON.stringify(body)
      res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) })
      res.end(text)
    }

    // The 202 of every accepted hook, without JSON.stringify or a header object: a hook id is
    // `h_<hex>_<hex>` (hook-id.ts), so the text is ASCII with nothing to escape.
    const sendAccepted = (res: ServerResponse, started: number, id: string, seq: number) => {
      record("accepted", (performance.now() - started) / 1000)
      if (tracing !== undefined) endIngest(res, 202, id)
      const text = `{"id":"${id}","seq":${seq}}`
      res.writeHead(202, ["content-type", "application/json", "content-length", String(text.length)])
      res.end(text)
    }

    const refuse = (res: ServerResponse, started: number, e: EdgeError) => {
      if (e._tag === "StoreError") runFork(Effect.logWarning("ingest refused: the store failed the write", e))
      const r = refusalOf(e)
      send(res, started, r.outcome, r.status, r.body, r.headers)
    }

    const answer = (res: ServerResponse, started: number) => (exit: Exit.Exit<IngestResult, SubmitError>) => {
      if (Exit.isSuccess(exit)) {
        const r = exit.value
        return r.duplicate
          ? send(res, started, "duplicate", 200, { id: r.id, seq: r.seq, duplicate: true })
          : sendAccepted(res, started, r.id, r.seq)
      }
      const failure = Cause.findErrorOption(exit.cause)
      if (failure._tag === "Some") return refuse(res, started, failure.value)
      // Interrupted (the Writer is closing) or a defect: nothing was acknowledged; the client retries.
      if (Cause.hasInterruptsOnly(exit.cause)) return refuse(res, started, new WriterClosed())
      runFork(Effect.logError("ingest failed", exit.cause))
      send(res, started, "unavailable", 500, { error: "internal" })
    }

    const accept = (
      req: IncomingMessage,
      res: ServerResponse,
      started: number,
      source: LiveSource,
      services: Context.Context<ApiServices>,
      tenant: string,
      body: Uint8Array
    ) => {
      const headers = req.headers as Headers
      if (source.verification !== "none") {
        const v = Signature.verify({
          header: (name) => headers[name],
          body,
          keys: [source.key!],
          now: Date.now(),
          toleranceSeconds: source.verification.toleranceSeconds
        })
        if (v._tag === "Invalid") {
          // Kept for an operator to inspect, never delivered, no tenant ordinal (TEN-1 §2). Unless an
          // erase refused the tenant since the check above (TEN-5): then 410, and nothing is kept.
          const writer = writerIn(services)
          const put = Effect.flatMap(Quarantine, (q) =>
            q.put({ tenant, source: source.id, reason: v.reason, headers: quarantineHeaders(headers), body }, writer.erased)
          ).pipe(
            Effect.provide(services),
            Effect.map((r) => r !== undefined),
            Effect.catchTag("TenantErased", (e) => Effect.succeed(e)),
            Effect.catch((e) => Effect.as(Effect.logWarning("quarantine write failed", e), false))
          )
          runCallback(put, {
            onExit: (exit) => {
              const kept = Exit.isSuccess(exit) ? exit.value : false
              refuse(res, started, kept instanceof TenantErased ? kept : new VerificationFailed({ reason: v.reason, quarantined: kept }))
            }
          })
          return
        }
      }

      const idempotencyKey = idempotencyKeyOf(headers)
      if (idempotencyKey instanceof BadRequest) return refuse(res, started, idempotencyKey)
      const eventType = source.eventType === undefined ? undefined : eventTypeOf(source.eventType, headers, body)
      if (eventType instanceof BadRequest) return refuse(res, started, eventType)
      const orderingKey = source.orderingKey === undefined ? undefined : orderingKeyOf(source.orderingKey, headers, body)
      if (orderingKey instanceof BadRequest) return refuse(res, started, orderingKey)
      // Verified: the hook spends its tenant's rate now (a stranger's unsigned requests spend none).
      const limited = admission.spend(services, tenant)
      if (limited !== undefined) return refuse(res, started, limited)
      writerIn(services).enqueue(
        {
          tenantId: tenant,
          sourceId: source.id,
          sinks: source.routes,
          body,
          contentType: headers["content-type"] ?? "application/octet-stream",
          headers: keptHeaders(headers, typeof source.tenant === "string" ? undefined : source.tenant.header),
          idempotencyKey,
          archive,
          eventType,
          ...(orderingKey === undefined ? {} : { orderingKey, orderedSinks: view.orderedSinks }),
          trace: tracing === undefined ? undefined : contextOf(res, tenant)
        },
        answer(res, started)
      )
    }

    return (req, res, sourceId) => {
      const started = performance.now()
      try {
        if (tracing !== undefined) startIngest(tracing, req, res, sourceId)
        const g = current()
        if (view.of !== g) view = viewOf(g)
        const source = view.sources.get(sourceId)
        if (source === undefined) return refuse(res, started, new UnknownSource({ source: sourceId }))
        const { maxBodyBytes } = view
        const services = gate.unsafeServices()
        if (services instanceof NotReady) return refuse(res, started, services)
        const tenant = tenantOf(source, req.headers as Headers)
        if (typeof tenant !== "string") return refuse(res, started, tenant)
        // TEN-5: before the body and its verification, so nothing of an erased tenant is read or quarantined (no store read).
        if (writerIn(services).erased(tenant)) return refuse(res, started, new TenantErased({ tenant }))
        read(req, res, started, source, services, tenant, maxBodyBytes)
      } catch (e) {
        fault(res, started, e)
      }
    }

    /** Admitted, the body is read under the pace, each chunk charged to the bytes being read until it is handed on. */
    function read(req: IncomingMessage, res: ServerResponse, started: number, source: LiveSource, services: Context.Context<ApiServices>, tenant: string, maxBodyBytes: number) {
      const refused = admission.admit(services, tenant)
      if (refused !== undefined) return refuse(res, started, refused)
      let charged = 0
      let open = true
      // Paused at the bound it is not slow: its pace starts again when it resumes.
      const flow: Admission.Flow = {
        pause: () => (req.pause(), paced !== undefined && (paced.paused = true)),
        resume: () => (paced !== undefined && pace.restart(paced, performance.now()), req.resume())
      }
      // Released once: when the body is read (or refused, or too slow), or when the request ends without that.
      const release = () => {
        if (open) (open = false), admission.release(flow, charged), pace.done(paced)
      }
      req.once("close", release)
      const paced = pace.track(performance.now(), () => {
        detach()
        release()
        refuse(res, started, new BodyTooSlow({ min: minBodyBytesPerSec, graceMs: bodyGraceMs }))
        res.once("finish", () => req.socket.destroy())
      })
      const detach = readIncoming(
        req,
        maxBodyBytes,
        (body) => {
          release()
          try {
            if (body instanceof Uint8Array) accept(req, res, started, source, services, tenant, body)
            else refuse(res, started, body)
          } catch (e) {
            fault(res, started, e)
          }
        },
        (bytes) => {
          charged += bytes
          if (paced !== undefined) (paced.bytes += bytes), (paced.lastAt = performance.now())
          admission.charge(flow, bytes)
        }
      )
    }

    /** A bug: logged; answered 500 unless an answer has begun. Nothing was acknowledged. */
    function fault(res: ServerResponse, started: number, e: unknown) {
      runFork(Effect.logError("ingest failed", Cause.die(e)))
      if (!res.headersSent) send(res, started, "unavailable", 500, { error: "internal" })
    }
  })
