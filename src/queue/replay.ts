/**
 * Replay (`POST /v1/dlq/replay`): revive dead rows as first attempts due now,
 * filtered by tenant, source, dead-letter time range, hook and destination, in bounded
 * synced chunks (product.md "Admin"; TEN-1 §6). Each chunk re-reads its rows
 * under the tenant's lock (`Queue.withTenant`), so a row purged or revived
 * meanwhile is never counted twice. Idempotent: a revived row is no longer
 * dead, so a request stopped by a bound resumes by being sent again.
 */
import { Clock, Context, Effect, Layer } from "effect"
import * as Deliveries from "../domain/deliveries.js"
import * as K from "../domain/keys.js"
import * as Ordering from "../domain/ordering.js"
import { Queue } from "./queue.js"
import { type Range, Store, type StoreError } from "../store/store.js"

export interface ReplayFilter {
  /** Tenants whose dead rows to revive; undefined: every tenant (global tokens only). */
  readonly ords?: ReadonlyArray<number> | undefined
  readonly sourceId?: string | undefined
  /** Dead-letter time bounds, inclusive (ms since the epoch). */
  readonly fromAt?: number | undefined
  readonly toAt?: number | undefined
  /** Only rows of these hooks (by seq). */
  readonly seqs?: ReadonlySet<number> | undefined
  /** Only rows for this destination (a sink's name, or `endpoint:<id>`): each candidate's hook is read for its sinks. */
  readonly destination?: string | undefined
}

export interface ReplayLimits {
  /** Dead rows read (and revived) per synced batch. */
  readonly chunk: number
  /** Rows revived by one call at most. */
  readonly maxRevived: number
  /** Dead rows examined by one call at most. */
  readonly maxScanned: number
}

export const Defaults: ReplayLimits = { chunk: 500, maxRevived: 100_000, maxScanned: 1_000_000 }

export interface ReplayResult {
  readonly revived: number
  readonly scanned: number
  /** false when a limit stopped the call before the filter's rows were all examined: send it again. */
  readonly done: boolean
}

export interface ReplayShape {
  readonly replay: (filter: ReplayFilter, limits?: Partial<ReplayLimits>) => Effect.Effect<ReplayResult, StoreError>
}

export class Replay extends Context.Service<Replay, ReplayShape>()("ankusa/Replay") {}

interface Candidate {
  readonly ref: K.DeadRef
  readonly deadKey: Uint8Array
}

