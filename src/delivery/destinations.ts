/**
 * The pipeline's destinations (docs/delivery.md "Connections", "Tenant endpoints"): the configured
 * sinks by name, and the pools of tenant endpoints, opened on first use and bounded in number
 * (`endpoints.maxPools`, least recently used idle pool closed first). A destination is what a
 * row's envelope names by fan-out position: a sink name, or `endpoint:<id>` resolved against its
 * tenant's endpoints as the `Endpoints` service holds them (loaded once per tenant, dropped when
 * the service changes one). Owns every transport: closed when retired and idle, or at the end.
 * Owns the destinations' health (breaker, auto-disable clock): a pool's while it is open, kept
 * across a reload or an endpoint change that leaves the URL as it was, and remembered when an idle
 * pool closes (health.ts); a pool whose only tenants are parked behind an open breaker is idle.
 */
import { Effect } from "effect"
import { allowList } from "../domain/config-endpoints.js"
import { CONCURRENCY_DEFAULT, type Endpoint } from "../domain/endpoints.js"
import { endpointIdOf } from "../domain/fanout.js"
import * as Retry from "../domain/retry-schedule.js"
import { parseSecret } from "../domain/signature.js"
import { checkUrl, classify } from "../domain/ssrf.js"
import * as M from "../observability/delivery-metrics.js"
import type { Holds } from "../queue/wake.js"
import { DEFAULT_MAX_PAUSE_MS, maxWaitingOf, SINK_WAIT_FACTOR, type DispatchSinkOptions, type PipelineOptions } from "./options.js"
import { hold, makePlaces, type Places } from "./sink-places.js"
import { makeSinkPace } from "./sink-pace.js"
import { type Breaker, type BreakerSettings, makeBreaker, record } from "./breaker.js"
import { type DestinationDeps, ENDPOINT_TENANTS_HELD, ENDPOINT_TIMEOUT_MS, ENDPOINTS_LABEL, type Job, type Resolved, type Sink, type WithBreaker } from "./destination.js"
import { type Failing, type Health, makeRemembered } from "./health.js"
import { makeTenantQueue } from "./sink-queue.js"
import * as SinkClient from "./sink-client.js"

export { ENDPOINT_TENANTS_HELD, ENDPOINT_TIMEOUT_MS, ENDPOINTS_LABEL } from "./destination.js"
export type { DestinationDeps, Job, Resolved, Sink, WithBreaker } from "./destination.js"

