/**
 * The Svix-compatible API (issue 42; docs/svix-compat.md) driven by the official `svix` SDK,
 * pinned as a devDependency and pointed at a real `ankusa serve` child with `serverUrl`: the SDK
 * is the client, no request is written by hand. Receivers are recording sinks on 127.0.0.1
 * (loopback allowed through `endpoints.allowNetworks`).
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ApiException, Svix, Webhook } from "svix"
import { type NodeChild, runAnkusa, servingAddress } from "./support/node-child.js"
import { type Got, type RecordingSink, startRecordingSink } from "./support/record-sink.js"

const TOKEN = "svix-admin-token-0001"
const ACME_TOKEN = "svix-acme-token-0002"

const children: Array<{ child: NodeChild; dir: string }> = []
const sinks: Array<RecordingSink> = []
afterEach(async () => {
  for (const n of children.splice(0)) {
    n.child.child.kill("SIGTERM")
    await n.child.exited(30_000).catch(() => n.child.kill())
    fs.rmSync(n.dir, { recursive: true, force: true })
  }
  for (const s of sinks.splice(0)) await s.close()
})

const serve = async (): Promise<string> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-svix-"))
  const file = path.join(dir, "ankusa.json")
  fs.writeFileSync(file, JSON.stringify({
    sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["tenant-endpoints"] }],
    sinks: [],
    adminTokens: [
      { name: "ops", token: TOKEN, tenants: "*" },
      { name: "acme", token: ACME_TOKEN, tenants: ["acme"] }
    ],
    endpoints: { allowNetworks: ["127.0.0.0/8"] },
    http: { demoSink: false },
    pipeline: { tickMs: 20 }
  }))
  const child = runAnkusa(["serve", "--config", file, "--data-dir", dir, "--port", "0"])
  children.push({ child, dir })
  return servingAddress(child)
}

const sink = async (status = 204) => {
  const s = await startRecordingSink(status)
  sinks.push(s)
  return s
}

const until = async (what: string, ok: () => boolean | Promise<boolean>, ms = 20_000) => {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

const at = (s: RecordingSink, route: string): Array<Got> => s.got.filter((g) => g.path === route)

/** What the SDK threw: its status and body. */
const refusal = async (p: Promise<unknown>): Promise<{ code: number; body: any }> => {
  const e = await p.then(() => undefined, (e: unknown) => e)
  expect(e).toBeInstanceOf(ApiException)
  return { code: (e as ApiException<unknown>).code, body: (e as ApiException<unknown>).body }
}

const headersOf = (g: Got): Record<string, string> => Object.fromEntries(Object.entries(g.headers).map(([k, v]) => [k, String(v)]))

