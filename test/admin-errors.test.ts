/**
 * Admin error answers (issue 16, docs/api.md): every refusal is JSON with
 * `error` and `message` (404 included); a message names the field and the
 * forms it accepts, never echoes more than the first offending value (cut
 * to a bound), and never prints a schema. Real HTTP on 127.0.0.1 over the
 * services on RocksDB in a temp dir.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { MESSAGE_MAX } from "../src/http/errors.js"
import { ACME, adminCall as call, adminConfig, GLOBAL } from "./admin-fixture.js"
import { type Edge, startEdge } from "./edge-harness.js"

const config = adminConfig()

const replay = (edge: Edge, body: string, token = GLOBAL) => call(edge, token, "/v1/dlq/replay", { method: "POST", body })

/** A refusal as docs/api.md promises it: JSON, a code, a short message with no schema in it. */
const expectRefusal = (r: { status: number; body: any; bytes: number }, status: number, error: string, message?: RegExp) => {
  expect(r.status).toBe(status)
  expect(typeof r.body.error).toBe("string")
  expect(typeof r.body.message).toBe("string")
  expect(r.body.error).toBe(error)
  expect(r.body.message.length).toBeLessThanOrEqual(MESSAGE_MAX)
  expect(r.bytes).toBeLessThan(MESSAGE_MAX + 100)
  expect(r.body.message).not.toMatch(/ReplayFilter|readonly|\{|Expected no excess|\| /)
  if (message !== undefined) expect(r.body.message).toMatch(message)
}

describe("admin errors", () => {
  it.live("admin errors do not echo the request", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(config)

        // 1,001 ids: the bound is named, no id is echoed (the request is about 45 KB).
        const ids = Array.from({ length: 1_001 }, (_, i) => `h_${String(i).padStart(40, "0")}`)
        const many = yield* replay(edge, JSON.stringify({ ids }))
        expectRefusal(many, 400, "bad_body", /^ids: expected at most 1,000 hook ids$/)
        expect(many.body.message).not.toContain("h_")

        // A body that is not an object: what is expected, not the schema.
        expectRefusal(yield* replay(edge, "[1,2]"), 400, "bad_body", /^body: expected a JSON object with tenant, source, from, to, ids or destination$/)
        expectRefusal(yield* replay(edge, "{bad"), 400, "bad_body")

        // Each field names its accepted forms.
        for (const from of ['"yesterday"', "true", "-5", "1.5", "[]"]) {
          expectRefusal(yield* replay(edge, `{"from": ${from}}`), 400, "bad_body", /^from: expected an ISO 8601 time or epoch ms$/)
        }
        expectRefusal(yield* replay(edge, '{"to": {}}'), 400, "bad_body", /^to: expected an ISO 8601 time or epoch ms$/)
        expectRefusal(yield* replay(edge, '{"tenant": 5}'), 400, "bad_body", /^tenant: expected a tenant id or a list of tenant ids$/)
        expectRefusal(yield* replay(edge, '{"ids": [1, 2]}'), 400, "bad_body", /^ids\[0\]: expected a hook id$/)
        expectRefusal(yield* replay(edge, '{"ids": "h_1"}'), 400, "bad_body", /^ids: expected a list of at most 1,000 hook ids$/)

        // An unknown field: named (cut), with the fields there are.
        const key = "k".repeat(10_000)
        const unknown = yield* replay(edge, JSON.stringify({ [key]: 1 }))
        expectRefusal(unknown, 400, "bad_body", /not a field; expected one of tenant, source, from, to, ids, destination$/)
        expect(unknown.body.message.startsWith(`${"k".repeat(64)}…: `)).toBe(true)

        // One offending value, cut: a 5,000-character "id" that is no hook id.
        const long = yield* replay(edge, JSON.stringify({ ids: ["x".repeat(5_000)] }))
        expectRefusal(long, 400, "bad_body", /^ids: "x+/)

        // A tenant outside a scoped token's scope, 10,000 characters long: named, cut.
        const far = yield* call(edge, ACME, `/v1/dlq?tenant=${"y".repeat(10_000)}`)
        expectRefusal(far, 403, "forbidden", /not scoped to tenant "y+/)

        // Queries, 404 and 401: error and message, every one.
        expectRefusal(yield* call(edge, GLOBAL, "/v1/dlq?limit=abc"), 400, "bad_query", /^limit: expected an integer from 1 to 1000$/)
        expectRefusal(yield* call(edge, GLOBAL, "/v1/dlq?cursor=zz"), 400, "bad_query", /^cursor: /)
        expectRefusal(yield* call(edge, GLOBAL, "/v1/tenants/acme/queue?kinds=foo", { method: "DELETE" }), 400, "bad_query", /^kinds: expected pending, dead or both/)
        expectRefusal(yield* call(edge, GLOBAL, "/v1/nothing"), 404, "not_found", /no such endpoint/)
        expectRefusal(yield* call(edge, GLOBAL, `/v1/${"z".repeat(5_000)}`), 404, "not_found")
        expectRefusal(yield* call(edge, GLOBAL, "/v1/tenants/nobody"), 404, "unknown_tenant")
        expectRefusal(yield* call(edge, "not-a-token-0123456789", "/v1/dlq"), 401, "unauthorized")
      })
    )
  )
})
