/**
 * The pure steps of one Writer batch (TEN-1 §2, §3): group requests by idempotency key, then build
 * the hooks, their rows and dedupe records for the requests that are new. No I/O: the Writer
 * (writer.ts) reads what these need, and writes what they build.
 */
import { Effect, type Exit } from "effect"
import * as Dedupe from "../domain/dedupe.js"
import { validTenantId } from "../domain/tenants.js"
import { DEFAULT_TENANT, encodeEnvelope } from "../domain/envelope.js"
import * as HookId from "../domain/hook-id.js"
import { formatTraceparent } from "../domain/trace-context.js"
import * as Keys from "../domain/keys.js"
import type { Op } from "../domain/ops.js"
import { ingest, type Transition } from "../domain/deliveries.js"
import * as Ordering from "../domain/ordering.js"
import type { StoreShape } from "../store/store.js"
import type { IngestRequest, IngestResult, SubmitError } from "./writer.js"
import type { Held } from "./wake.js"

export interface Item {
  /** The request; replaced by `ANSWERED` once answered (see `answerItem`). */
  req: IngestRequest
  /** The answer callback; a no-op once called. */
  done: (exit: Exit.Exit<IngestResult, SubmitError>) => void
  readonly bytes: number
}

const ANSWERED: IngestRequest = {
  tenantId: null,
  sourceId: "",
  sinks: [],
  body: new Uint8Array(0),
  contentType: "",
  headers: {},
  idempotencyKey: null,
  archive: false
}
const answered = () => {}

/**
 * Answer an item, once: a second answer is ignored. The item drops its request and callback as it
 * answers, so whatever still points at it cannot keep the request's body and HTTP objects alive.
 * That matters to the young generation: a queue bucket or batch array that was promoted before it
 * died keeps its items reachable until the next full collection, and through their callbacks every
 * request and response of the batch. Measured under ingest-bench's load: 21% of each young
 * collection survived with the references kept, 1.5% with them dropped (docs/testing.md).
 */
export const answerItem = (it: Item, exit: Exit.Exit<IngestResult, SubmitError>): void => {
  const done = it.done
  it.done = answered
  it.req = ANSWERED
  done(exit)
}

/** The requests of a batch that share one hook: the first, and later ones with its idempotency key. */
export interface Owner {
  readonly items: Array<Item>
  readonly req: IngestRequest
  readonly tenant: string
}

/** Sinks of one hook at most (`sink::16`). */
export const MAX_SINKS = 0x1_0000

/** What the store could not key in a request (the edge validates first; this is the last fence). */
export const invalidity = (req: IngestRequest): string | undefined => {
  if (req.tenantId !== null && !validTenantId(req.tenantId)) return "tenant id"
  // Routes name at least one target (a hook whose targets all fan out to nothing gets its `?c` in `ingest`).
  if (req.sinks.length === 0) return "sinks (none)"
  if (req.sinks.length > MAX_SINKS) return `more than ${MAX_SINKS} sinks`
  if (req.idempotencyKey !== null && !Dedupe.validKey(req.idempotencyKey)) return "idempotency key"
  return undefined
}

const latin1 = (b: Uint8Array) => Keys.asBuffer(b).toString("latin1")

/** Requests sharing (tenant, key) in this batch share one owner; the keyed owners, for one multi-get of earlier hooks. */
export const ownersOf = (items: ReadonlyArray<Item>) => {
  const owners: Array<Owner> = []
  const keyed = new Map<string, { readonly owner: Owner; readonly key: Uint8Array }>()
  for (const it of items) {
    const tenant = it.req.tenantId ?? DEFAULT_TENANT
    if (it.req.idempotencyKey === null) {
      owners.push({ items: [it], req: it.req, tenant })
      continue
    }
    const key = Keys.dedupeKey(tenant, it.req.idempotencyKey)
    const seen = keyed.get(latin1(key))
    if (seen !== undefined) {
      seen.owner.items.push(it)
      continue
    }
    const owner: Owner = { items: [it], req: it.req, tenant }
    owners.push(owner)
    keyed.set(latin1(key), { owner, key })
  }
  return { owners, keyed: [...keyed.values()] }
}

export interface Built {
  readonly transitions: Array<Transition>
  /** The dedupe records of the keyed hooks. */
  readonly extra: Array<Op>
  readonly answers: Array<readonly [Owner, IngestResult]>
  /** Owners whose tenant got no ordinal (past `tenants.max`). */
  readonly refused: Array<Owner>
  /** Owners `admit` refused, with the quota it named. */
  readonly overQuota: Array<readonly [Owner, number]>
  readonly nextSeq: number
  /** Owners whose every row is held behind an open breaker (not hinted to the tick). */
  held?: Set<Owner>
  /** The ordered lanes that got waiting rows: the Queue gives each a head if it has none (after the write). */
  lanes?: Array<Keys.LaneRef>
}

/** Whether a destination of a hook of tenant `ord` orders by key: a route sink by the request, an endpoint by its own field. */
export type OrderedOf = (w: Owner, ord: number, destination: string) => boolean

/** Each destination's lane when the hook has an ordering key and the destination orders, else undefined. */
const lanesOf = (w: Owner, ord: number, sinks: ReadonlyArray<string>, ordered: OrderedOf | undefined): Array<number | undefined> | undefined => {
  const key = w.req.orderingKey
  if (key === undefined) return undefined
  let out: Array<number | undefined> | undefined
  for (let i = 0; i < sinks.length; i++) {
    const d = sinks[i]!
    if (w.req.orderedSinks?.has(d) === true || ordered?.(w, ord, d) === true) (out ??= sinks.map(() => undefined))[i] = Ordering.laneOf(d, key)
  }
  return out
}

