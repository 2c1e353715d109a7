/**
 * A node of tenant endpoints for the benches (breaker-bench, idle-after-drain): the configuration
 * (a source routed to `tenant-endpoints`, an admin token for every tenant, loopback endpoints
 * allowed) and the endpoints created over the API.
 */
import type { ServeChild } from "./serve-child.js"

/** Endpoint creates in flight at once. */
export const SETUP_CONCURRENCY = 16

/** `ankusa serve`'s configuration: source `bench` (tenant from `x-tenant`) routed to each tenant's endpoints. */
export const endpointsConfig = (token: string) => ({
  sources: [{ id: "bench", tenant: { header: "x-tenant" }, routes: ["tenant-endpoints"] }],
  sinks: [],
  adminTokens: [{ name: "bench", token, tenants: "*" }],
  endpoints: { allowNetworks: ["127.0.0.0/8"] },
  http: { demoSink: false },
  log: { level: "warning" }
})

/** One endpoint for each [tenant, url], SETUP_CONCURRENCY creates at a time; throws unless each is a 201. */
export const createEndpoints = async (server: ServeChild, token: string, targets: ReadonlyArray<readonly [string, string]>): Promise<void> => {
  let next = 0
  const worker = async () => {
    for (let n = next++; n < targets.length; n = next++) {
      const [t, url] = targets[n]!
      const r = await fetch(`${server.url}/v1/tenants/${t}/endpoints`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ url })
      })
      const text = await r.text()
      if (r.status !== 201) throw new Error(`endpoint create for ${t}: ${r.status} ${text}`)
    }
  }
  await Promise.all(Array.from({ length: SETUP_CONCURRENCY }, worker))
}
