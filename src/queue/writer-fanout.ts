/**
 * The Writer's fan-out of hooks that route to `tenant-endpoints` (docs/delivery.md "Tenant
 * endpoints"): their tenants' endpoints, one cached read per tenant of the batch
 * (src/queue/endpoints.ts), then src/domain/fanout.ts. Nothing is read for a batch without such a hook.
 */
import { Effect, type Option } from "effect"
import type { Endpoint } from "../domain/endpoints.js"
import { fanOut, wantsEndpoints } from "../domain/fanout.js"
import type { EndpointsShape } from "./endpoints.js"
import type { FanOut, Owner } from "./writer-batch.js"

/** undefined when no hook of the batch asks for endpoints; without the service such a hook has only its sinks. */
export const endpointsFanOut = (endpoints: Option.Option<EndpointsShape>, fresh: ReadonlyArray<Owner>, ords: ReadonlyMap<string, number>) =>
  Effect.gen(function* () {
    let wanted: Map<number, ReadonlyArray<Endpoint>> | undefined
    for (const w of fresh) {
      const ord = ords.get(w.tenant)
      if (ord !== undefined && wantsEndpoints(w.req.sinks)) (wanted ??= new Map()).set(ord, [])
    }
    if (wanted === undefined) return undefined
    if (endpoints._tag === "Some") for (const ord of wanted.keys()) wanted.set(ord, yield* endpoints.value.ofTenant(ord))
    return fanFrom(wanted)
  })

/** The fan-out over the batch's tenants' endpoints, by ordinal (a tenant not there has none). */
export const fanFrom =
  (lists: ReadonlyMap<number, ReadonlyArray<Endpoint>>): FanOut =>
  (w, ord) =>
    wantsEndpoints(w.req.sinks) ? fanOut(w.req.sinks, lists.get(ord) ?? [], w.req.eventType) : w.req.sinks
