/**
 * Recent attempts (docs/api.md "Endpoints", `GET …/endpoints/:id/deliveries`; a sink's only its
 * failures, for the Sinks page's last failure): the outcome, status, latency and error of the last
 * ATTEMPT_LOG_PER_DESTINATION calls of each destination, newest first. Memory only: a restart
 * starts empty. Bounded in bytes (ATTEMPT_LOG_MAX_BYTES, each entry counted with its strings) and
 * in destinations (ATTEMPT_LOG_DESTINATIONS): past either, the least recently written destination's
 * log goes first. A tenant endpoint's log goes when the endpoint is deleted or disabled (the
 * `Endpoints` service's change, where the node has one). The pipeline's calls record into it
 * (calls.ts); the API reads it.
 */
import { Context, Effect, Layer } from "effect"
import { endpointDestination } from "../domain/fanout.js"
import { Endpoints } from "../queue/endpoints.js"

/** Attempts kept per destination. */
export const ATTEMPT_LOG_PER_DESTINATION = 100
/** Destinations with a log; past it the least recently written one is dropped. */
export const ATTEMPT_LOG_DESTINATIONS = 10_000
/** Bytes the log holds at most (entries with their strings, as `entryBytes` counts them). */
export const ATTEMPT_LOG_MAX_BYTES = 32 * 1024 * 1024
/** An entry's own fields and the slot it takes, besides its strings. */
export const ENTRY_OVERHEAD_BYTES = 96

export interface AttemptEntry {
  /** Epoch ms at the attempt's end. */
  readonly at: number
  readonly hookId: string
  /** 0 for a timeout or a transport error. */
  readonly status: number
  readonly latencyMs: number
  readonly outcome: "delivered" | "failed"
  /** `timeout`, `transport` or the client's reason; null for an answer. */
  readonly error: string | null
  /** A non-2xx answer's first bytes of body (at most EXCERPT_BYTES, 4 KiB); null otherwise. */
  readonly body: string | null
}

export interface AttemptLogShape {
  /** `ord`: the tenant of a tenant endpoint's attempt (its log is dropped with the endpoint). */
  readonly record: (destination: string, entry: AttemptEntry, ord?: number) => void
  /** Newest first, at most `limit`. */
  readonly recent: (destination: string, limit: number) => ReadonlyArray<AttemptEntry>
  /** Drop a destination's log (an endpoint deleted or disabled, a sink removed). */
  readonly forget: (destination: string) => void
  /** Of tenant `ord`'s logs, keep only those `keep` names. */
  readonly forgetOf: (ord: number, keep: (destination: string) => boolean) => void
  /** Bytes held now, as counted against ATTEMPT_LOG_MAX_BYTES. */
  readonly bytes: () => number
}

export class AttemptLog extends Context.Service<AttemptLog, AttemptLogShape>()("ankusa/AttemptLog") {}

/** What an entry holds: its strings at two bytes a character (V8's two-byte strings at worst) and its overhead. */
export const entryBytes = (e: AttemptEntry): number => ENTRY_OVERHEAD_BYTES + 2 * (e.hookId.length + (e.error?.length ?? 0) + (e.body?.length ?? 0))

interface Ring {
  readonly items: Array<AttemptEntry>
  next: number
  bytes: number
  readonly ord: number | undefined
}

export const make = (perDestination = ATTEMPT_LOG_PER_DESTINATION, destinations = ATTEMPT_LOG_DESTINATIONS, maxBytes = ATTEMPT_LOG_MAX_BYTES): AttemptLogShape => {
  // A ring per destination; the Map's order is the write order (a write moves its key to the end).
  const rings = new Map<string, Ring>()
  /** Each tenant's endpoint destinations with a log. */
  const byTenant = new Map<number, Set<string>>()
  let total = 0

  const forget = (destination: string) => {
    const ring = rings.get(destination)
    if (ring === undefined) return
    rings.delete(destination)
    total -= ring.bytes
    if (ring.ord === undefined) return
    const names = byTenant.get(ring.ord)
    names?.delete(destination)
    if (names?.size === 0) byTenant.delete(ring.ord)
  }

  return {
    record: (destination, entry, ord) => {
      let ring = rings.get(destination)
      if (ring === undefined) {
        ring = { items: [], next: 0, bytes: 0, ord }
        if (ord !== undefined) {
          const names = byTenant.get(ord) ?? new Set()
          byTenant.set(ord, names.add(destination))
        }
      } else rings.delete(destination)
      rings.set(destination, ring)
      const size = entryBytes(entry)
      const replaced = ring.items.length < perDestination ? undefined : ring.items[ring.next]
      if (replaced === undefined) ring.items.push(entry)
      else ring.items[ring.next] = entry
      const delta = size - (replaced === undefined ? 0 : entryBytes(replaced))
      ring.bytes += delta
      total += delta
      ring.next = (ring.next + 1) % perDestination
      // The least recently written logs go first; the one just written stays, whatever its size.
      while ((total > maxBytes || rings.size > destinations) && rings.size > 1) forget(rings.keys().next().value!)
    },
    recent: (destination, limit) => {
      const ring = rings.get(destination)
      if (ring === undefined) return []
      const n = ring.items.length
      const out: Array<AttemptEntry> = []
      for (let k = 1; k <= Math.min(n, limit); k++) out.push(ring.items[(ring.next - k + n * 2) % n]!)
      return out
    },
    forget,
    forgetOf: (ord, keep) => {
      const names = byTenant.get(ord)
      if (names === undefined) return
      for (const name of [...names]) if (!keep(name)) forget(name)
    },
    bytes: () => total
  }
}

/** The log, and where the node has tenant endpoints, a change to a tenant's endpoints drops the logs of those deleted or disabled. */
export const layer: Layer.Layer<AttemptLog> = Layer.effect(
  AttemptLog,
  Effect.gen(function* () {
    const log = make()
    const endpoints = yield* Effect.serviceOption(Endpoints)
    if (endpoints._tag === "Some") {
      const service = endpoints.value
      service.onChange((ord) => {
        // The service's own write updated its cache before it tells its listeners.
        const list = service.cached(ord)
        if (list === undefined) return
        const live = new Set(list.filter((e) => !e.disabled).map((e) => endpointDestination(e.id)))
        log.forgetOf(ord, (name) => live.has(name))
      })
    }
    return log
  })
)
