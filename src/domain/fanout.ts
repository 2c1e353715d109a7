/**
 * A hook's fan-out (docs/delivery.md "Tenant endpoints"): its source's route targets, with
 * `tenant-endpoints` replaced by the tenant's enabled endpoints whose event types match, each
 * named `endpoint:<id>` in the envelope. Pure.
 */
import { TENANT_ENDPOINTS } from "./config.js"
import { type Endpoint, matches } from "./endpoints.js"

const PREFIX = "endpoint:"

/** The envelope's name of a tenant endpoint (a sink name cannot hold a colon). */
export const endpointDestination = (id: string): string => PREFIX + id

/** The endpoint id an envelope's destination names, or undefined for a sink name. */
export const endpointIdOf = (destination: string): string | undefined =>
  destination.startsWith(PREFIX) ? destination.slice(PREFIX.length) : undefined

/** Whether any route target asks for the tenant's endpoints (the Writer reads them only then). */
export const wantsEndpoints = (routes: ReadonlyArray<string>): boolean => routes.includes(TENANT_ENDPOINTS)

/**
 * The destinations of one hook, in route order: each sink name as it is, and in place of
 * `tenant-endpoints` every enabled endpoint matching `eventType`, in the tenant's id order.
 * Bounded by the routes (64) plus `tenants.maxEndpoints`. May be empty: a hook only for
 * endpoints, none of which wants it.
 */
export const fanOut = (routes: ReadonlyArray<string>, endpoints: ReadonlyArray<Endpoint>, eventType: string | undefined): Array<string> => {
  const out: Array<string> = []
  for (const r of routes) {
    if (r !== TENANT_ENDPOINTS) out.push(r)
    else for (const e of endpoints) if (!e.disabled && matches(e, eventType)) out.push(endpointDestination(e.id))
  }
  return out
}
