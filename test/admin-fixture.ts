/**
 * The admin side of an edge test: a global token and one scoped to tenant `acme`, on a node with
 * one sink and one source (`shop`, tenant from `x-tenant`), and an admin call with a bearer token.
 */
import { Effect } from "effect"
import type * as Cfg from "../src/domain/config.js"
import { configOf, type Edge, read } from "./edge-harness.js"

export const GLOBAL = "global-token-0123456789"
export const ACME = "acme-token-0123456789ab"

/** The node's configuration; `extra` adds sections (the tokens, sink and source stay). */
export const adminConfig = (extra: Cfg.ConfigInput = {}): Cfg.Config =>
  configOf({
    ...extra,
    sinks: [{ name: "a", url: "http://127.0.0.1:9/a" }],
    sources: [{ id: "shop", tenant: { header: "x-tenant" }, routes: ["a"] }],
    adminTokens: [
      { name: "ops", token: GLOBAL, tenants: "*" },
      { name: "acme-admin", token: ACME, tenants: ["acme"] }
    ]
  })

/** An admin request with `token`: status, body (JSON when it is JSON), headers and the body's size in bytes. */
export const adminCall = (edge: Edge, token: string, path: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const r = await edge.fetch(path, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } })
    const bytes = Buffer.byteLength(await r.clone().text())
    return { ...(await read(r)), bytes }
  })
