/**
 * `Idempotency-Key` on the Svix-compatible POSTs (docs/svix-compat.md "Conventions"): the SDK
 * sends one on every POST and keeps it across its own retries. The first 2xx answer of a POST is
 * kept in the store (src/queue/request-answers.ts) under the tenant's dedupe keys (`?u`, version 2: src/domain/dedupe.ts), keyed
 * by the token's name, the key, the method and the path, for `dedupe.windowMs`; a repeat within
 * it answers that again without running. The dedupe sweep and TEN-5 erase remove these rows with
 * the hooks' keys. Messages keep theirs in the Writer's dedupe instead (messages.ts), in the same
 * batch as the hook.
 *
 * The answer is kept by a second synced write after the work's own: a crash between the two
 * loses the answer, not the work, and the repeat then runs again. Requests of one key run one at
 * a time (`RequestAnswers.exclusive`): a repeat sent while the first still runs waits for it.
 */
import { createHash } from "node:crypto"
import { Effect, Option } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { currentOf } from "../../config/live.js"
import type { Config } from "../../domain/config.js"
import * as Dedupe from "../../domain/dedupe.js"
import { RequestAnswers } from "../../queue/request-answers.js"
import { Admin } from "../api.js"
import { NotReady } from "../errors.js"
import { answer, refusal, type SvixError, SvixInvalid } from "./answers.js"

/** The `?u` key of a request's answer: `req:` and a digest, a form no hook's key takes on these routes. */
export const answerKeyOf = (tokenName: string, key: string, method: string, path: string): string =>
  "req:" + createHash("sha256").update(`${tokenName}\0${key}\0${method}\0${path}`, "utf8").digest("base64url")

const replayed = (a: Dedupe.Answer) =>
  a.body.length === 0
    ? HttpServerResponse.empty({ status: a.status, headers: { "idempotent-replayed": "true" } })
    : HttpServerResponse.uint8Array(a.body, { status: a.status, contentType: "application/json", headers: { "idempotent-replayed": "true" } })

const bodyOf = (r: HttpServerResponse.HttpServerResponse): Uint8Array | undefined =>
  r.body._tag === "Uint8Array" ? r.body.body : r.body._tag === "Empty" ? new Uint8Array(0) : undefined

/**
 * `respond` once per (token, `Idempotency-Key`, method, path) of `tenant`'s POSTs: without the
 * header, or without a store (tests of the handlers alone), it simply runs. A store that cannot
 * be read is 503; an answer that cannot be kept is logged and answered all the same.
 */
export const once = <R>(boot: Config, tenant: string, respond: Effect.Effect<HttpServerResponse.HttpServerResponse, never, R>) =>
  Effect.gen(function* () {
    const req = yield* HttpServerRequest.HttpServerRequest
    const header = req.headers["idempotency-key"]
    const answers = yield* Effect.serviceOption(RequestAnswers)
    if (header === undefined || Option.isNone(answers)) return yield* respond
    if (!Dedupe.validKey(header)) {
      return refusal(new SvixInvalid({ field: "header.idempotency-key", message: `expected 1 to ${Dedupe.MAX_KEY_BYTES} bytes` }))
    }
    const key = answerKeyOf((yield* Admin).name, header, req.method, req.url.split("?")[0]!)
    const windowMs = (yield* currentOf(boot))().config.dedupe.windowMs
    const a = answers.value
    // One request of a key at a time: a repeat sent while the first runs waits, then replays its answer.
    return yield* a.exclusive(
      tenant,
      key,
      Effect.gen(function* () {
        const now = Date.now()
        const kept = yield* Effect.result(a.get(tenant, key, now))
        if (kept._tag === "Failure") return refusal(new NotReady({ phase: "store" }))
        if (kept.success !== undefined) return replayed(kept.success)
        const r = yield* respond
        const body = bodyOf(r)
        if (r.status >= 200 && r.status < 300 && body !== undefined) {
          yield* a.keep(tenant, key, { status: r.status, expiresAt: now + windowMs, body }).pipe(
            Effect.catchCause((cause) => Effect.logWarning("svix: the answer of an Idempotency-Key was not kept; a repeat runs again", cause))
          )
        }
        return r
      })
    )
  })

/**
 * A POST's handler: the application the path (or body) names, checked against the token, then
 * `work` answered with `status` once per `Idempotency-Key` (`once`); refusals in Svix's shape.
 */
export const answerOnce = <A, R1, R2>(
  boot: Config,
  tenant: Effect.Effect<string, SvixError, R1>,
  status: number,
  work: (tenant: string) => Effect.Effect<A, SvixError, R2>
) => Effect.catch(Effect.flatMap(tenant, (t) => once(boot, t, answer(status, work(t)))), (e) => Effect.succeed(refusal(e)))
