/**
 * The Writer's fan-out of hooks that route to `tenant-endpoints` (docs/delivery.md "Tenant
 * endpoints"): their tenants' endpoints, one cached read per tenant of the batch
 * (src/queue/endpoints.ts), then src/domain/fanout.ts. Nothing is read for a batch without such a hook.
 */
import { Effect, type Option } from "effect"
import type { Endpoint } from "../domain/endpoints.js"
import { endpointIdOf, fanOut, wantsEndpoints } from "../domain/fanout.js"
import type { EndpointsShape } from "./endpoints.js"
import type { FanOut, OrderedOf, Owner } from "./writer-batch.js"

/** The batch's tenants' endpoint lists; undefined when no hook of the batch asks for endpoints; without the service such a hook has only its sinks. */
export const endpointLists = (endpoints: Option.Option<EndpointsShape>, fresh: ReadonlyArray<Owner>, ords: ReadonlyMap<string, number>) =>
  Effect.gen(function* () {
    let wanted: Map<number, ReadonlyArray<Endpoint>> | undefined
    for (const w of fresh) {
      const ord = ords.get(w.tenant)
      if (ord !== undefined && wantsEndpoints(w.req.sinks)) (wanted ??= new Map()).set(ord, [])
    }
    if (wanted === undefined) return undefined
    if (endpoints._tag === "Some") for (const ord of wanted.keys()) wanted.set(ord, yield* endpoints.value.ofTenant(ord))
    return wanted as ReadonlyMap<number, ReadonlyArray<Endpoint>>
  })

/** The fan-out over the batch's tenants' endpoints, by ordinal (a tenant not there has none). */
export const fanFrom =
  (lists: ReadonlyMap<number, ReadonlyArray<Endpoint>>): FanOut =>
  (w, ord) =>
    wantsEndpoints(w.req.sinks) ? fanOut(w.req.sinks, lists.get(ord) ?? [], w.req.eventType) : w.req.sinks

/** Whether a destination of a hook is an endpoint that orders by key (docs/delivery.md "Ordered delivery"); read only for hooks with a key. */
export const orderedFrom =
  (lists: ReadonlyMap<number, ReadonlyArray<Endpoint>>): OrderedOf =>
  (_w, ord, destination) => {
    const id = endpointIdOf(destination)
    return id !== undefined && lists.get(ord)?.find((e) => e.id === id)?.ordered !== undefined
  }