describe("svix-compatible API", () => {
  it("the svix SDK creates an application, an endpoint with event type filters, and a message that reaches only the matching endpoint", { timeout: 60_000 }, async () => {
    const url = await serve()
    const s = await sink()
    const svix = new Svix(TOKEN, { serverUrl: url })
    const app = await svix.application.create({ name: "acme", uid: "acme" })
    expect(app.uid).toBe("acme")
    expect(app.id).toMatch(/^app_/)
    expect((await svix.application.getOrCreate({ name: "acme", uid: "acme" })).id).toBe(app.id)
    expect((await svix.application.get(app.id)).uid).toBe("acme")
    const paid = await svix.endpoint.create(app.id, { url: `${s.url}/paid`, eventTypes: ["invoice.paid"], metadata: { team: "billing" } })
    expect(paid.eventTypes).toEqual(["invoice.paid"])
    expect(paid.metadata).toEqual({ team: "billing" })
    const users = await svix.endpoint.create("acme", { url: `${s.url}/users`, eventTypes: ["user.created"] })
    expect((await svix.endpoint.list(app.id)).data.map((e) => e.id).sort()).toEqual([paid.id, users.id].sort())
    const msg = await svix.message.create(app.id, { eventType: "invoice.paid", payload: { invoice: 42 } })
    expect(msg.id).toMatch(/^h_/)
    await until("the delivery to the matching endpoint", () => at(s, "/paid").length === 1)
    expect(JSON.parse(at(s, "/paid")[0]!.body)).toEqual({ invoice: 42 })
    expect(at(s, "/paid")[0]!.headers["webhook-id"]).toBe(msg.id)
    const got = await svix.message.get(app.id, msg.id)
    expect(got.eventType).toBe("invoice.paid")
    expect(got.payload).toEqual({ invoice: 42 })
    await new Promise((r) => setTimeout(r, 500))
    expect(at(s, "/users")).toEqual([])
  })

  it("deliveries verify with the svix SDK's Webhook.verify using the endpoint secret, and with both secrets during a rotation", { timeout: 60_000 }, async () => {
    const url = await serve()
    const s = await sink()
    const svix = new Svix(TOKEN, { serverUrl: url })
    const app = await svix.application.create({ name: "acme" })
    const ep = await svix.endpoint.create(app.id, { url: `${s.url}/hook` })
    const before = (await svix.endpoint.getSecret(app.id, ep.id)).key
    await svix.message.create(app.id, { eventType: "order.placed", payload: { n: 1 } })
    await until("the first delivery", () => s.got.length === 1)
    expect(() => new Webhook(before).verify(s.got[0]!.body, headersOf(s.got[0]!))).not.toThrow()
    await svix.endpoint.rotateSecret(app.id, ep.id)
    const after = (await svix.endpoint.getSecret(app.id, ep.id)).key
    expect(after).not.toBe(before)
    await svix.message.create(app.id, { eventType: "order.placed", payload: { n: 2 } })
    await until("the second delivery", () => s.got.length === 2)
    const second = s.got[1]!
    expect(() => new Webhook(after).verify(second.body, headersOf(second))).not.toThrow()
    expect(() => new Webhook(before).verify(second.body, headersOf(second))).not.toThrow()
    expect(() => new Webhook("whsec_" + Buffer.alloc(24, 7).toString("base64")).verify(second.body, headersOf(second))).toThrow()
  })

  it("the svix SDK lists a message's attempts with their status codes", { timeout: 60_000 }, async () => {
    const url = await serve()
    const ok = await sink(204)
    const failing = await sink(500)
    const svix = new Svix(TOKEN, { serverUrl: url })
    const app = await svix.application.create({ name: "acme" })
    const good = await svix.endpoint.create(app.id, { url: `${ok.url}/ok` })
    const bad = await svix.endpoint.create(app.id, { url: `${failing.url}/bad` })
    const msg = await svix.message.create(app.id, { eventType: "order.placed", payload: { n: 1 } })
    const attempts = async () => (await svix.messageAttempt.listByMsg(app.id, msg.id)).data
    await until("both attempts", async () => new Set((await attempts()).map((a) => a.endpointId)).size === 2)
    const byEndpoint = new Map((await attempts()).reverse().map((a) => [a.endpointId, a]))
    expect(byEndpoint.get(good.id)).toMatchObject({ msgId: msg.id, responseStatusCode: 204, status: 0, url: `${ok.url}/ok` })
    expect(byEndpoint.get(bad.id)).toMatchObject({ msgId: msg.id, responseStatusCode: 500, status: 2, url: `${failing.url}/bad` })
    const ofBad = await svix.messageAttempt.listByEndpoint(app.id, bad.id)
    // Its retry (after about 5 s) may have come meanwhile: every attempt of it failed with 500.
    expect(ofBad.data.length).toBeGreaterThanOrEqual(1)
    expect(new Set(ofBad.data.map((a) => `${a.responseStatusCode} ${a.status} ${a.statusText}`))).toEqual(new Set(["500 2 fail"]))
    expect(ofBad.done).toBe(true)
  })

  it("the svix SDK's retried POST with one idempotency key creates one message", { timeout: 60_000 }, async () => {
    const url = await serve()
    const s = await sink()
    const sent: Array<{ key: string; id: string | undefined }> = []
    // The first answer to a message is lost on the way back (502 instead): the SDK retries it with its key.
    const lossy = async (input: string | URL | Request, init?: RequestInit) => {
      const r = await fetch(input, init)
      if (!new URL(String(input)).pathname.endsWith("/msg")) return r
      const key = (init?.headers as Record<string, string>)["idempotency-key"]!
      const body = (await r.json()) as { id?: string }
      sent.push({ key, id: body.id })
      return sent.length === 1 ? new Response("lost", { status: 502 }) : new Response(JSON.stringify(body), { status: r.status })
    }
    const svix = new Svix(TOKEN, { serverUrl: url, fetch: lossy as typeof fetch })
    const app = await svix.application.create({ name: "acme" })
    await svix.endpoint.create(app.id, { url: `${s.url}/hook` })
    const msg = await svix.message.create(app.id, { eventType: "order.placed", payload: { n: 1 } }, { idempotencyKey: "order-1" })
    expect(sent.map((x) => x.key)).toEqual(["order-1", "order-1"])
    expect(sent[1]!.id).toBe(sent[0]!.id)
    expect(msg.id).toBe(sent[0]!.id)
    await until("the delivery", () => s.got.length === 1)
    await new Promise((r) => setTimeout(r, 500))
    expect(s.got.length).toBe(1)
    // Another key is another message.
    const other = await svix.message.create(app.id, { eventType: "order.placed", payload: { n: 1 } }, { idempotencyKey: "order-2" })
    expect(other.id).not.toBe(msg.id)
  })

  it("a retried POST with one Idempotency-Key answers the first answer again: application, endpoint, rotation", { timeout: 60_000 }, async () => {
    const url = await serve()
    // Every first answer to a POST is lost on the way back (502): the SDK retries it with its key.
    const seen = new Map<string, number>()
    const lossy = async (input: string | URL | Request, init?: RequestInit) => {
      const r = await fetch(input, init)
      if (init?.method !== "POST") return r
      const key = (init.headers as Record<string, string>)["idempotency-key"]!
      seen.set(key, (seen.get(key) ?? 0) + 1)
      return seen.get(key) === 1 ? new Response("lost", { status: 502 }) : r
    }
    const svix = new Svix(TOKEN, { serverUrl: url, fetch: lossy as typeof fetch })
    const plain = new Svix(TOKEN, { serverUrl: url })
    const app = await svix.application.create({ name: "acme" }, { idempotencyKey: "app-1" })
    expect(app.uid).toBe("acme")
    const ep = await svix.endpoint.create(app.id, { url: "http://127.0.0.1:9/hook" }, { idempotencyKey: "ep-1" })
    expect((await plain.endpoint.list(app.id)).data.map((e) => e.id)).toEqual([ep.id])
    const before = (await plain.endpoint.getSecret(app.id, ep.id)).key
    await svix.endpoint.rotateSecret(app.id, ep.id, {}, { idempotencyKey: "rot-1" })
    const after = (await plain.endpoint.getSecret(app.id, ep.id)).key
    expect(after).not.toBe(before)
    // A repeat after the retry answers the same again, and does not rotate twice.
    await plain.endpoint.rotateSecret(app.id, ep.id, {}, { idempotencyKey: "rot-1" })
    expect((await plain.endpoint.getSecret(app.id, ep.id)).key).toBe(after)
    expect([...seen.values()].every((n) => n === 2)).toBe(true)
    // Another key runs again.
    const ep2 = await plain.endpoint.create(app.id, { url: "http://127.0.0.1:9/hook" }, { idempotencyKey: "ep-2" })
    expect(ep2.id).not.toBe(ep.id)
  })

  it("two POSTs sent at once with one Idempotency-Key run once and answer alike", { timeout: 60_000 }, async () => {
    const url = await serve()
    const svix = new Svix(TOKEN, { serverUrl: url })
    const app = await svix.application.create({ name: "acme" })
    for (let round = 0; round < 5; round++) {
      const key = `ep-at-once-${round}`
      const eps = await Promise.all(Array.from({ length: 4 }, () => svix.endpoint.create(app.id, { url: "http://127.0.0.1:9/hook" }, { idempotencyKey: key })))
      expect(new Set(eps.map((e) => e.id)).size).toBe(1)
    }
    // Five keys, five endpoints: none was created twice.
    expect((await svix.endpoint.list(app.id)).data.length).toBe(5)
  })

  it("recover redelivers an endpoint's dead messages since a time", { timeout: 90_000 }, async () => {
    const url = await serve()
    const s = await sink(500)
    const svix = new Svix(TOKEN, { serverUrl: url })
    const app = await svix.application.create({ name: "acme" })
    const ep = await svix.endpoint.create(app.id, { url: `${s.url}/hook` })
    const since = new Date(Date.now() - 1_000)
    const msg = await svix.message.create(app.id, { eventType: "order.placed", payload: { n: 1 } })
    await until("the first failed attempt", () => s.got.length === 1)
    // Disabled, its row is dead-lettered when its retry comes due (about 5 s).
    await svix.endpoint.patch(app.id, ep.id, { disabled: true })
    const tenantDead = async () => {
      const r = await fetch(`${url}/v1/dlq?tenant=acme`, { headers: { authorization: `Bearer ${TOKEN}` } })
      return ((await r.json()) as { items: Array<{ id: string }> }).items.map((i) => i.id)
    }
    await until("the dead letter", async () => (await tenantDead()).includes(msg.id), 30_000)
    await svix.endpoint.patch(app.id, ep.id, { disabled: false })
    s.status = 204
    // A window after the dead letter revives nothing.
    const later = await svix.endpoint.recover(app.id, ep.id, { since: new Date(Date.now() + 60_000) })
    expect(later.status).toBe("finished")
    await new Promise((r) => setTimeout(r, 500))
    expect(s.got.length).toBe(1)
    const task = await svix.endpoint.recover(app.id, ep.id, { since })
    expect(task.status).toBe("finished")
    expect(task.task).toBe("endpoint.recover")
    await until("the redelivery", () => s.got.length === 2)
    expect(s.got[1]!.headers["webhook-id"]).toBe(msg.id)
    expect(await tenantDead()).toEqual([])
  })

  it("a scoped token cannot read another application through the svix routes", { timeout: 60_000 }, async () => {
    const url = await serve()
    const s = await sink()
    const admin = new Svix(TOKEN, { serverUrl: url })
    const acme = new Svix(ACME_TOKEN, { serverUrl: url })
    const globex = await admin.application.create({ name: "globex" })
    const ep = await admin.endpoint.create(globex.id, { url: `${s.url}/hook` })
    const msg = await admin.message.create(globex.id, { eventType: "a.b", payload: {} })
    await acme.application.create({ name: "acme" })
    expect((await acme.application.list()).data.map((a) => a.uid)).toEqual(["acme"])
    // Thunks: each call starts only when its refusal is awaited, so no rejection goes unhandled.
    for (const attempt of [
      () => acme.application.get(globex.id),
      () => acme.application.get("globex"),
      () => acme.endpoint.list(globex.id),
      () => acme.endpoint.get("globex", ep.id),
      () => acme.endpoint.getSecret(globex.id, ep.id),
      () => acme.message.get(globex.id, msg.id),
      () => acme.message.create("globex", { eventType: "a.b", payload: {} }),
      () => acme.messageAttempt.listByMsg(globex.id, msg.id),
      () => acme.application.delete("globex")
    ]) {
      const r = await refusal(attempt())
      expect(r.code).toBe(403)
      expect(r.body.code).toBe("forbidden")
    }
    // A missing application in scope is 404, one out of scope 403 alike: nothing tells them apart.
    expect((await refusal(acme.application.get("initech"))).code).toBe(403)
    expect((await admin.application.list()).data.map((a) => a.uid)).toEqual(["globex", "acme"])
  })

  it("svix SDK errors carry Svix's codes for a missing application and an invalid endpoint", { timeout: 60_000 }, async () => {
    const url = await serve()
    const svix = new Svix(TOKEN, { serverUrl: url })
    const missing = await refusal(svix.application.get("nobody"))
    expect(missing.code).toBe(404)
    expect(missing.body).toMatchObject({ code: "not_found" })
    expect(typeof missing.body.detail).toBe("string")
    expect((await refusal(svix.endpoint.create("nobody", { url: "http://127.0.0.1:1/x" }))).body.code).toBe("not_found")
    const app = await svix.application.create({ name: "acme" })
    const conflict = await refusal(svix.application.create({ name: "acme" }))
    expect(conflict).toMatchObject({ code: 409, body: { code: "conflict" } })
    const badUrl = await refusal(svix.endpoint.create(app.id, { url: "ftp://127.0.0.1/x" }))
    expect(badUrl.code).toBe(422)
    expect(badUrl.body.detail[0]).toMatchObject({ loc: ["body", "url"], type: "value_error" })
    const channels = await refusal(svix.endpoint.create(app.id, { url: "http://127.0.0.1:1/x", channels: ["eu"] }))
    expect(channels.code).toBe(422)
    expect(channels.body.detail[0].loc).toEqual(["body", "channels"])
    const rate = await refusal(svix.endpoint.create(app.id, { url: "http://127.0.0.1:1/x", throttleRate: -1 }))
    expect(rate.body.detail[0].loc).toEqual(["body", "throttleRate"])
    expect((await refusal(svix.endpoint.get(app.id, "ep_00000000000001"))).body.code).toBe("not_found")
  })
})
