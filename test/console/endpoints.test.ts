/**
 * The Endpoints page in a real browser (issue 27; docs/console.md "Endpoints"): Debian's
 * Chromium against a real gateway (world.ts), with a scoped token and with a portal URL. The
 * endpoints saved point at 127.0.0.1 only (the world allows loopback through
 * endpoints.allowNetworks), and the test events go to a refused port and to a receiver there.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Locator, Page } from "playwright-core"
import { admin, GLOBAL_TOKEN, ingest, openConsole, SCOPED_TOKEN, screenshot, startSink, unavailable, until, type World, startWorld } from "./world.js"

if (unavailable !== undefined) console.warn(unavailable)

const poll = <A>(read: () => Promise<A> | A) => expect.poll(read, { timeout: 10_000 })

type Listed = { items: Array<{ id: string; url: string; disabled: boolean; description: string; eventTypes: Array<string> }> }

const endpointsOf = (w: World, tenant: string) => admin<Listed>(w, `/v1/tenants/${tenant}/endpoints`)

const createForm = (page: Page) => page.getByRole("form", { name: "Create endpoint" })

/** "Send test event" on an endpoint's row: the hook id the page shows (another than `before`). */
const sendTest = async (row: Locator, before?: string): Promise<string> => {
  await row.getByRole("button", { name: "Send test event" }).click()
  const shown = row.locator("[data-test-hook]")
  await poll(async () => (await shown.allTextContents()).filter((t) => t !== before).length).toBe(1)
  return (await shown.textContent())!
}

/** The cell `col` of the newest attempt of `hook` in the row's Recent attempts ("" while there is none). */
const attemptCell = async (row: Locator, hook: string, col: string) =>
  (await row.locator(`table.attempts tr[data-hook="${hook}"] [data-col="${col}"]`).allTextContents())[0] ?? ""

