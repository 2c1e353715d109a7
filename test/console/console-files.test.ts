/**
 * The console's files as the gateway serves them (src/http/console.ts), over real HTTP on
 * 127.0.0.1: the CSP and security headers, content types, cache headers and ETags, the redirect
 * of `/`, no file outside the built console whatever the path, and nothing at all with
 * `http.console: false`. Needs the build (npm test builds first).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import { request } from "node:http"
import * as path from "node:path"
import { CONTENT_SECURITY_POLICY } from "../../src/http/console.js"
import { configOf, startEdge } from "../edge-harness.js"

/** A GET with the path sent exactly as written (fetch would normalize `..`). */
const rawGet = (url: string, p: string, headers: Record<string, string> = {}) =>
  new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }>((resolve, reject) => {
    const u = new URL(url)
    const req = request({ host: u.hostname, port: u.port, path: p, method: "GET", headers }, (res) => {
      let body = ""
      res.setEncoding("utf8")
      res.on("data", (c: string) => (body += c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.on("error", reject)
    req.end()
  })

const built = path.resolve(import.meta.dirname, "../../dist/console")
const assets = fs.existsSync(built) ? fs.readdirSync(built) : []

describe("console files", () => {
  it.live("the console's files are served with a strict CSP, their types and cache headers, and nothing else", () =>
    Effect.scoped(
      Effect.gen(function* () {
        expect(assets, "npm run build makes dist/console/").toContain("index.html")
        const edge = yield* startEdge(configOf({}))
        const get = (p: string, h?: Record<string, string>) => Effect.promise(() => rawGet(edge.url, p, h))

        const index = yield* get("/ui/")
        expect(index.status).toBe(200)
        expect(index.headers["content-type"]).toBe("text/html; charset=utf-8")
        expect(index.headers["content-security-policy"]).toBe(CONTENT_SECURITY_POLICY)
        expect(CONTENT_SECURITY_POLICY).toContain("default-src 'self'")
        expect(CONTENT_SECURITY_POLICY).not.toContain("unsafe")
        expect(index.headers["x-content-type-options"]).toBe("nosniff")
        expect(index.headers["cache-control"]).toBe("no-cache")
        // No inline script or style in the page itself.
        expect(index.body).not.toMatch(/<script>|<style|style=/)
        const again = yield* get("/ui/", { "if-none-match": String(index.headers["etag"]) })
        expect(again.status).toBe(304)

        const js = assets.find((f) => f.endsWith(".js"))!
        const css = assets.find((f) => f.endsWith(".css"))!
        expect(index.body).toContain(js)
        expect(index.body).toContain(css)
        const script = yield* get(`/ui/${js}`)
        expect(script.status).toBe(200)
        expect(script.headers["content-type"]).toBe("text/javascript; charset=utf-8")
        expect(script.headers["cache-control"]).toBe("public, max-age=31536000, immutable")
        expect((yield* get(`/ui/${css}?v=1`)).headers["content-type"]).toBe("text/css; charset=utf-8")

        const root = yield* get("/")
        expect(root.status).toBe(302)
        expect(root.headers["location"]).toBe("/ui/")
        expect((yield* get("/ui")).headers["location"]).toBe("/ui/")

        // Only the built files, whatever the path says.
        for (const p of ["/ui/../package.json", "/ui/..%2Fpackage.json", "/ui/%2e%2e/%2e%2e/package.json", "/ui/.env", "/ui/console/index.html", "/ui/nope.js", "/ui//etc/passwd"]) {
          const r = yield* get(p)
          expect(r.status, p).not.toBe(200)
          expect(r.body, p).not.toContain('"name": "ankusa"')
          expect(r.body, p).not.toContain("root:")
        }
      })
    )
  )

  it.live("with http.console false there is no console and / is not redirected", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(configOf({ http: { console: false } }))
        expect((yield* Effect.promise(() => rawGet(edge.url, "/ui/"))).status).toBe(404)
        expect((yield* Effect.promise(() => rawGet(edge.url, "/"))).status).toBe(404)
      })
    )
  )
})
