/**
 * The world of the console tests: a real gateway (`node bin/ankusa.js serve`, the build in
 * dist/, console included) on RocksDB in a temp dir, two real sinks on 127.0.0.1 (`orders`,
 * dead-lettered after one failed attempt, and `parked`, which always answers 503 and retries in
 * an hour; the source `ep` routes to tenant endpoints; `keyed`, an ordered sink that holds a key
 * whose head is dead-lettered after one failed attempt, fed by the source `keyed` with the
 * ordering key in `x-order`), and Debian's Chromium driven by playwright-core with a fresh profile.
 */
import * as fs from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { type BrowserContext, chromium, type Page } from "playwright-core"
import { type ServeChild, startServe } from "../../bench/lib/serve-child.js"

export const CHROMIUM = process.env["ANKUSA_CHROMIUM"] ?? "/usr/bin/chromium"
/** Why the console tests cannot run here, if they cannot (printed, and the tests are skipped). */
export const unavailable: string | undefined = fs.existsSync(CHROMIUM)
  ? undefined
  : `console tests skipped: no Chromium at ${CHROMIUM} (scripts/ensure-chromium.sh installs Debian's as root; or set ANKUSA_CHROMIUM)`

export const GLOBAL_TOKEN = "console-test-global-token-0123456789"
export const SCOPED_TOKEN = "console-test-umbrella-token-0123456789"
export const PORTAL_SECRET = "console-test-portal-secret-0123456789"
export const SCREENSHOTS = path.join(import.meta.dirname, "__screenshots__")
/** `ANKUSA_DOCS_SCREENSHOTS=1`: also write the README's screenshots to docs/img/. */
export const DOCS_IMG = process.env["ANKUSA_DOCS_SCREENSHOTS"] === "1" ? path.resolve(import.meta.dirname, "../../docs/img") : undefined

export interface Sink {
  readonly url: string
  /** `ok` answers 204, `fail` 500. */
  mode: "ok" | "fail"
  /** webhook-id and status of every call. */
  readonly calls: Array<{ readonly id: string; readonly status: number }>
  readonly close: () => Promise<void>
}