/** Each destination's due time when any of them is held, else undefined (all due `now`). */
const heldAts = (sinks: ReadonlyArray<string>, held: Held, now: number): Array<number> | undefined => {
  let ats: Array<number> | undefined
  for (let i = 0; i < sinks.length; i++) {
    const until = held(sinks[i]!)
    if (until !== undefined) (ats ??= sinks.map(() => now))[i] = until
  }
  return ats
}

/** Admission's last word on a hook (TEN-2): undefined takes it; a number refuses it at that quota. */
export type Admit = (owner: Owner, ord: number, bytes: number) => number | undefined

/** A hook's destinations when its routes name `tenant-endpoints` (src/domain/fanout.ts); else its routes. */
export type FanOut = (owner: Owner, ord: number) => ReadonlyArray<string>

/** The hooks of the new owners, seqs from `nextSeq` on, received at `now`. */
export const buildHooks = (
  fresh: ReadonlyArray<Owner>,
  ords: ReadonlyMap<string, number>,
  at: {
    readonly nextSeq: number
    readonly node: string
    readonly now: number
    readonly dedupeWindowMs: number
    readonly admit?: Admit | undefined
    readonly fanOut?: FanOut | undefined
    /** The held destinations' due times (Wake `held`): undefined while none is held. */
    readonly held?: Held | undefined
    /** Endpoints that order (undefined: none does). */
    readonly ordered?: OrderedOf | undefined
  }
): Built => {
  let nextSeq = at.nextSeq
  const out: Built = { transitions: [], extra: [], answers: [], refused: [], overQuota: [], nextSeq }
  for (const w of fresh) {
    const ord = ords.get(w.tenant)
    if (ord === undefined) {
      out.refused.push(w)
      continue
    }
    const seq = nextSeq++
    const id = HookId.make(at.node, seq)
    const { req } = w
    const sinks = at.fanOut === undefined ? req.sinks : at.fanOut(w, ord)
    const envelope = encodeEnvelope({
      id,
      tenantId: req.tenantId,
      sourceId: req.sourceId,
      receivedAt: at.now,
      contentType: req.contentType,
      headers: req.headers,
      sinks,
      idempotencyKey: req.idempotencyKey,
      eventType: req.eventType,
      orderingKey: req.orderingKey,
      ...(req.trace === undefined ? {} : { traceparent: formatTraceparent(req.trace), tracestate: req.trace.traceState }),
      body: req.body
    })
    // The hook's rows' bytes, exactly as `ingest` counts them; a refused hook gives its seq back.
    const over = at.admit?.(w, ord, envelope.length * sinks.length)
    if (over !== undefined) {
      nextSeq--
      out.overQuota.push([w, over])
      continue
    }
    const ats = at.held === undefined ? undefined : heldAts(sinks, at.held, at.now)
    // Every row held: the tick has nothing of this hook to claim now (its markers find it at the probe).
    if (ats !== undefined && ats.every((t) => t > at.now)) (out.held ??= new Set()).add(w)
    const lanes = lanesOf(w, ord, sinks, at.ordered)
    if (lanes !== undefined) for (const lane of lanes) if (lane !== undefined) (out.lanes ??= []).push({ ord, lane })
    out.transitions.push(ingest({ seq, ord, envelope, sinkCount: sinks.length, at: at.now, ats, lanes, archive: req.archive }))
    if (req.idempotencyKey !== null) out.extra.push(...Dedupe.record(w.tenant, req.idempotencyKey, { seq, id, expiresAt: at.now + at.dedupeWindowMs }))
    out.answers.push([w, { id, seq, duplicate: false }])
  }
  return { ...out, nextSeq }
}

/** The tenant ids refused since an erase (TEN-5): one `?r` row each, read once at start. */
export const refusedTenants = (store: StoreShape) =>
  Effect.gen(function* () {
    const refused = new Set<string>()
    const range = Keys.familyDataRange(Keys.Families.erasures)
    let lo = range.lo
    for (;;) {
      const page = yield* store.scan("tenants", { lo, hi: range.hi }, { limit: 1_000 })
      for (const e of page) refused.add(Keys.decodeErasureKey(e.key))
      if (page.length < 1_000) return refused
      lo = Keys.keyAfter(page[page.length - 1]!.key)
    }
  })

/** The items whose tenant is refused (TEN-5), with it, and the rest. */
export const splitRefused = (items: ReadonlyArray<Item>, refused: ReadonlySet<string>): [ReadonlyArray<Item>, Array<readonly [Item, string]>] => {
  if (refused.size === 0) return [items, []]
  const kept: Array<Item> = []
  const out: Array<readonly [Item, string]> = []
  for (const it of items) {
    const tenant = it.req.tenantId ?? DEFAULT_TENANT
    if (refused.has(tenant)) out.push([it, tenant])
    else kept.push(it)
  }
  return [kept, out]
}

/** TEN-5: `ops` committed synced in the Writer's section, then the id refused (on) or accepted again; the cache forgets it. */
export const refusals =
  (section: <A, E, R>(e: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>, store: StoreShape, refused: Set<string>, cache: Map<string, number>) =>
  (on: boolean) =>
  (tenantId: string, ops: ReadonlyArray<Op>) =>
    section(
      Effect.tap(store.write(ops, { sync: true }), () =>
        Effect.sync(() => {
          if (on) refused.add(tenantId)
          else refused.delete(tenantId)
          cache.delete(tenantId)
        })
      )
    )