/** Over 80 lines because its parts share the sinks, the pools and the tenants' endpoints as closures; each is a named function. */
export const makeDestinations = (o: PipelineOptions, context: Parameters<typeof M.latencyRecorder>[1], deps: DestinationDeps) => {
  const sinks = new Map<string, Sink>()
  /** Endpoint pools by destination name, least recently used first. */
  const pools = new Map<string, Sink>()
  const poolsGauge = M.endpointPoolsRecorder(context)
  // Retired with calls still on the wire: closed at the end if they are still open then.
  const retiring = new Set<Sink>()
  /** Each tenant's endpoints by id, as last read. */
  const held = new Map<number, ReadonlyMap<string, Endpoint>>()
  const loading = new Set<number>()
  /** Tenants whose endpoints arrived (their refused rows are read again), and tenants refused for want of a pool. */
  let ready: Array<number> = []
  let waitingForPool = new Set<number>()
  const remembered = makeRemembered()

  const open = (
    s: DispatchSinkOptions,
    version?: number,
    refusal?: string,
    settings?: object,
    previous?: Sink["previous"],
    inherited?: { readonly breaker: Breaker; readonly failing: Failing }
  ): Sink => {
    const label = endpointIdOf(s.name) === undefined ? s.name : ENDPOINTS_LABEL
    return {
      options: s,
      key: s.secret === undefined ? undefined : parseSecret(s.secret),
      transport: SinkClient.transport(s),
      waiting: makeTenantQueue<Job>(),
      running: 0,
      places: makePlaces(s.concurrency, maxWaitingOf(s)),
      breaker: inherited?.breaker ?? makeBreaker(deps.breaker()),
      failing: inherited?.failing ?? { since: undefined, disabling: false },
      maxPauseMs: s.maxPauseMs ?? DEFAULT_MAX_PAUSE_MS,
      latency: M.latencyRecorder(label, context),
      pace: makeSinkPace(s.ratePerSec ?? 0),
      timer: undefined,
      throttled: { rate: M.sinkThrottledRecorder(label, "rate", context), retry_after: M.sinkThrottledRecorder(label, "retry_after", context) },
      retired: false,
      version,
      settings,
      refusal,
      previous
    }
  }
  for (const s of o.sinks) sinks.set(s.name, open(s))

  const close = (sink: Sink) => {
    if (sink.timer !== undefined) clearTimeout(sink.timer)
    sink.timer = undefined
    SinkClient.close(sink.transport)
    retiring.delete(sink)
  }

  /** Take `sink` out of service: closed now when idle, else when its last call ends. */
  const retire = (sink: Sink) => {
    sink.retired = true
    if (sink.running === 0) close(sink)
    else retiring.add(sink)
  }

  /** Nothing held, called or waiting, and no tenant parked but behind an open breaker (its health is remembered when it closes). */
  const idle = (sink: Sink) =>
    sink.places.held === 0 && sink.running === 0 && sink.waiting.size() === 0 && (sink.places.parked.size === 0 || sink.breaker.state === "open")

  const healthOf = (sink: Sink): Health => ({ url: sink.options.url, breaker: sink.breaker, failing: sink.failing })

  /** Close an idle pool to make room: its health is remembered, its parked tenants go back to the round. */
  const evict = (victim: Sink) => {
    pools.delete(victim.options.name)
    remembered.keep(victim.options.name, healthOf(victim))
    if (victim.places.parked.size > 0) deps.orphan(victim.places)
    retire(victim)
  }

  const load = (ord: number) => {
    if (deps.endpoints === undefined || loading.has(ord)) return
    loading.add(ord)
    const endpoints = deps.endpoints
    deps.fork(
      endpoints.ofTenant(ord).pipe(
        Effect.map((list) => {
          if (held.size >= ENDPOINT_TENANTS_HELD) held.clear()
          held.set(ord, new Map(list.map((e) => [e.id, e])))
        }),
        Effect.ignore,
        // Read or not (a store error is tried again at its next row), its refused rows are read again.
        Effect.ensuring(Effect.sync(() => {
          loading.delete(ord)
          ready.push(ord)
        }))
      )
    )
  }

  /** The options a tenant endpoint is called with, and the SSRF guard of the configuration in force. */
  const endpointOptions = (name: string, e: Endpoint): { readonly options: DispatchSinkOptions; readonly refusal: string | undefined } => {
    const s = deps.settings()
    const allow = allowList(s.allowNetworks)
    const url = checkUrl(e.url, { allow, httpsOnly: s.httpsOnly })
    const guard = (address: string) => {
      const v = classify(address, allow)
      return v.ok ? undefined : v.reason
    }
    return {
      options: {
        name,
        url: e.url,
        timeoutMs: ENDPOINT_TIMEOUT_MS,
        headers: e.headers,
        secret: e.secret,
        concurrency: e.concurrency,
        ratePerSec: e.ratePerSec,
        retry: Retry.defaultSchedule,
        guard,
        ordered: e.ordered
      },
      refusal: url.ok ? undefined : `unsafe_url: ${url.message}`
    }
  }

  /**
   * An endpoint's pool: the open one if it is of this version, else a new one (an idle least
   * recently used pool closed to make room) with the health of the same URL: the replaced pool's,
   * or what a closed pool left. No pool opens for an endpoint whose remembered breaker is open.
   */
  const poolOf = (name: string, e: Endpoint, ord: number): Resolved => {
    const found = pools.get(name)
    // A reload may change the guard's allow list: a pool opened under other settings is opened again.
    if (found !== undefined && found.version === e.updatedAt && found.settings === deps.settings()) {
      pools.delete(name)
      pools.set(name, found)
      return { _tag: "open", sink: found }
    }
    const h = found === undefined ? remembered.get(name) : healthOf(found)
    const kept = h !== undefined && h.url === e.url ? h : undefined
    if (found === undefined && kept !== undefined && kept.breaker.state === "open" && deps.now() < kept.breaker.openUntil) {
      return { _tag: "held", until: kept.breaker.openUntil }
    }
    // Disabled by the system and enabled since: its failing time starts over.
    if (kept !== undefined && kept.failing.disabling) {
      kept.failing.since = undefined
      kept.failing.disabling = false
    }
    if (found === undefined && pools.size >= deps.settings().maxPools) {
      let victim: Sink | undefined
      for (const p of pools.values()) if (idle(p)) {
        victim = p
        break
      }
      if (victim === undefined) {
        waitingForPool.add(ord)
        return { _tag: "full" }
      }
      evict(victim)
    }
    if (found === undefined && h !== undefined) remembered.forget(name)
    const { options, refusal } = endpointOptions(name, e)
    const prev = e.previousSecret === undefined ? undefined : parseSecret(e.previousSecret.secret)
    const sink = open(options, e.updatedAt, refusal, deps.settings(), prev === undefined ? undefined : { key: prev, until: e.previousSecret!.until }, kept)
    pools.set(name, sink)
    poolsGauge(pools.size)
    // Changed (URL, secret, headers, bounds): its waiting rows and their places move to the new pool.
    if (found !== undefined) handOver(found, sink)
    return { _tag: "open", sink }
  }

  const resolve = (name: string | undefined, ord: number): Resolved | undefined => {
    if (name === undefined) return undefined
    const id = endpointIdOf(name)
    if (id === undefined) {
      const sink = sinks.get(name)
      return sink === undefined ? { _tag: "gone", reason: "sink removed: no sink of that name is configured" } : { _tag: "open", sink }
    }
    if (deps.endpoints === undefined) return { _tag: "gone", reason: "endpoint unknown: this node has no tenant endpoints" }
    const list = held.get(ord)
    if (list === undefined) {
      load(ord)
      return { _tag: "loading" }
    }
    const e = list.get(id)
    if (e === undefined) return gone(name, "endpoint deleted")
    if (e.disabled) return gone(name, `endpoint disabled${e.disabledReason === null ? "" : `: ${e.disabledReason}`}`)
    return poolOf(name, e, ord)
  }

  /** A deleted or disabled endpoint: nothing of its health is remembered, and its failing time starts over. */
  const gone = (name: string, reason: string): Resolved => {
    remembered.forget(name)
    const p = pools.get(name)
    if (p !== undefined) {
      p.failing.since = undefined
      p.failing.disabling = false
    }
    return { _tag: "gone", reason }
  }

  // A change to a tenant's endpoints: read again at its next row (its pools reopen if the endpoint changed).
  deps.endpoints?.onChange((ord) => {
    held.delete(ord)
  })

  const unopenedRoom = (): number => {
    if (deps.endpoints === undefined) return 0
    let free = Math.max(0, deps.settings().maxPools - pools.size)
    for (const p of pools.values()) if (idle(p)) free++
    return free
  }
  /** `unopenedRoom() > 0`, without walking the pools while fewer than `maxPools` are open (a visit asks it, a refused row too). */
  const anyUnopened = (): boolean => {
    if (deps.endpoints === undefined) return false
    if (deps.settings().maxPools > pools.size) return true
    for (const p of pools.values()) if (idle(p)) return true
    return false
  }

  /** Move a sink's waiting rows (with their places) and parked tenants to the sink replacing it. */
  const handOver = (old: Sink, sink: Sink) => {
    for (let job = old.waiting.shift(); job !== undefined; job = old.waiting.shift()) {
      const t = job.claimed.ref.ord
      hold(old.places, t, -1)
      hold(sink.places, t, 1)
      sink.waiting.push(t, job)
    }
    for (const [t, at] of old.places.parked) sink.places.parked.set(t, at)
    old.places.parked.clear()
    retire(old)
  }

  /**
   * A reload's sinks (docs/configuration.md "Reloading"): an added one gets its pool, a changed one
   * a new pool its waiting rows move to (calls on the wire finish on the old one, which then
   * closes), a removed one's waiting rows and parked tenants go to `deadLetter` and `orphan`.
   */
  const reconfigure = (
    next: ReadonlyArray<DispatchSinkOptions>,
    on: { readonly pump: (sink: Sink) => void; readonly deadLetter: (job: Job) => void; readonly orphan: (places: Places) => void }
  ): void => {
    const names = new Set(next.map((s) => s.name))
    for (const s of next) {
      const old = sinks.get(s.name)
      if (old !== undefined && JSON.stringify(old.options) === JSON.stringify(s)) continue
      // A changed secret: the old one signs beside the new for `endpoints.rotationOverlapMs` (memory only).
      const rotated = old?.key !== undefined && old.options.secret !== s.secret ? { key: old.key, until: Date.now() + deps.settings().rotationOverlapMs } : old?.previous
      const sink = open(s, undefined, undefined, undefined, rotated, old !== undefined && old.options.url === s.url ? old : undefined)
      sinks.set(s.name, sink)
      if (old === undefined) continue
      handOver(old, sink)
      on.pump(sink)
    }
    for (const [name, old] of sinks) {
      if (names.has(name)) continue
      sinks.delete(name)
      for (let job = old.waiting.shift(); job !== undefined; job = old.waiting.shift()) {
        hold(old.places, job.claimed.ref.ord, -1)
        on.deadLetter(job)
      }
      on.orphan(old.places)
      retire(old)
    }
  }

  // The latest probe time of any trip: until then the Writer asks `holds` about each hook's destinations.
  let heldThrough = 0
  /** A call's outcome for its breaker (breaker.ts `record`): true on a trip, which holds the destination's new rows until its probe. */
  const recordCall = (sink: Sink, settings: BreakerSettings, status: number, probe: boolean, at: number): boolean => {
    const tripped = record(sink.breaker, settings, status, probe, at)
    if (tripped) heldThrough = Math.max(heldThrough, sink.breaker.openUntil)
    return tripped
  }
  /** The breakers as the Writer sees them (Wake `holdBy`): an open destination's new rows are due at its probe, not claimed and deferred. */
  const holds: Holds = {
    through: () => heldThrough,
    until: (name, now) => {
      const b = (sinks.get(name) ?? pools.get(name) ?? remembered.peek(name))?.breaker
      return b !== undefined && b.state === "open" && now < b.openUntil ? b.openUntil : undefined
    }
  }
  return {
    sinks,
    pools,
    record: recordCall,
    holds,
    reconfigure,
    open,
    close,
    retire,
    resolve,
    /** Every destination that may hold rows: the sinks, then the endpoint pools. */
    all: (): Array<Sink> => [...sinks.values(), ...pools.values()],
    /** Every breaker known: the destinations', then those remembered without a pool. */
    breakers: (): Array<WithBreaker> => {
      const out: Array<WithBreaker> = [...sinks.values(), ...pools.values()]
      for (const [name, h] of remembered.entries()) if (!pools.has(name)) out.push({ options: { name }, breaker: h.breaker })
      return out
    },
    /** Tenants to read again: their endpoints arrived, or a pool became free. Cleared by the call. */
    takeReady: (): Array<number> => {
      const out = ready
      ready = []
      if (waitingForPool.size > 0 && pools.size < deps.settings().maxPools) {
        out.push(...waitingForPool)
        waitingForPool = new Set()
      } else if (waitingForPool.size > 0) {
        for (const p of pools.values()) if (idle(p)) {
          out.push(...waitingForPool)
          waitingForPool = new Set()
          break
        }
      }
      return out
    },
    /** The tenants parked on any destination, and `more`, each with the lowest `at` refused. */
    parkedTenants: (more: Iterable<readonly [number, number]>): Map<number, number> => {
      const out = new Map(more)
      for (const s of [...sinks.values(), ...pools.values()]) {
        for (const [ord, at] of s.places.parked) {
          const was = out.get(ord)
          if (was === undefined || at < was) out.set(ord, at)
        }
      }
      return out
    },
    /** Pools a claim could still open (an idle pool can be replaced). */
    unopenedRoom,
    /** Those places counted at an endpoint's default bounds (its concurrency and wait bound). */
    unopenedPlaces: (): number => unopenedRoom() * CONCURRENCY_DEFAULT * (1 + SINK_WAIT_FACTOR),
    anyUnopened,
    closeAll: () => {
      for (const sink of [...sinks.values(), ...pools.values(), ...retiring]) close(sink)
    }
  }
}

export type Destinations = ReturnType<typeof makeDestinations>
