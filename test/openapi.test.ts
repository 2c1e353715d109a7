/**
 * The OpenAPI document a real server serves at `GET /v1/openapi.json`
 * against docs/api.md: every admin route of its route table, with exactly
 * the statuses the table lists and the bearer security, and the operations
 * endpoints; and the Svix-compatible routes against docs/svix-compat.md's table.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { configOf, read, startEdge } from "./edge-harness.js"

const docs = fs.readFileSync(path.join(import.meta.dirname, "..", "docs", "api.md"), "utf8")
const svixDocs = fs.readFileSync(path.join(import.meta.dirname, "..", "docs", "svix-compat.md"), "utf8")

/** The section of docs/api.md under `## title`, up to the next `## `. */
const section = (title: string): string => {
  const start = docs.indexOf(`\n## ${title}\n`)
  expect(start).toBeGreaterThan(-1)
  const end = docs.indexOf("\n## ", start + 1)
  return docs.slice(start, end === -1 ? undefined : end)
}

/** Rows `| \`METHOD /path\` | ... |` of a section: method, OpenAPI path (`:p` as `{p}`), the rest of the row. */
const routes = (text: string) =>
  [...text.matchAll(/^\| `(GET|POST|PUT|PATCH|DELETE) (\/[^` ]*)` \|(.*)\|$/gm)].map((m) => ({
    method: m[1]!.toLowerCase(),
    path: m[2]!.replace(/:(\w+)/g, "{$1}"),
    rest: m[3]!
  }))

const config = configOf({
  sinks: [{ name: "a", url: "http://127.0.0.1:9/a" }],
  sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["a"] }],
  adminTokens: [{ name: "ops", token: "global-token-0123456789", tenants: "*" }]
})

describe("openapi", () => {
  it.live("the OpenAPI document lists every admin route", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const admin = routes(section("Admin"))
        expect(admin.length).toBeGreaterThanOrEqual(8)
        const edge = yield* startEdge(config)
        // No token: the document names no data.
        const r = yield* Effect.promise(() => edge.fetch("/v1/openapi.json").then(read))
        expect(r.status).toBe(200)
        expect(r.headers.get("content-type")).toContain("application/json")
        const doc = r.body
        expect(doc.openapi).toMatch(/^3\./)
        expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "Bearer" })

        for (const route of admin) {
          const op = doc.paths[route.path]?.[route.method]
          expect(op, `${route.method.toUpperCase()} ${route.path} in the OpenAPI paths`).toBeDefined()
          const documented = [...route.rest.matchAll(/\b[1-5]\d\d\b/g)].map((m) => m[0]).sort()
          expect(documented.length, `${route.path}: statuses in docs/api.md`).toBeGreaterThan(0)
          expect(Object.keys(op.responses).sort(), `${route.method.toUpperCase()} ${route.path}`).toEqual(documented)
          expect(op.security).toEqual([{ bearer: [] }])
          expect(op.responses["401"].headers["www-authenticate"]).toBeDefined()
          expect(op.responses["503"].headers["retry-after"]).toBeDefined()
        }
        // Every admin operation of the document is in the table too.
        const listed = new Set(admin.map((a) => `${a.method} ${a.path}`))
        for (const [p, item] of Object.entries<Record<string, unknown>>(doc.paths)) {
          for (const method of Object.keys(item)) {
            if (p.startsWith("/v1/")) expect(listed.has(`${method} ${p}`), `${method.toUpperCase()} ${p} in docs/api.md`).toBe(true)
          }
        }

        // The operations endpoints (the demo sink is a plain route, and the document does not list itself).
        const ops = routes(section("Operations")).filter((o) => o.path !== "/_demo/sink" && o.path !== "/v1/openapi.json")
        expect(ops.map((o) => o.path)).toEqual(["/healthz", "/readyz", "/metrics"])
        for (const o of ops) {
          expect(doc.paths[o.path]?.[o.method], `${o.method.toUpperCase()} ${o.path}`).toBeDefined()
          expect(doc.paths[o.path][o.method].security ?? []).toEqual([])
        }
        expect(Object.keys(doc.paths["/readyz"].get.responses).sort()).toEqual(["200", "503"])

        // The Svix-compatible routes: every row of docs/svix-compat.md's table, and no other /api/v1/ path.
        const shape = (p: string) => p.replace(/\{[^}]+\}/g, "{}")
        const svix = routes(svixDocs).map((r) => `${r.method} ${shape(r.path)}`)
        expect(svix.length).toBeGreaterThanOrEqual(19)
        const served = Object.entries<Record<string, unknown>>(doc.paths)
          .filter(([p]) => p.startsWith("/api/v1/"))
          .flatMap(([p, item]) => Object.keys(item).map((m) => `${m} ${shape(p)}`))
        expect(served.sort()).toEqual([...svix].sort())
      })
    )
  )
})
