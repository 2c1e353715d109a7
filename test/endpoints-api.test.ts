/**
 * Tenant endpoints over the API (issue 27; docs/api.md "Endpoints", "Portal tokens"): scopes,
 * validation, the SSRF guard at save (only loopback forms, nothing is ever sent), portal tokens.
 * Real HTTP on 127.0.0.1, RocksDB in a temp dir.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as E from "../src/domain/endpoints.js"
import * as Portal from "../src/domain/portal.js"
import * as Ssrf from "../src/domain/ssrf.js"
import { ACME, adminCall as call, adminConfig, GLOBAL } from "./admin-fixture.js"
import { type Edge, read, startEdge } from "./edge-harness.js"

const SECRET = "portal-secret-0123456789-0123456789"
const config = adminConfig({ portal: { secret: SECRET, ttlSeconds: 60 } })

const ingest = (edge: Edge, tenant: string) =>
  Effect.promise(() => edge.fetch("/v1/hooks/shop", { method: "POST", body: "{}", headers: { "x-tenant": tenant } }).then(read))

const send = (edge: Edge, token: string, method: string, path: string, body?: unknown) =>
  call(edge, token, path, { method, ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }) })

/** An edge with tenants acme and globex known (one hook each). */
const edgeWithTenants = (c = config) =>
  Effect.gen(function* () {
    const edge = yield* startEdge(c)
    for (const t of ["acme", "globex"]) expect((yield* ingest(edge, t)).status).toBe(202)
    return edge
  })

