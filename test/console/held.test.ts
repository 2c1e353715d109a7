/**
 * The console's held keys (issue 44: "the admin API and the console show held keys") in a real
 * browser against a real gateway on RocksDB (world.ts): an ordered sink with `onDead: hold`
 * dead-letters a key's head, the tenant's page lists the key as the API does, and replaying the
 * head from its hook's page delivers it and then its successors in order, and the key leaves the list.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { admin, GLOBAL_TOKEN, ingest, openConsole, screenshot, startWorld, unavailable, until, type World } from "./world.js"

if (unavailable !== undefined) console.warn(unavailable)

interface Held {
  readonly items: ReadonlyArray<{ readonly destination: string | null; readonly ordering_key: string | null; readonly id: string | null }>
}

describe.skipIf(unavailable !== undefined)("console held keys", { timeout: 90_000 }, () => {
  let w: World
  beforeAll(async () => {
    w = await startWorld()
  }, 150_000)
  afterAll(async () => {
    await w?.close()
  })

  it("the tenant page shows the keys held by a dead head, and a replay from the console frees them", async () => {
    w.keyed.mode = "fail"
    const ids: Array<string> = []
    for (let n = 1; n <= 3; n++) ids.push(await ingest(w, "keyed", "wayne", { n }, "order-7"))
    const head = ids[0]!
    const held = await until("order-7 held", () => admin<Held>(w, "/v1/tenants/wayne/ordering/held"), (h) => h.items.length === 1)
    expect(held.items[0]).toMatchObject({ destination: "keyed", ordering_key: "order-7", id: head })
    // Held: only the head was called; its successors wait behind it.
    expect(w.keyed.calls.map((c) => c.id)).toEqual([head])

    const page = await openConsole(w, GLOBAL_TOKEN)
    await page.goto(`${w.url}/ui/#/tenants/wayne`)
    const section = page.getByRole("region", { name: "Held keys" })
    const row = section.locator('tr[data-key="order-7"]')
    await expect.poll(() => row.isVisible(), { timeout: 10_000 }).toBe(true)
    expect(await row.locator("td").allTextContents()).toEqual(["order-7", "keyed", head])
    expect(await page.locator('[data-stat="waiting"] dd').textContent()).toBe("2")
    await screenshot(page, "held-keys")

    // The head's hook page replays it; the key then moves on, in order.
    w.keyed.mode = "ok"
    await row.getByRole("link", { name: head }).click()
    await page.getByRole("button", { name: "Replay this hook…" }).click()
    await page.getByRole("dialog").getByRole("button", { name: "Replay" }).click()
    await until("the key delivered", async () => w.keyed.calls.filter((c) => c.status === 204).map((c) => c.id), (d) => d.length === 3)
    expect(w.keyed.calls.map((c) => c.id)).toEqual([head, ...ids])

    await page.goto(`${w.url}/ui/#/tenants/wayne`)
    await expect.poll(() => section.textContent(), { timeout: 15_000 }).toContain("No key is held.")
    expect((await admin<Held>(w, "/v1/tenants/wayne/ordering/held")).items).toEqual([])
    await page.close()
  })
})
