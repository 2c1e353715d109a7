/**
 * `POST /v1/store/check` (api.ts `StoreApi`; docs/api.md): `store check` on
 * the live node through the queue wing's `StoreCheck` service, for global
 * tokens only. A server built without that service (the edge tests) answers
 * 503.
 */
import { Effect, Option } from "effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { formatResult } from "../queue/format/check-run.js"
import { LEFTOVER_NOTES } from "../queue/format/check-lifecycle.js"
import { type LiveCheck, StoreCheck } from "../queue/format/check-service.js"
import { Admin, Api } from "./api.js"
import { toApi } from "./api-errors.js"
import { requireGlobal } from "./auth.js"
import { NotReady } from "./errors.js"

const answerOf = (live: LiveCheck) => {
  const r = live.result
  const store = (r.store?.differences ?? []).map((d) => ({ check: "store" as const, ...d }))
  const lifecycle = r.lifecycle.differences.map((d) => ({ check: "lifecycle" as const, ...d }))
  const paths = [...new Set(r.lifecycle.differences.flatMap((d) => (d.leftover === undefined ? [] : [d.leftover])))]
  return {
    ok: r.corruptions === 0,
    format: r.format,
    corruptions: r.corruptions,
    leftovers: r.leftovers,
    unconfirmed: live.unconfirmed,
    passes: live.passes,
    differences: [...store, ...lifecycle],
    notes: paths.map((p) => `${p}: ${LEFTOVER_NOTES[p]}`),
    report: formatResult(r)
  }
}

export const layer = HttpApiBuilder.group(Api, "store", (handlers) =>
  Effect.gen(function* () {
    const service = yield* Effect.serviceOption(StoreCheck)
    return handlers.handle("check", () =>
      Effect.gen(function* () {
        yield* requireGlobal(yield* Admin)
        if (Option.isNone(service)) return yield* new NotReady({ phase: "serving without the store check" })
        return answerOf(yield* service.value.run)
      }).pipe(Effect.mapError(toApi))
    )
  })
)
