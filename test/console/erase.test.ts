/**
 * The console's erase (TEN-5) in a real browser against a real gateway on RocksDB (world.ts):
 * the button is armed only by typing the tenant id, a confirmation comes first, the job's
 * progress is shown until it is done, and the tenant is then refused (410).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { admin, GLOBAL_TOKEN, ingest, openConsole, screenshot, startWorld, unavailable, until, type World } from "./world.js"

if (unavailable !== undefined) console.warn(unavailable)

describe.skipIf(unavailable !== undefined)("console erase", { timeout: 90_000 }, () => {
  let w: World
  beforeAll(async () => {
    w = await startWorld()
  }, 150_000)
  afterAll(async () => {
    await w?.close()
  })

  it("the console erases a tenant after typing its id", async () => {
    for (let i = 0; i < 3; i++) await ingest(w, "slow", "hooli")
    await ingest(w, "slow", "piedpiper")
    await until("3 hooks of hooli waiting", () => admin(w, "/v1/tenants/hooli"), (c) => c.scheduled + c.pending === 3 && c.inflight === 0)
    const page = await openConsole(w, GLOBAL_TOKEN)
    await page.goto(`${w.url}/ui/#/tenants/hooli`)
    const section = page.getByRole("region", { name: "Erase tenant" })
    const button = section.getByRole("button", { name: "Erase tenant…" })
    const input = section.getByLabel("Type the tenant id to confirm")
    await expect.poll(() => button.isDisabled(), { timeout: 10_000 }).toBe(true)
    // A near miss does not arm it.
    await input.fill("hool")
    expect(await button.isDisabled()).toBe(true)
    await input.fill("hooli")
    expect(await button.isDisabled()).toBe(false)
    await button.click()
    const dialog = page.getByRole("dialog")
    expect(await dialog.textContent()).toContain("hooli")
    await screenshot(page, "erase-confirm")
    // Cancel erases nothing.
    await dialog.getByRole("button", { name: "Cancel" }).click()
    expect((await admin(w, "/v1/tenants/hooli")).scheduled + (await admin(w, "/v1/tenants/hooli")).pending).toBe(3)

    await button.click()
    await page.getByRole("dialog").getByRole("button", { name: "Erase every row" }).click()
    await expect.poll(() => section.textContent(), { timeout: 20_000 }).toContain("Erased: all 7 steps done")
    expect(await section.locator("progress").getAttribute("value")).toBe("7")
    expect(await section.textContent()).toContain("3 due")
    await screenshot(page, "erased")

    // Done through the API too: refused at ingest, unknown as a tenant, the other tenant untouched.
    const job = await admin(w, "/v1/tenants/hooli/erase")
    expect(job).toMatchObject({ done: true, actor: "ops" })
    const refused = await fetch(`${w.url}/v1/hooks/slow`, { method: "POST", headers: { "x-tenant": "hooli" }, body: "{}" })
    expect(refused.status).toBe(410)
    expect((await fetch(`${w.url}/v1/tenants/hooli`, { headers: { authorization: `Bearer ${GLOBAL_TOKEN}` } })).status).toBe(404)
    expect((await admin(w, "/v1/tenants/piedpiper")).scheduled + (await admin(w, "/v1/tenants/piedpiper")).pending).toBe(1)

    // And the refusal is lifted from the same page.
    await section.getByRole("button", { name: "Lift the refusal…" }).click()
    await page.getByRole("dialog").getByRole("button", { name: "Lift the refusal" }).click()
    await expect.poll(() => section.textContent(), { timeout: 10_000 }).toContain("The refusal of hooli is lifted")
    await ingest(w, "slow", "hooli")
    await page.close()
  })
})
