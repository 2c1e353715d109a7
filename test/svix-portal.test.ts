/**
 * The consumer portal through the Svix-compatible API (issue 42; docs/svix-compat.md "Consumer
 * portal"): the official `svix` SDK asks for an application's portal access, and Debian's
 * Chromium opens the URL it answers against the console world's real gateway (world.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiException, Svix } from "svix"
import { GLOBAL_TOKEN, startWorld, unavailable, type World } from "./console/world.js"

if (unavailable !== undefined) console.warn(unavailable)

const poll = <A>(read: () => Promise<A> | A) => expect.poll(read, { timeout: 10_000 })

describe.skipIf(unavailable !== undefined)("svix: app portal access", { timeout: 90_000 }, () => {
  let w: World
  beforeAll(async () => {
    w = await startWorld()
  }, 150_000)
  afterAll(async () => {
    await w?.close()
  })

  it("an application portal access token opens the console for that application alone", async () => {
    const svix = new Svix(GLOBAL_TOKEN, { serverUrl: w.url })
    const app = await svix.application.getOrCreate({ name: "wayne" })
    await svix.application.getOrCreate({ name: "stark" })
    await svix.endpoint.create(app.id, { url: "http://127.0.0.1:9/portal", description: "wayne's receiver" })
    const access = await svix.authentication.appPortalAccess(app.id, {})
    expect(access.url).toContain("/ui/#/tenants/wayne/endpoints?portal=")
    expect(access.url).toContain(access.token)

    const page = await w.context.newPage()
    await page.goto(access.url)
    await poll(() => page.getByRole("heading", { name: "Endpoints of wayne" }).isVisible()).toBe(true)
    await poll(() => page.getByText("wayne's receiver").first().isVisible()).toBe(true)
    expect(page.url()).not.toContain(access.token)
    await page.goto(`${w.url}/ui/#/tenants/stark/endpoints`)
    await poll(() => page.getByRole("alert").first().textContent()).toContain("forbidden")
    await page.close()

    // The token itself, through the SDK: that application's endpoints, and no other application.
    const portal = new Svix(access.token, { serverUrl: w.url })
    expect((await portal.endpoint.list("wayne")).data.map((e) => e.description)).toEqual(["wayne's receiver"])
    const refused = await portal.endpoint.list("stark").then(() => undefined, (e: unknown) => e)
    expect(refused).toBeInstanceOf(ApiException)
    expect((refused as ApiException<unknown>).code).toBe(403)
    // Not a route a portal token opens: 401, as for any admin route it does not open.
    const create = await portal.application.create({ name: "other" }).then(() => undefined, (e: unknown) => e)
    expect((create as ApiException<unknown>).code).toBe(401)
  })
})
