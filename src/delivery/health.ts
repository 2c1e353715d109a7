/**
 * The health of tenant endpoints that have no pool open (docs/delivery.md "Failing destinations"):
 * a pool closed under `endpoints.maxPools` leaves its breaker and its auto-disable clock here, by
 * destination name with the URL they were counted for, and a pool opened again for that URL takes
 * them back (another URL starts over). Bounded by BREAKERS_REMEMBERED entries: past it the least
 * recently used entry with a closed breaker goes first, then the least recently used open one.
 */
import type { Breaker } from "./breaker.js"

/** Destinations without a pool whose breaker or auto-disable clock is remembered. */
export const BREAKERS_REMEMBERED = 16_384

/** A tenant endpoint's first failure since its last success (auto-disable), and whether it is being disabled. */
export interface Failing {
  since: number | undefined
  disabling: boolean
}

export interface Health {
  readonly url: string
  readonly breaker: Breaker
  readonly failing: Failing
}

export const makeRemembered = (max: number = BREAKERS_REMEMBERED) => {
  // Each in least recently used order; an entry's breaker cannot change state without a pool.
  const closed = new Map<string, Health>()
  const open = new Map<string, Health>()
  const forget = (name: string): void => {
    if (!closed.delete(name)) open.delete(name)
  }
  const peek = (name: string): Health | undefined => open.get(name) ?? closed.get(name)
  return {
    /** A pool closed: its health is kept when there is something to keep (a breaker not closed, a failing clock). */
    keep: (name: string, h: Health): void => {
      forget(name)
      if (h.breaker.state === "closed" && h.failing.since === undefined) return
      if (closed.size + open.size >= max) {
        const from = closed.size > 0 ? closed : open
        from.delete(from.keys().next().value!)
      }
      ;(h.breaker.state === "closed" ? closed : open).set(name, h)
    },
    /** Without touching its place in the order (the Writer's look-ups). */
    peek,
    /** Looked up for a row: the most recently used now. */
    get: (name: string): Health | undefined => {
      const h = peek(name)
      if (h === undefined) return undefined
      const from = h.breaker.state === "closed" ? closed : open
      from.delete(name)
      from.set(name, h)
      return h
    },
    forget,
    size: (): number => closed.size + open.size,
    entries: (): Array<readonly [string, Health]> => [...open, ...closed]
  }
}

export type Remembered = ReturnType<typeof makeRemembered>