export const make = Effect.gen(function* () {
  const store = yield* Store
  const queue = yield* Queue

  const matches = (f: ReplayFilter, v: K.DeadValue, ref: K.DeadRef): boolean =>
    (f.sourceId === undefined || v.sourceId === f.sourceId) && (f.seqs === undefined || f.seqs.has(ref.seq))

  /** Under the tenant's lock: re-read the rows, revive those still dead and still matching, one synced batch. */
  const reviveAll = (ord: number, candidates: ReadonlyArray<Candidate>, f: ReplayFilter, now: number) =>
    queue.withTenant(
      ord,
      Effect.gen(function* () {
        if (candidates.length === 0) return 0
        const values = yield* store.multiGet("index", candidates.map((c) => c.deadKey))
        const laned = new Set<Candidate>()
        const live = candidates.filter((c, i) => {
          const raw = values[i]
          if (raw === undefined) return false
          const v = K.decodeDeadValue(raw)
          if (v.lane !== undefined) laned.add(c)
          return v.ord === ord && matches(f, v, c.ref)
        })
        // The hooks are read only when a filter or a lane needs them (docs/delivery.md "Ordered delivery").
        const needed = f.destination !== undefined ? live : live.filter((c) => laned.has(c))
        const envs = needed.length === 0 ? new Map() : yield* queue.envelopes([...new Set(needed.map((c) => c.ref.seq))])
        if (f.destination !== undefined && live.length > 0) {
          const wanted = live.filter((c) => envs.get(c.ref.seq)?.sinks[c.ref.sink] === f.destination)
          live.splice(0, live.length, ...wanted)
        }
        if (live.length === 0) return 0
        const rows = yield* store.multiGet("deliveries", live.map((c) => K.deliveryKey(c.ref.seq, c.ref.sink)))
        const plain: Array<Deliveries.Transition> = []
        const lanes: Array<{ readonly ref: K.DeadRef; readonly ord: number; readonly lane: number; readonly size: number }> = []
        live.forEach((c, i) => {
          const size = Deliveries.decodeRow(rows[i])?.size ?? 0
          const env = laned.has(c) ? envs.get(c.ref.seq) : undefined
          const lane = env?.orderingKey === undefined ? undefined : Ordering.laneOf(env.sinks[c.ref.sink] ?? "", env.orderingKey)
          if (lane === undefined) plain.push(Deliveries.revive(c.ref, ord, size, now))
          else lanes.push({ ref: c.ref, ord, lane, size })
        })
        if (lanes.length === 0) yield* store.write(Deliveries.batch(plain), { sync: true })
        else yield* queue.lanes.revive(lanes, plain, now)
        return live.length
      })
    )

  /** One range in chunks; `pick` turns a page into candidates by tenant. */
  const walk = (
    range: Range,
    f: ReplayFilter,
    l: ReplayLimits,
    budget: { revived: number; scanned: number },
    pick: (page: ReadonlyArray<{ readonly key: Uint8Array; readonly value: Uint8Array }>) => Map<number, Array<Candidate>>
  ) =>
    Effect.gen(function* () {
      let lo = range.lo
      for (;;) {
        const want = Math.min(l.chunk, l.maxScanned - budget.scanned, l.maxRevived - budget.revived)
        if (want <= 0) return false
        const page = yield* store.scan("index", { lo, hi: range.hi }, { limit: want })
        budget.scanned += page.length
        const now = yield* Clock.currentTimeMillis
        for (const [ord, candidates] of pick(page)) budget.revived += yield* reviveAll(ord, candidates, f, now)
        if (page.length < want) return true
        lo = K.keyAfter(page[page.length - 1]!.key)
      }
    })

  const replay: ReplayShape["replay"] = (f, limits) =>
    Effect.gen(function* () {
      const l = { ...Defaults, ...limits }
      const budget = { revived: 0, scanned: 0 }
      let done = true
      if (f.ords !== undefined) {
        // Per tenant: one `?X` range each, joined to `?x` for source and id (TEN-1 §6).
        for (const ord of new Set(f.ords)) {
          const complete = yield* walk(Deliveries.tenantDeadRangeBetween(ord, f.fromAt, f.toAt), f, l, budget, (page) =>
            new Map([[ord, page.map((e) => Deliveries.deadKeyOfByTenant(e.key))]])
          )
          if (!complete) {
            done = false
            break
          }
        }
      } else {
        // Node-wide: the global `?x` range in time order; its values name the tenant.
        const all = K.familyDataRange(K.Families.dead)
        const range: Range = {
          lo: f.fromAt === undefined ? all.lo : K.deadKey(f.fromAt, 0, 0),
          hi: f.toAt === undefined ? all.hi : K.deadKey(f.toAt + 1, 0, 0)
        }
        done = yield* walk(range, f, l, budget, (page) => {
          const byOrd = new Map<number, Array<Candidate>>()
          for (const e of page) {
            const ref = K.decodeDeadKey(e.key)
            const v = K.decodeDeadValue(e.value)
            // A format 2 value has no ord: only the migration leaves none, and it runs before serving.
            if (v.ord === undefined || !matches(f, v, ref)) continue
            const list = byOrd.get(v.ord) ?? []
            list.push({ ref, deadKey: e.key })
            byOrd.set(v.ord, list)
          }
          return byOrd
        })
      }
      return { revived: budget.revived, scanned: budget.scanned, done }
    })

  return { replay } satisfies ReplayShape
})

export const layer: Layer.Layer<Replay, never, Store | Queue> = Layer.effect(Replay, make)
