/**
 * The operator console's files (docs/console.md): `GET /ui/` and its assets, built into
 * dist/console/ by scripts/build.mjs, and `/` redirecting to `/ui/`, when `http.console` is on.
 * The files are read once into memory at start; a request is answered from that table by name,
 * so no request path ever reaches the file system (nothing to traverse). Every answer carries
 * a Content-Security-Policy that allows nothing but this origin: no inline script or style.
 */
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { Config } from "../domain/config.js"
import { NotFound, respond } from "./errors.js"

export const PREFIX = "/ui/"

export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'"
].join("; ")

const SECURITY_HEADERS = {
  "content-security-policy": CONTENT_SECURITY_POLICY,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY"
} as const

const TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".txt": "text/plain; charset=utf-8"
}

/** Built names carry a content hash (`main-3F2A9C1B.js`): such a file never changes, so it is cached for good. */
const HASHED = /-[A-Z0-9]{8}(\.[a-z]+)+$/

interface File {
  readonly body: Uint8Array
  readonly headers: Readonly<Record<string, string>>
}

/** dist/console/ beside the running bundle (dist/*.js), else the repository's (the sources run by the tests). */
export const consoleDir = (): string | undefined => {
  const here = path.dirname(fileURLToPath(import.meta.url))
  return [path.join(here, "console"), path.resolve(here, "../../dist/console")].find((d) => fs.existsSync(path.join(d, "index.html")))
}

/** The table of files: every regular file of `dir` (flat), by name. */
export const load = (dir: string): ReadonlyMap<string, File> => {
  const files = new Map<string, File>()
  for (const name of fs.readdirSync(dir)) {
    const type = TYPES[path.extname(name)]
    const full = path.join(dir, name)
    if (type === undefined || !fs.statSync(full).isFile()) continue
    const body = fs.readFileSync(full)
    const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`
    files.set(name, {
      body,
      headers: {
        ...SECURITY_HEADERS,
        "content-type": type,
        etag,
        // index.html names the hashed assets: always revalidated, so a new build is picked up at once.
        "cache-control": HASHED.test(name) ? "public, max-age=31536000, immutable" : "no-cache"
      }
    })
  }
  return files
}

/** The file a `/ui/…` path names: `""` is index.html; anything but one plain file name is not found. */
export const fileName = (pathname: string): string | undefined => {
  const rest = pathname.slice(PREFIX.length)
  if (rest === "") return "index.html"
  return /^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(rest) && !rest.includes("..") ? rest : undefined
}

const notBuilt = HttpServerResponse.text("the console is not built: run npm run build\n", {
  status: 503,
  headers: { "retry-after": "60" }
})

const toConsole = HttpServerResponse.redirect(PREFIX, { status: 302, headers: { "cache-control": "no-cache" } })

const serve = (files: ReadonlyMap<string, File> | undefined) =>
  Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
    const pathname = request.url.split("?", 1)[0]!
    // `/ui` too reaches this route: its relative asset names need the slash.
    if (!pathname.startsWith(PREFIX)) return toConsole
    if (files === undefined) return notBuilt
    const name = fileName(pathname)
    const file = name === undefined ? undefined : files.get(name)
    if (file === undefined) return respond(new NotFound())
    if (request.headers["if-none-match"] === file.headers["etag"]) return HttpServerResponse.empty({ status: 304, headers: file.headers })
    return HttpServerResponse.uint8Array(file.body, { headers: file.headers })
  })

/** The console's routes when `http.console` is on (the router only: ingest never passes here). */
export const layer = (config: Config): Layer.Layer<never, never, HttpRouter.HttpRouter> =>
  !config.http.console
    ? Layer.empty
    : Layer.unwrap(
        Effect.gen(function* () {
          const dir = consoleDir()
          if (dir === undefined) yield* Effect.logWarning("the console is not built (npm run build): /ui/ answers 503")
          const handler = serve(dir === undefined ? undefined : load(dir))
          return Layer.mergeAll(
            HttpRouter.add("GET", "/ui/*", handler),
            HttpRouter.add("GET", "/", toConsole)
          )
        })
      )
