/**
 * The operator console in a real browser (issue 17): Debian's Chromium, driven by
 * playwright-core, against one real gateway on RocksDB with real sinks (world.ts). Every test
 * saves a screenshot under test/console/__screenshots__/. Skipped, with the reason printed, where
 * there is no Chromium.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Page, Request } from "playwright-core"
import {
  admin,
  GLOBAL_TOKEN,
  ingest,
  openConsole,
  SCOPED_TOKEN,
  screenshot,
  signIn,
  unavailable,
  until,
  type World,
  startWorld
} from "./world.js"

if (unavailable !== undefined) console.warn(unavailable)

/** `expect.poll` with a page's patience (its default is 1 s). */
const poll = <A>(read: () => Promise<A> | A, options: { readonly timeout?: number } = {}) => expect.poll(read, { timeout: 10_000, ...options })

const stat = (page: Page, key: string) => page.locator(`[data-stat="${key}"] dd`)

/** The dead rows of `tenant` by the API, once there are `n`. */
const deadOf = (w: World, tenant: string, n: number) =>
  until(`${n} dead rows of ${tenant}`, () => admin<{ items: Array<{ id: string }> }>(w, `/v1/dlq?tenant=${tenant}`), (p) => p.items.length >= n)

describe.skipIf(unavailable !== undefined)("console", { timeout: 90_000 }, () => {
  let w: World
  beforeAll(async () => {
    w = await startWorld()
  }, 150_000)
  afterAll(async () => {
    await w?.close()
  })

  it("the console signs in with a global token and shows the queue gauges", async () => {
    // Two hooks whose sink answers 503: they wait as scheduled retries (an hour away).
    await ingest(w, "slow", "hooli")
    await ingest(w, "slow", "hooli")
    await until("2 scheduled", () => admin(w, "/v1/tenants/hooli"), (c) => c.scheduled === 2)
    const page = await openConsole(w, GLOBAL_TOKEN)
    await poll(() => page.getByRole("heading", { name: "Overview" }).isVisible()).toBe(true)
    await poll(() => stat(page, "scheduled").textContent(), { timeout: 15_000 }).toBe("2")
    for (const key of ["pending", "scheduled", "inflight", "dead", "bytes", "archive_pending", "oldest_due_age", "tenants"]) {
      expect(await stat(page, key).isVisible(), key).toBe(true)
    }
    expect(await page.getByText("ops (global)").isVisible()).toBe(true)
    expect(await page.evaluate<string | null>(`sessionStorage.getItem("ankusa.console.token")`)).toBe(GLOBAL_TOKEN)
    // The token is never in the URL.
    expect(page.url()).not.toContain(GLOBAL_TOKEN)
    await screenshot(page, "signs-in-global-1280")
    // At 390 px the page still fits its width.
    await page.setViewportSize({ width: 390, height: 844 })
    await page.waitForTimeout(300)
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390)
    await screenshot(page, "signs-in-global-390")
    await page.goto(`${w.url}/ui/#/dead`)
    await poll(() => page.getByRole("heading", { name: "Dead letters" }).isVisible()).toBe(true)
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390)
    await page.close()
  })

  it("a wrong token is refused and nothing is shown", async () => {
    const page = await openConsole(w)
    const api: Array<string> = []
    page.on("request", (r) => r.url().includes("/v1/") && api.push(new URL(r.url()).pathname))
    // From the keyboard: the field is labelled, Enter submits.
    await page.getByLabel("Admin token").fill("not-a-token-of-this-node-at-all")
    await page.getByLabel("Admin token").press("Enter")
    await poll(() => page.getByRole("alert").textContent()).toContain("refused")
    expect(await page.getByRole("navigation", { name: "Pages" }).count()).toBe(0)
    expect(await page.locator("[data-stat]").count()).toBe(0)
    expect(await page.evaluate<string | null>(`sessionStorage.getItem("ankusa.console.token")`)).toBeNull()
    expect(api).toEqual(["/v1/whoami"])
    // A page named in the URL shows nothing either.
    await page.goto(`${w.url}/ui/#/dead`)
    expect(await page.getByLabel("Admin token").isVisible()).toBe(true)
    expect(await page.locator("table").count()).toBe(0)
    await screenshot(page, "wrong-token")
    await page.close()
  })

  it("a scoped token sees only its tenants", async () => {
    w.orders.mode = "fail"
    await ingest(w, "shop", "umbrella")
    const hidden = await ingest(w, "shop", "initech")
    await deadOf(w, "umbrella", 1)
    await deadOf(w, "initech", 1)
    const page = await openConsole(w, SCOPED_TOKEN)
    await poll(() => page.getByRole("heading", { name: "Your tenants" }).isVisible()).toBe(true)
    expect(await page.getByText("umbrella-ops (1 tenant)").isVisible()).toBe(true)

    await page.goto(`${w.url}/ui/#/tenants`)
    await poll(() => page.getByRole("link", { name: "umbrella" }).isVisible()).toBe(true)
    expect(await page.getByText("initech").count()).toBe(0)

    await page.goto(`${w.url}/ui/#/dead`)
    await poll(() => page.locator("table.dead tbody tr").count()).toBeGreaterThan(0)
    const tenants = await page.locator("table.dead tbody tr td:nth-child(3)").allTextContents()
    expect(new Set(tenants)).toEqual(new Set(["umbrella"]))
    expect(await page.getByText(hidden).count()).toBe(0)
    await screenshot(page, "scoped-token-dead-letters")

    // Not reachable by URL either: the tenant page, the filtered list, the hook's detail.
    await page.goto(`${w.url}/ui/#/tenants/initech`)
    await poll(() => page.getByRole("alert").textContent()).toContain("forbidden")
    expect(await page.locator("[data-stat]").count()).toBe(0)
    await page.goto(`${w.url}/ui/#/dead?tenant=initech`)
    await poll(() => page.getByRole("alert").textContent()).toContain("forbidden")
    expect(await page.locator("table.dead tbody tr").count()).toBe(0)
    await page.goto(`${w.url}/ui/#/dead/${hidden}`)
    await poll(() => page.getByRole("alert").textContent()).toContain("unknown_hook")
    expect(await page.getByText("initech").count()).toBe(0)
    await page.goto(`${w.url}/ui/#/sinks`)
    await poll(() => page.getByText("they need a global token").isVisible()).toBe(true)
    await screenshot(page, "scoped-token-sinks")
    await page.close()
  })

  it("a dead row is replayed from the console and delivered", async () => {
    w.orders.mode = "fail"
    const id = await ingest(w, "shop", "acme", { order: 42, items: ["tea", "cups"] })
    // Other tenants' dead rows stay dead: only the selected one is replayed.
    await ingest(w, "shop", "stark", { order: 7 })
    await ingest(w, "shop", "stark", { order: 8 })
    await deadOf(w, "acme", 1)
    await deadOf(w, "stark", 2)
    w.orders.mode = "ok"
    const page = await openConsole(w, GLOBAL_TOKEN)
    await page.goto(`${w.url}/ui/#/dead`)
    const row = page.locator(`tr[data-id="${id}"]`)
    await poll(() => row.isVisible()).toBe(true)

    // The row's detail: attempts, last status and the body's preview.
    await row.getByRole("link", { name: id }).click()
    await poll(() => page.locator("pre.preview").textContent()).toContain('"order":42')
    expect(await page.locator("table tbody td").allTextContents()).toEqual(expect.arrayContaining(["orders", "kept", "1", "500"]))
    await screenshot(page, "dead-hook")
    await page.goBack()

    await row.getByRole("checkbox").check()
    await screenshot(page, "dead-letters", "console-dead-letters.png")
    await page.getByRole("button", { name: "Replay selected (1)" }).click()
    const dialog = page.getByRole("dialog")
    expect(await dialog.textContent()).toContain("1 selected row")
    await dialog.getByRole("button", { name: "Replay" }).click()
    await poll(() => page.getByRole("status").filter({ hasText: "Revived" }).textContent()).toContain("Revived 1 row")

    await until("the sink receives the replayed hook", async () => w.orders.calls, (calls) => calls.some((c) => c.id === id && c.status === 204))
    expect((await admin(w, "/v1/tenants/stark")).dead).toBe(2)
    await page.goto(`${w.url}/ui/#/tenants/acme`)
    for (const key of ["pending", "scheduled", "inflight", "dead"]) {
      await poll(() => stat(page, key).textContent(), { timeout: 15_000 }).toBe("0")
    }
    await screenshot(page, "replayed")
    // The Sinks page names the failed calls' last answer (500, from before the replay).
    await page.goto(`${w.url}/ui/#/sinks`)
    await poll(() => page.locator('tr[data-sink="orders"] td[data-col="last-failure"]').textContent()).toMatch(/: 500\b/)
    await page.close()
  })

  it("purge asks for confirmation and empties the tenant's queue", async () => {
    for (let i = 0; i < 3; i++) await ingest(w, "slow", "globex")
    await until("3 scheduled", () => admin(w, "/v1/tenants/globex"), (c) => c.scheduled === 3 && c.inflight === 0)
    const page = await openConsole(w, GLOBAL_TOKEN)
    await page.goto(`${w.url}/ui/#/tenants/globex`)
    await poll(() => stat(page, "scheduled").textContent()).toBe("3")
    // Its limits: the defaults, and an override set over the API marked as one.
    expect(await stat(page, "ingestPerSec").textContent()).toBe("unlimited")
    const set = await fetch(`${w.url}/v1/tenants/globex/limits`, {
      method: "PUT",
      headers: { authorization: `Bearer ${GLOBAL_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ ingestPerSec: 100 })
    })
    expect(set.status).toBe(200)
    await poll(() => stat(page, "ingestPerSec").textContent(), { timeout: 10_000 }).toBe("100 (override)")
    expect(await stat(page, "maxQueuedBytes").textContent()).toBe("unlimited")

    // Cancel deletes nothing.
    await page.getByRole("button", { name: "Purge…" }).click()
    let dialog = page.getByRole("dialog")
    const text = await dialog.textContent()
    expect(text).toContain("globex")
    expect(text).toContain("3 waiting rows")
    expect(text).toContain("0 dead rows")
    await screenshot(page, "purge-confirm")
    await dialog.getByRole("button", { name: "Cancel" }).click()
    expect(await page.getByRole("dialog").count()).toBe(0)
    expect((await admin(w, "/v1/tenants/globex")).scheduled).toBe(3)

    await page.getByRole("button", { name: "Purge…" }).click()
    dialog = page.getByRole("dialog")
    await dialog.getByRole("button", { name: "Delete rows" }).click()
    await poll(() => page.getByRole("status").filter({ hasText: "Purged" }).textContent()).toContain("Purged 3 waiting and 0 dead rows of globex")
    const after = await admin(w, "/v1/tenants/globex")
    expect([after.pending, after.scheduled, after.dead]).toEqual([0, 0, 0])
    await poll(() => stat(page, "scheduled").textContent()).toBe("0")
    await screenshot(page, "purged")
    await page.close()
  })

  it("the overview charts show the last hour's ingest", async () => {
    w.orders.mode = "ok"
    for (let i = 0; i < 5; i++) await ingest(w, "shop", "charts")
    const page = await openConsole(w, GLOBAL_TOKEN)
    const caption = page.locator("#ingest-caption")
    // Every hook this gateway accepted was accepted within the hour: the chart counts them all.
    await poll(() => caption.textContent(), { timeout: 20_000 }).toContain(`Last hour: ${w.accepted} hooks accepted`)
    const chart = page.locator('[data-chart="ingest"]')
    expect(Number(await chart.getAttribute("data-points"))).toBeGreaterThanOrEqual(2)
    const canvas = await chart.locator("canvas").boundingBox()
    expect(canvas?.width ?? 0).toBeGreaterThan(200)
    // The plotted series holds the accepted rate: some point above 0.
    const history = await admin<{ samples: Array<{ ingest_per_second: number; ingested: number }> }>(w, "/v1/stats/history")
    expect(history.samples.reduce((a, s) => a + s.ingested, 0)).toBe(w.accepted)
    expect(history.samples.some((s) => s.ingest_per_second > 0)).toBe(true)
    await poll(() => page.locator("#delivery-caption").textContent()).toMatch(/[1-9]\d* delivered/)
    // The configuration in force: this node never reloaded.
    await poll(() => page.getByTestId("config-generation").textContent()).toMatch(/Configuration generation 1, loaded .* at boot\./)
    await screenshot(page, "overview", "console-overview.png")
    await page.close()
  })

  it("the console loads nothing from outside the node", async () => {
    const page = await w.context.newPage()
    const requests: Array<Request> = []
    const violations: Array<string> = []
    page.on("request", (r) => requests.push(r))
    page.on("console", (m) => /Content Security Policy|Refused to/i.test(m.text()) && violations.push(m.text()))
    const first = await page.goto(`${w.url}/ui/`)
    expect(first?.headers()["content-security-policy"]).toContain("default-src 'self'")
    expect(first?.headers()["content-security-policy"]).not.toContain("unsafe-inline")
    await signIn(page, GLOBAL_TOKEN)
    const dead = await admin<{ items: Array<{ id: string }> }>(w, "/v1/dlq")
    const pages = ["overview", "tenants", "tenants/acme", "dead", "quarantine", "audit", "sinks", ...dead.items.slice(0, 1).map((d) => `dead/${d.id}`)]
    for (const p of pages) {
      await page.goto(`${w.url}/ui/#/${p}`)
      await page.waitForLoadState("networkidle")
      await poll(() => page.locator("main h1").count()).toBeGreaterThan(0)
      expect(await page.getByRole("alert").count(), `${p}: no refusal`).toBe(0)
    }
    await screenshot(page, "all-pages-sinks")
    expect(requests.length).toBeGreaterThan(pages.length)
    const origin = new URL(w.url).origin
    const foreign = requests.map((r) => r.url()).filter((u) => !u.startsWith("data:") && new URL(u).origin !== origin)
    expect(foreign).toEqual([])
    expect(violations).toEqual([])
    await page.close()
  })
})