describe.skipIf(unavailable !== undefined)("console: endpoints", { timeout: 90_000 }, () => {
  let w: World
  beforeAll(async () => {
    w = await startWorld()
  }, 150_000)
  afterAll(async () => {
    await w?.close()
  })

  it("the endpoints page works for a scoped token", async () => {
    w.orders.mode = "fail"
    await ingest(w, "shop", "umbrella")
    await ingest(w, "shop", "initech")
    await until("umbrella's dead row", () => admin(w, "/v1/dlq?tenant=umbrella"), (p) => p.items.length >= 1)
    const page = await openConsole(w, SCOPED_TOKEN)
    await poll(() => page.getByRole("link", { name: "Endpoints" }).isVisible()).toBe(true)
    await page.getByRole("link", { name: "Endpoints" }).click()
    await poll(() => page.getByRole("heading", { name: "Endpoints of umbrella" }).isVisible()).toBe(true)
    // The tenant's dead letters, with the way to replay them.
    await poll(() => page.locator("table.dead tbody tr").count()).toBeGreaterThan(0)
    expect(await page.getByRole("link", { name: /All dead letters of umbrella/ }).isVisible()).toBe(true)

    // Create: the secret is shown once.
    const form = createForm(page)
    await form.getByLabel("URL").fill("http://127.0.0.1:9/umbrella")
    await form.getByLabel("Event types").fill("invoice.*, user.created")
    await form.getByLabel("Headers").fill("x-umbrella: 1")
    await form.getByRole("button", { name: "Create endpoint" }).click()
    await poll(() => page.getByRole("status").filter({ hasText: "Created" }).textContent()).toMatch(/Created ep_[0-9a-f]{14}\. Its signing secret: whsec_/)
    const [made] = (await endpointsOf(w, "umbrella")).items
    expect(made).toMatchObject({ url: "http://127.0.0.1:9/umbrella", eventTypes: ["invoice.*", "user.created"], disabled: false })
    const row = page.locator(`[data-endpoint="${made!.id}"]`)
    await poll(() => row.isVisible()).toBe(true)
    await screenshot(page, "endpoints-scoped-token")

    // A refused field is shown as the node's refusal, naming the field.
    await form.getByLabel("URL").fill("http://127.0.0.1:9/other")
    await form.getByLabel("Headers").fill("Host: evil")
    await form.getByRole("button", { name: "Create endpoint" }).click()
    await poll(() => form.getByRole("alert").textContent()).toContain("headers.Host")
    expect((await endpointsOf(w, "umbrella")).items.length).toBe(1)

    // Disable, edit, reveal.
    await row.getByRole("button", { name: "Disable" }).click()
    await poll(() => row.locator("[data-status]").textContent()).toBe("disabled")
    expect((await endpointsOf(w, "umbrella")).items[0]!.disabled).toBe(true)
    await row.getByRole("button", { name: "Edit" }).click()
    await row.getByRole("form", { name: "Save" }).getByLabel("Description").fill("billing")
    await row.getByRole("button", { name: "Save" }).click()
    await poll(async () => (await endpointsOf(w, "umbrella")).items[0]!.description).toBe("billing")
    await row.getByRole("button", { name: "Enable" }).click()
    await poll(() => row.locator("[data-status]").textContent()).toBe("enabled")
    await row.getByRole("button", { name: "Reveal secret" }).click()
    const secret = await admin<{ secret: string }>(w, `/v1/tenants/umbrella/endpoints/${made!.id}/secret`)
    await poll(() => row.locator("[data-secret]").textContent()).toBe(secret.secret)

    // A test event to the refused port: a failed attempt without an answer, and the hook's page
    // names its event type.
    const refused = await sendTest(row)
    await expect.poll(() => attemptCell(row, refused, "outcome"), { timeout: 20_000 }).toBe("failed")
    expect(await attemptCell(row, refused, "status")).toBe("no answer")
    expect(await attemptCell(row, refused, "error")).not.toBe("–")
    await row.locator("[data-test-hook]").click()
    await poll(() => page.locator("[data-event-type]").textContent()).toBe("ankusa.test")
    await page.goBack()

    // Pointed at a real receiver on 127.0.0.1, the next test event is delivered and its attempt listed.
    const receiver = await startSink("ok")
    try {
      await row.getByRole("button", { name: "Edit" }).click()
      await row.getByRole("form", { name: "Save" }).getByLabel("URL").fill(receiver.url)
      await row.getByRole("button", { name: "Save" }).click()
      await poll(async () => (await endpointsOf(w, "umbrella")).items[0]!.url).toBe(receiver.url)
      const delivered = await sendTest(row, refused)
      await expect.poll(() => attemptCell(row, delivered, "status"), { timeout: 20_000 }).toMatch(/^2\d\d$/)
      expect(await attemptCell(row, delivered, "outcome")).toBe("delivered")
      expect(receiver.calls.filter((c) => c.id === delivered).map((c) => c.status)).toEqual([204])
      // On demand: the list read again still has it.
      await row.getByRole("button", { name: "Refresh attempts" }).click()
      await poll(() => attemptCell(row, delivered, "outcome")).toBe("delivered")
      await screenshot(page, "endpoints-activity")
    } finally {
      await receiver.close()
    }

    // Another tenant's endpoints are refused by URL.
    await page.goto(`${w.url}/ui/#/tenants/initech/endpoints`)
    await poll(() => page.getByRole("alert").first().textContent()).toContain("forbidden")
    expect(await page.getByText("Add an endpoint").count()).toBe(0)

    // Delete, after a confirmation.
    await page.goto(`${w.url}/ui/#/tenants/umbrella/endpoints`)
    await page.locator(`[data-endpoint="${made!.id}"]`).getByRole("button", { name: "Delete…" }).click()
    await page.getByRole("dialog").getByRole("button", { name: "Delete endpoint" }).click()
    await poll(() => page.getByText("No endpoints yet.").isVisible()).toBe(true)
    expect((await endpointsOf(w, "umbrella")).items).toEqual([])
    await page.close()
  })

  it("an endpoint's breaker and last success are shown, and re-enabling it can replay its dead letters", async () => {
    const receiver = await startSink("fail")
    const call = async (method: string, route: string, body: unknown) => {
      const r = await fetch(w.url + route, {
        method,
        headers: { authorization: `Bearer ${SCOPED_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      expect(r.status, await r.clone().text()).toBeLessThan(300)
      return (await r.json()) as any
    }
    try {
      const made = await call("POST", "/v1/tenants/umbrella/endpoints", { url: receiver.url, description: "breaker" })
      const deadOfOrders = (await admin(w, "/v1/dlq?tenant=umbrella&limit=500")).items.filter((i: any) => i.sink === "orders").length
      const hooks: Array<string> = []
      for (let i = 0; i < 4; i++) hooks.push(await ingest(w, "ep", "umbrella"))
      // Four failed calls: its breaker counts them (closed: under breaker.minCalls).
      await until("four failed calls", () => admin(w, `/v1/tenants/umbrella/endpoints/${made.id}`), (e) => e.breaker?.failures === 4)
      // Disabled (as the system does, with a reason): its rows are dead-lettered as their retries come due.
      await call("PATCH", `/v1/tenants/umbrella/endpoints/${made.id}`, { disabled: true, disabledReason: "failing without a success since then" })
      const deadIds = async () => (await admin(w, "/v1/dlq?tenant=umbrella&limit=500")).items.map((i: any) => i.id as string)
      await until("its rows dead", deadIds, (ids) => hooks.every((h) => ids.includes(h)), 30_000)

      const page = await openConsole(w, SCOPED_TOKEN)
      await page.goto(`${w.url}/ui/#/tenants/umbrella/endpoints`)
      const row = page.locator(`[data-endpoint="${made.id}"]`)
      await poll(() => row.locator("[data-status]").textContent()).toBe("disabled: failing without a success since then")
      expect(await row.locator('[data-col="breaker"]').textContent()).toBe("closed, 4 failed since the last success")
      expect(await row.locator('[data-col="last-success"]').textContent()).toBe("none since its pool opened")
      await screenshot(page, "endpoints-breaker")

      // Enabled with its dead letters replayed: the receiver, healthy now, gets each of them.
      receiver.mode = "ok"
      await row.getByLabel("also replay its dead letters").check()
      await row.getByRole("button", { name: "Enable" }).click()
      await poll(() => page.getByRole("status").filter({ hasText: "Enabled" }).textContent()).toBe("Enabled; its dead letters replayed.")
      await poll(() => row.locator("[data-status]").textContent()).toBe("enabled")
      await expect.poll(() => hooks.filter((h) => receiver.calls.some((c) => c.id === h && c.status === 204)).length, { timeout: 30_000 }).toBe(4)
      // Only the endpoint's rows: the tenant's dead rows of the sink `orders` stay dead.
      expect((await admin(w, "/v1/dlq?tenant=umbrella&limit=500")).items.filter((i: any) => i.sink === "orders").length).toBe(deadOfOrders)
      await page.reload()
      await poll(() => row.locator('[data-col="breaker"]').textContent()).toBe("closed")
      expect(await row.locator('[data-col="last-success"]').textContent()).not.toBe("none since its pool opened")

      // The Sinks page (a global token) shows each shared sink's breaker and last success.
      const ops = await openConsole(w, GLOBAL_TOKEN)
      await ops.goto(`${w.url}/ui/#/sinks`)
      const orders = ops.locator('tr[data-sink="orders"]')
      await poll(() => orders.locator('[data-col="breaker"]').textContent()).toMatch(/^(closed|open|half-open)/)
      expect(await orders.locator('[data-col="last-success"]').count()).toBe(1)
      await ops.close()
      await page.close()
    } finally {
      await receiver.close()
    }
  })

  it("a portal URL signs in to its tenant's endpoints page alone", async () => {
    const issued = await admin<{ token: string; url: string }>(w, "/v1/tenants/umbrella/portal-token", "POST")
    const page = await w.context.newPage()
    await page.goto(issued.url)
    await poll(() => page.getByRole("heading", { name: "Endpoints of umbrella" }).isVisible()).toBe(true)
    // The token left the address at once and is kept for the tab.
    expect(page.url()).not.toContain(issued.token)
    expect(await page.evaluate<string | null>(`sessionStorage.getItem("ankusa.console.token")`)).toBe(issued.token)
    const nav = await page.getByRole("navigation", { name: "Pages" }).getByRole("link").allTextContents()
    expect(nav).toEqual(["Dead letters", "Endpoints"])
    await page.goto(`${w.url}/ui/#/tenants/initech/endpoints`)
    await poll(() => page.getByRole("alert").first().textContent()).toContain("forbidden")
    await screenshot(page, "endpoints-portal")
    await page.close()
  })
})
