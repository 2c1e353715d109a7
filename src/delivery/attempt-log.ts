/**
 * Recent attempts (docs/api.md "Endpoints", `GET …/endpoints/:id/deliveries`; a sink's only its
 * failures, for the Sinks page's last failure):
 * the outcome, status, latency and error of the last ATTEMPT_LOG_PER_DESTINATION calls of each of
 * at most ATTEMPT_LOG_DESTINATIONS destinations, newest first. Memory only: a restart starts empty.
 * The pipeline's calls record into it (calls.ts); the API reads it.
 */
import { Context, Layer } from "effect"

/** Attempts kept per destination. */
export const ATTEMPT_LOG_PER_DESTINATION = 100
/** Destinations with a log; past it the least recently written one is dropped. */
export const ATTEMPT_LOG_DESTINATIONS = 10_000

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
  readonly record: (destination: string, entry: AttemptEntry) => void
  /** Newest first, at most `limit`. */
  readonly recent: (destination: string, limit: number) => ReadonlyArray<AttemptEntry>
}

export class AttemptLog extends Context.Service<AttemptLog, AttemptLogShape>()("ankusa/AttemptLog") {}

export const make = (perDestination = ATTEMPT_LOG_PER_DESTINATION, destinations = ATTEMPT_LOG_DESTINATIONS): AttemptLogShape => {
  // A ring per destination; the Map's order is the write order (a write moves its key to the end).
  const rings = new Map<string, { readonly items: Array<AttemptEntry>; next: number }>()
  return {
    record: (destination, entry) => {
      let ring = rings.get(destination)
      if (ring === undefined) {
        if (rings.size >= destinations) rings.delete(rings.keys().next().value!)
        ring = { items: [], next: 0 }
      } else rings.delete(destination)
      rings.set(destination, ring)
      if (ring.items.length < perDestination) ring.items.push(entry)
      else ring.items[ring.next] = entry
      ring.next = (ring.next + 1) % perDestination
    },
    recent: (destination, limit) => {
      const ring = rings.get(destination)
      if (ring === undefined) return []
      const n = ring.items.length
      const out: Array<AttemptEntry> = []
      for (let k = 1; k <= Math.min(n, limit); k++) out.push(ring.items[(ring.next - k + n * 2) % n]!)
      return out
    }
  }
}

export const layer: Layer.Layer<AttemptLog> = Layer.sync(AttemptLog, () => make())