describe("endpoints over the API", () => {
  it.live("a scoped token manages only its tenants' endpoints", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* edgeWithTenants()
        const made = yield* send(edge, ACME, "POST", "/v1/tenants/acme/endpoints", {
          url: "https://hooks.acme.example/in",
          description: "orders",
          eventTypes: ["invoice.*", "user.created"],
          headers: { "x-acme-key": "k1" }
        })
        expect(made.status).toBe(201)
        expect(made.body).toMatchObject({ tenant: "acme", url: "https://hooks.acme.example/in", concurrency: E.CONCURRENCY_DEFAULT, disabled: false })
        expect(made.body.id).toMatch(/^ep_[0-9a-f]{14}$/)
        expect(made.body.secret).toMatch(/^whsec_/)
        const id: string = made.body.id

        // The list and a get never show the secret; the secret route does, and leaves an audit row.
        const list = yield* send(edge, ACME, "GET", "/v1/tenants/acme/endpoints")
        expect(list.status).toBe(200)
        expect(list.body.items.map((e: any) => e.id)).toEqual([id])
        expect(JSON.stringify(list.body)).not.toContain(made.body.secret)
        expect((yield* send(edge, ACME, "GET", `/v1/tenants/acme/endpoints/${id}`)).body).not.toHaveProperty("secret")
        expect((yield* send(edge, ACME, "GET", `/v1/tenants/acme/endpoints/${id}/secret`)).body).toEqual({ id, secret: made.body.secret })

        const patched = yield* send(edge, ACME, "PATCH", `/v1/tenants/acme/endpoints/${id}`, { disabled: true, disabledReason: "maintenance" })
        expect([patched.status, patched.body.disabled, patched.body.disabledReason, patched.body.description]).toEqual([200, true, "maintenance", "orders"])

        // Another tenant's endpoints: refused by scope, whether listed, created, read or changed.
        const theirs = yield* send(edge, GLOBAL, "POST", "/v1/tenants/globex/endpoints", { url: "https://globex.example/in" })
        expect(theirs.status).toBe(201)
        for (const [method, path, body] of [
          ["GET", "/v1/tenants/globex/endpoints", undefined],
          ["POST", "/v1/tenants/globex/endpoints", { url: "https://evil.example" }],
          ["GET", `/v1/tenants/globex/endpoints/${theirs.body.id}`, undefined],
          ["GET", `/v1/tenants/globex/endpoints/${theirs.body.id}/secret`, undefined],
          ["PATCH", `/v1/tenants/globex/endpoints/${theirs.body.id}`, { disabled: true }],
          ["DELETE", `/v1/tenants/globex/endpoints/${theirs.body.id}`, undefined]
        ] as const) {
          const r = yield* send(edge, ACME, method, path, body)
          expect([r.status, r.body.error], `${method} ${path}`).toEqual([403, "forbidden"])
        }
        // Globex's id under acme's path is not acme's endpoint.
        const crossed = yield* send(edge, ACME, "GET", `/v1/tenants/acme/endpoints/${theirs.body.id}`)
        expect([crossed.status, crossed.body.error]).toEqual([404, "unknown_endpoint"])
        expect((yield* send(edge, GLOBAL, "GET", "/v1/tenants/globex/endpoints")).body.items.map((e: any) => e.disabled)).toEqual([false])

        // Validation names the field (422); a body that is not JSON is 400.
        const refusals: ReadonlyArray<readonly [unknown, string, RegExp]> = [
          [{ url: "https://a.example", headers: { Host: "x" } }, "invalid_endpoint", /^headers\.Host: /],
          [{ url: "https://a.example", headers: { "webhook-signature": "v1,x" } }, "invalid_endpoint", /^headers\.webhook-signature: /],
          [{ url: "https://a.example", headers: { "Transfer-Encoding": "chunked" } }, "invalid_endpoint", /^headers\.Transfer-Encoding: /],
          [{ url: "https://a.example", concurrency: 1000 }, "invalid_endpoint", /^concurrency: expected an integer from 1 to 64/],
          [{ url: "https://a.example", eventTypes: ["a b"] }, "invalid_endpoint", /^eventTypes\[0\]: /],
          [{ url: "mailto:x@y" }, "invalid_endpoint", /^url: /],
          [{ description: "no url" }, "invalid_endpoint", /^url: required/],
          [{ url: "https://a.example", color: "red" }, "invalid_endpoint", /^color: not a field/]
        ]
        for (const [body, error, message] of refusals) {
          const r = yield* send(edge, ACME, "POST", "/v1/tenants/acme/endpoints", body)
          expect([r.status, r.body.error], JSON.stringify(body)).toEqual([422, error])
          expect(r.body.message).toMatch(message)
        }
        expect((yield* send(edge, ACME, "POST", "/v1/tenants/acme/endpoints", "{nope")).status).toBe(400)
        expect((yield* send(edge, ACME, "PATCH", `/v1/tenants/acme/endpoints/${id}`, { ratePerSec: -1 })).body.message).toMatch(/^ratePerSec: /)
        // A tenant not seen yet: listing it is 404; creating its first endpoint gives it its ordinal.
        expect((yield* send(edge, GLOBAL, "GET", "/v1/tenants/nobody/endpoints")).body.error).toBe("unknown_tenant")
        expect((yield* send(edge, GLOBAL, "POST", "/v1/tenants/nobody/endpoints", { url: "https://a.example" })).status).toBe(201)
        expect((yield* send(edge, GLOBAL, "GET", "/v1/tenants/nobody/endpoints")).body.items).toHaveLength(1)

        const deleted = yield* send(edge, ACME, "DELETE", `/v1/tenants/acme/endpoints/${id}`)
        expect([deleted.status, deleted.body]).toEqual([200, { id, deleted: true }])
        expect((yield* send(edge, ACME, "GET", `/v1/tenants/acme/endpoints/${id}`)).status).toBe(404)
        expect((yield* send(edge, ACME, "GET", "/v1/tenants/acme/endpoints")).body.items).toEqual([])

        // Every change left an audit row naming the token, and the scoped token reads only its tenant's.
        const audit = yield* send(edge, ACME, "GET", "/v1/audit")
        expect(audit.body.items.map((r: any) => [r.action, r.actor, r.params.id])).toEqual([
          ["endpoint.delete", "acme-admin", id],
          ["endpoint.update", "acme-admin", id],
          ["endpoint.secret", "acme-admin", id],
          ["endpoint.create", "acme-admin", id]
        ])
        expect(JSON.stringify(audit.body)).not.toContain(made.body.secret)
      })
    ))

  it.live("the endpoint bound holds: tenants.maxEndpoints", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* edgeWithTenants(adminConfig({ tenants: { maxEndpoints: 2 } }))
        const made = yield* Effect.all(
          [1, 2, 3, 4].map((i) => send(edge, GLOBAL, "POST", "/v1/tenants/acme/endpoints", { url: `https://e${i}.example` })),
          { concurrency: "unbounded" }
        )
        expect(made.map((r) => r.status).sort()).toEqual([201, 201, 422, 422])
        expect(made.find((r) => r.status === 422)!.body.error).toBe("endpoint_limit")
        expect((yield* send(edge, GLOBAL, "GET", "/v1/tenants/acme/endpoints")).body.items.length).toBe(2)
      })
    ))

  it.live("unsafe endpoint urls are refused", () =>
    Effect.gen(function* () {
      // The classifier over a table of addresses (nothing is sent anywhere).
      const table: ReadonlyArray<readonly [string, Ssrf.Refusal | "ok"]> = [
        ["10.0.0.1", "private"],
        ["172.16.5.4", "private"],
        ["172.31.255.255", "private"],
        ["192.168.0.1", "private"],
        ["100.64.0.1", "private"],
        ["127.0.0.1", "loopback"],
        ["127.255.255.254", "loopback"],
        ["169.254.169.254", "metadata"],
        ["169.254.10.10", "link_local"],
        ["224.0.0.251", "multicast"],
        ["0.0.0.0", "unspecified"],
        ["255.255.255.255", "broadcast"],
        ["240.1.2.3", "reserved"],
        ["192.0.2.1", "reserved"],
        ["::1", "loopback"],
        ["::", "unspecified"],
        ["fc00::1", "private"],
        ["fd00:ec2::254", "private"],
        ["fe80::1", "link_local"],
        ["ff02::1", "multicast"],
        ["::ffff:127.0.0.1", "loopback"],
        ["::ffff:7f00:1", "loopback"],
        ["::ffff:169.254.169.254", "metadata"],
        ["::ffff:10.0.0.1", "private"],
        ["::127.0.0.1", "loopback"],
        ["64:ff9b::a9fe:a9fe", "metadata"],
        ["2001:db8::1", "reserved"],
        ["2130706433", "not_an_address"],
        ["0177.0.0.1", "not_an_address"],
        ["172.32.0.1", "ok"],
        ["100.128.0.1", "ok"],
        ["8.8.8.8", "ok"],
        ["2606:4700:4700::1111", "ok"],
        ["::ffff:8.8.8.8", "ok"]
      ]
      for (const [address, expected] of table) {
        const v = Ssrf.classify(address, [])
        expect(v.ok ? "ok" : v.reason, address).toBe(expected)
      }
      // The forms the URL parser normalises: decimal, octal, hex, short, IPv6 and IPv4-mapped literals.
      for (const host of ["127.0.0.1", "127.1", "2130706433", "0177.0.0.1", "0x7f.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "localhost", "api.localhost", "169.254.169.254", "0xa9fea9fe", "10.1"]) {
        expect(Ssrf.checkUrl(`http://${host}:8080/hook`, { allow: [], httpsOnly: false }).ok, host).toBe(false)
      }
      expect(Ssrf.checkUrl("http://hooks.example.com/x", { allow: [], httpsOnly: false }).ok).toBe(true)
      expect(Ssrf.checkUrl("http://hooks.example.com/x", { allow: [], httpsOnly: true })).toEqual({ ok: false, message: "url: https only (endpoints.httpsOnly)" })
      // allowNetworks lets loopback through, in both its v4 and its IPv4-mapped v6 forms.
      const loopback = [Ssrf.parseCidr("127.0.0.0/8")!, Ssrf.parseCidr("::1/128")!]
      for (const a of ["127.0.0.1", "::1", "::ffff:127.0.0.1"]) expect(Ssrf.classify(a, loopback).ok, a).toBe(true)
      expect(Ssrf.checkResolved(["127.0.0.1"], loopback)).toEqual({ ok: true, addresses: ["127.0.0.1"] })

      // End to end at save, loopback forms only, loopback not allowed: 422 unsafe_url, nothing stored.
      yield* Effect.scoped(
        Effect.gen(function* () {
          const edge = yield* edgeWithTenants()
          for (const host of ["127.0.0.1", "127.1", "2130706433", "[::1]", "localhost"]) {
            const r = yield* send(edge, ACME, "POST", "/v1/tenants/acme/endpoints", { url: `http://${host}:9/hook` })
            expect([r.status, r.body.error], host).toEqual([422, "unsafe_url"])
            expect(r.body.message).toMatch(/^url: /)
          }
          const ok = yield* send(edge, ACME, "POST", "/v1/tenants/acme/endpoints", { url: "https://hooks.example.com/in" })
          expect(ok.status).toBe(201)
          const moved = yield* send(edge, ACME, "PATCH", `/v1/tenants/acme/endpoints/${ok.body.id}`, { url: "http://127.1:9/" })
          expect([moved.status, moved.body.error]).toEqual([422, "unsafe_url"])
          expect((yield* send(edge, ACME, "GET", "/v1/tenants/acme/endpoints")).body.items.map((e: any) => e.url)).toEqual(["https://hooks.example.com/in"])
        })
      )
      // With loopback allowed through endpoints.allowNetworks, the same URLs save.
      yield* Effect.scoped(
        Effect.gen(function* () {
          const edge = yield* edgeWithTenants(adminConfig({ endpoints: { allowNetworks: ["127.0.0.0/8", "::1/128"] } }))
          for (const host of ["127.0.0.1", "[::1]", "localhost"]) {
            expect((yield* send(edge, ACME, "POST", "/v1/tenants/acme/endpoints", { url: `http://${host}:9/hook` })).status, host).toBe(201)
          }
        })
      )
    }))

  it("a name's resolved addresses: each is checked, only allowed ones are dialled, none allowed refuses", () => {
    // A resolver's answer (no DNS, no packet): wherever a refused address sits, it is never one the connection may use.
    const table: ReadonlyArray<readonly [ReadonlyArray<string>, ReturnType<typeof Ssrf.checkResolved>]> = [
      [["93.184.216.34"], { ok: true, addresses: ["93.184.216.34"] }],
      [["10.0.0.1", "93.184.216.34"], { ok: true, addresses: ["93.184.216.34"] }],
      [["93.184.216.34", "127.0.0.1", "2606:4700::1111"], { ok: true, addresses: ["93.184.216.34", "2606:4700::1111"] }],
      [["::ffff:169.254.169.254", "2606:4700::1111"], { ok: true, addresses: ["2606:4700::1111"] }],
      [["169.254.169.254", "10.0.0.1"], { ok: false, address: "169.254.169.254", reason: "metadata" }],
      [["fd00::1", "::1"], { ok: false, address: "fd00::1", reason: "private" }],
      [[], { ok: false, address: "", reason: "not_an_address" }]
    ]
    for (const [addresses, expected] of table) expect(Ssrf.checkResolved(addresses, []), addresses.join(",")).toEqual(expected)
  })

  it.live("an endpoint header value the client cannot send is refused at save", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* edgeWithTenants()
        // Outside latin1, or a control character: the client would refuse every call with it.
        for (const value of ["\u20acuro", "a\u0001b", "del\u007f", "line\nbreak"]) {
          const r = yield* send(edge, ACME, "POST", "/v1/tenants/acme/endpoints", { url: "https://a.example/in", headers: { "X-Team": value } })
          expect([r.status, r.body.error], JSON.stringify(value)).toEqual([422, "invalid_endpoint"])
          expect(r.body.message).toMatch(/^headers\.X-Team: /)
        }
        expect((yield* send(edge, ACME, "GET", "/v1/tenants/acme/endpoints")).body.items).toEqual([])

        // What the client sends (latin1, a tab) is saved; a patch to a value it cannot send is refused and changes nothing.
        const made = yield* send(edge, ACME, "POST", "/v1/tenants/acme/endpoints", { url: "https://a.example/in", headers: { "X-Team": "caf\u00e9\tb" } })
        expect(made.status).toBe(201)
        const patched = yield* send(edge, ACME, "PATCH", `/v1/tenants/acme/endpoints/${made.body.id}`, { headers: { "X-Team": "\u20acuro" } })
        expect([patched.status, patched.body.error]).toEqual([422, "invalid_endpoint"])
        expect(patched.body.message).toMatch(/^headers\.X-Team: /)
        expect((yield* send(edge, ACME, "GET", `/v1/tenants/acme/endpoints/${made.body.id}`)).body.headers).toEqual({ "X-Team": "caf\u00e9\tb" })
      })
    ))

  it.live("audit rows keep an endpoint's url without its query string or user info", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* edgeWithTenants()
        const made = yield* send(edge, ACME, "POST", "/v1/tenants/acme/endpoints", { url: "https://hooks.acme.example/in?token=s3cret-create#frag" })
        expect(made.status).toBe(201)
        // The endpoint itself keeps the whole URL: it is what gets called.
        expect(made.body.url).toBe("https://hooks.acme.example/in?token=s3cret-create#frag")
        const moved = yield* send(edge, ACME, "PATCH", `/v1/tenants/acme/endpoints/${made.body.id}`, { url: "https://hooks.acme.example:8443/v2?sig=s3cret-update" })
        expect(moved.status).toBe(200)
        const audit = yield* send(edge, GLOBAL, "GET", "/v1/audit?tenant=acme")
        const rows = audit.body.items.filter((r: any) => r.action.startsWith("endpoint."))
        expect(rows.map((r: any) => [r.action, r.params.url])).toEqual([
          ["endpoint.update", "https://hooks.acme.example:8443/v2"],
          ["endpoint.create", "https://hooks.acme.example/in"]
        ])
        expect(JSON.stringify(audit.body)).not.toMatch(/s3cret|frag/)
      })
    ))

  it.live("a portal token opens only its tenant's endpoints and expires", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* edgeWithTenants()
        const theirs = yield* send(edge, GLOBAL, "POST", "/v1/tenants/globex/endpoints", { url: "https://globex.example/in" })
        // Issued by a global token only; audited without the token.
        expect((yield* send(edge, ACME, "POST", "/v1/tenants/acme/portal-token")).status).toBe(403)
        const issued = yield* send(edge, GLOBAL, "POST", "/v1/tenants/acme/portal-token")
        expect(issued.status).toBe(200)
        const token: string = issued.body.token
        expect(token.startsWith(Portal.PREFIX)).toBe(true)
        expect(Date.parse(issued.body.expiresAt) - Date.now()).toBeGreaterThan(50_000)
        expect(issued.body.url).toBe(`${edge.url}/ui/#/tenants/acme/endpoints?portal=${token}`)

        // Its tenant's endpoints and dead letters.
        const made = yield* send(edge, token, "POST", "/v1/tenants/acme/endpoints", { url: "https://acme.example/in" })
        expect(made.status).toBe(201)
        expect((yield* send(edge, token, "GET", "/v1/tenants/acme/endpoints")).body.items.map((e: any) => e.id)).toEqual([made.body.id])
        expect((yield* send(edge, token, "GET", "/v1/dlq")).status).toBe(200)
        expect((yield* send(edge, token, "GET", "/v1/whoami")).body).toEqual({ name: "portal:acme", tenants: ["acme"], expires_at: issued.body.expiresAt })
        // Another tenant's data is neither listed nor reachable by URL.
        expect((yield* send(edge, token, "GET", "/v1/tenants/globex/endpoints")).status).toBe(403)
        expect((yield* send(edge, token, "GET", `/v1/tenants/globex/endpoints/${theirs.body.id}`)).status).toBe(403)
        expect((yield* send(edge, token, "GET", `/v1/tenants/acme/endpoints/${theirs.body.id}`)).status).toBe(404)
        expect((yield* send(edge, token, "GET", "/v1/dlq?tenant=globex")).status).toBe(403)
        expect((yield* send(edge, token, "GET", "/v1/tenants")).body.items.map((t: any) => t.tenant)).toEqual(["acme"])
        // Routes outside the portal are closed to it, its tenant's included.
        for (const path of ["/v1/audit", "/v1/quarantine", "/v1/config", "/v1/stats/sinks"]) {
          expect((yield* send(edge, token, "GET", path)).status, path).toBe(401)
        }
        expect((yield* send(edge, token, "DELETE", "/v1/tenants/acme/queue?kinds=dead")).status).toBe(401)
        expect((yield* send(edge, token, "PUT", "/v1/tenants/acme/limits", { weight: 2 })).status).toBe(401)
        // A forged or re-signed token is refused.
        const forged = Portal.sign("another-secret-0123456789-0123456789", { tenant: "globex", expiresAt: Date.now() + 60_000 }, "00")
        expect((yield* send(edge, forged, "GET", "/v1/tenants/globex/endpoints")).status).toBe(401)
        expect((yield* send(edge, `${token.slice(0, -2)}AA`, "GET", "/v1/tenants/acme/endpoints")).status).toBe(401)

        // A short-lived one works, then is refused once expired.
        const brief = (yield* send(edge, GLOBAL, "POST", "/v1/tenants/acme/portal-token?ttlSeconds=1")).body.token as string
        expect((yield* send(edge, brief, "GET", "/v1/tenants/acme/endpoints")).status).toBe(200)
        yield* Effect.sleep("1200 millis")
        const expired = yield* send(edge, brief, "GET", "/v1/tenants/acme/endpoints")
        expect([expired.status, expired.body.error]).toEqual([401, "unauthorized"])
        expect((yield* send(edge, GLOBAL, "POST", "/v1/tenants/acme/portal-token?ttlSeconds=999999")).status).toBe(400)

        const audit = yield* send(edge, GLOBAL, "GET", "/v1/audit?tenant=acme")
        const actions = audit.body.items.map((r: any) => [r.action, r.actor])
        expect(actions).toContainEqual(["portal.token", "ops"])
        expect(actions).toContainEqual(["endpoint.create", "portal:acme"])
        expect(JSON.stringify(audit.body)).not.toContain(token)
        // The secret is never shown by GET /v1/config.
        const shown = yield* send(edge, GLOBAL, "GET", "/v1/config")
        expect(shown.body.portal).toMatchObject({ secret: "[redacted]", ttlSeconds: 60 })
        expect(JSON.stringify(shown.body)).not.toContain(SECRET)
      })
    ))

  it.live("portal tokens are off without portal.secret", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* edgeWithTenants(adminConfig())
        const r = yield* send(edge, GLOBAL, "POST", "/v1/tenants/acme/portal-token")
        expect([r.status, r.body.error]).toEqual([409, "portal_off"])
        const elsewhere = Portal.sign(SECRET, { tenant: "acme", expiresAt: Date.now() + 60_000 }, "00")
        expect((yield* send(edge, elsewhere, "GET", "/v1/tenants/acme/endpoints")).status).toBe(401)
      })
    ))
})