export const startSink = (mode: Sink["mode"], failStatus = 500): Promise<Sink> =>
  new Promise((resolve) => {
    const calls: Sink["calls"] = []
    let server: Server
    const sink: Sink = {
      url: "",
      mode,
      calls,
      close: () => new Promise((done) => (server.closeAllConnections(), server.close(() => done())))
    }
    server = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        const status = sink.mode === "ok" ? 204 : failStatus
        calls.push({ id: String(req.headers["webhook-id"]), status })
        res.writeHead(status).end()
      })
    })
    server.listen(0, "127.0.0.1", () => {
      ;(sink as { url: string }).url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`
      resolve(sink)
    })
  })

export interface World {
  readonly gateway: ServeChild
  readonly url: string
  readonly orders: Sink
  readonly parked: Sink
  readonly keyed: Sink
  readonly context: BrowserContext
  /** Hooks accepted (202) by this gateway so far. */
  accepted: number
  readonly close: () => Promise<void>
}

export const startWorld = async (): Promise<World> => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-console-"))
  const orders = await startSink("fail")
  const parked = await startSink("fail", 503)
  const keyed = await startSink("fail")
  const gateway = await startServe({
    dataDir,
    config: {
      sources: [
        { id: "shop", tenant: { header: "x-tenant" }, routes: ["orders"] },
        { id: "slow", tenant: { header: "x-tenant" }, routes: ["parked"] },
        { id: "ep", tenant: { header: "x-tenant" }, routes: ["tenant-endpoints"] },
        { id: "keyed", tenant: { header: "x-tenant" }, routes: ["keyed"], orderingKey: { header: "x-order" } }
      ],
      sinks: [
        { name: "orders", url: orders.url, timeoutMs: 2_000, retry: { delaysMs: [], jitter: 0 } },
        { name: "parked", url: parked.url, timeoutMs: 2_000, retry: { delaysMs: [3_600_000], jitter: 0 } },
        { name: "keyed", url: keyed.url, timeoutMs: 2_000, retry: { delaysMs: [], jitter: 0 }, ordered: { onDead: "hold" } }
      ],
      adminTokens: [
        { name: "ops", token: GLOBAL_TOKEN, tenants: "*" },
        { name: "umbrella-ops", token: SCOPED_TOKEN, tenants: ["umbrella"] }
      ],
      http: { demoSink: false },
      // Endpoints the console tests save point at loopback only; portal tokens are on.
      endpoints: { allowNetworks: ["127.0.0.0/8"] },
      portal: { secret: PORTAL_SECRET },
      gauges: { intervalMs: 1_000 },
      pipeline: { tickMs: 20 }
    }
  })
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-chromium-"))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
      "--disable-sync"
    ],
    viewport: { width: 1280, height: 900 }
  })
  fs.mkdirSync(SCREENSHOTS, { recursive: true })
  const world: World = {
    gateway,
    url: gateway.url,
    orders,
    parked,
    keyed,
    context,
    accepted: 0,
    close: async () => {
      await context.close().catch(() => {})
      await gateway.stop()
      await Promise.all([orders.close(), parked.close(), keyed.close()])
      fs.rmSync(dataDir, { recursive: true, force: true })
      fs.rmSync(profile, { recursive: true, force: true })
    }
  }
  return world
}

/** POST a hook (with `orderingKey` in `x-order`, which the source `keyed` reads); its id. */
export const ingest = async (
  w: World,
  source: "shop" | "slow" | "ep" | "keyed",
  tenant: string,
  body: unknown = { n: Math.random() },
  orderingKey?: string
): Promise<string> => {
  const r = await fetch(`${w.url}/v1/hooks/${source}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-tenant": tenant, ...(orderingKey === undefined ? {} : { "x-order": orderingKey }) },
    body: JSON.stringify(body)
  })
  if (r.status !== 202) throw new Error(`ingest answered ${r.status}: ${await r.text()}`)
  w.accepted++
  return ((await r.json()) as { id: string }).id
}

/** The admin API with the global token (what the test checks against, beside the page). */
export const admin = async <A = any>(w: World, p: string, method = "GET"): Promise<A> => {
  const r = await fetch(w.url + p, { method, headers: { authorization: `Bearer ${GLOBAL_TOKEN}` } })
  if (!r.ok) throw new Error(`${p} answered ${r.status}: ${await r.text()}`)
  return (await r.json()) as A
}

export const until = async <A>(what: string, read: () => Promise<A>, ok: (a: A) => boolean, ms = 20_000): Promise<A> => {
  const end = Date.now() + ms
  for (;;) {
    const a = await read()
    if (ok(a)) return a
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(a)}`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

/** A new tab (its own sessionStorage) on the console, signed in with `token` unless undefined. */
export const openConsole = async (w: World, token?: string): Promise<Page> => {
  const page = await w.context.newPage()
  await page.goto(`${w.url}/ui/`)
  if (token !== undefined) await signIn(page, token)
  return page
}

export const signIn = async (page: Page, token: string): Promise<void> => {
  await page.getByLabel("Admin token").fill(token)
  await page.getByRole("button", { name: "Sign in" }).click()
}

/** Save a screenshot under test/console/__screenshots__/ (and docs/img/ as `docsName` when asked). */
export const screenshot = async (page: Page, name: string, docsName?: string): Promise<void> => {
  const file = path.join(SCREENSHOTS, `${name}.png`)
  await page.screenshot({ path: file, fullPage: true })
  if (docsName !== undefined && DOCS_IMG !== undefined) {
    fs.mkdirSync(DOCS_IMG, { recursive: true })
    await page.screenshot({ path: path.join(DOCS_IMG, docsName), fullPage: false })
  }
}
