/**
 * Big format 3 stores, built fast: hooks written through the real transitions
 * (`Deliveries.ingest`, `claim`, `retry`, `deadLetter`) and the real ordinal
 * allocation ops, in large unsynced batches straight into the Store (no HTTP,
 * no Writer). Counters, markers and every index row are exactly what the node
 * would have written, so `checkStore` passes on the result.
 *
 * A builder keeps its next seq and next ordinal, so a bench can grow one store
 * between measurements (10³ rows, then 10⁴, …) instead of building each size.
 */
import { Effect } from "effect"
import * as Deliveries from "../../src/domain/deliveries.js"
import { encodeEnvelope } from "../../src/domain/envelope.js"
import * as K from "../../src/domain/keys.js"
import { type Op, put } from "../../src/domain/ops.js"
import * as Tenants from "../../src/domain/tenants.js"
import type { StoreError, StoreShape } from "../../src/store/store.js"

/** Hooks per unsynced build batch: large enough to amortize a commit, small enough to keep a batch a few MiB. */
export const BUILD_BATCH_HOOKS = 4_000
/** Where "scheduled far ahead" rows are due: a day after the build. */
export const FAR_AHEAD_MS = 24 * 3_600_000

export type Fate =
  /** Due at its `at` (kind 0): what the dispatch tick and the gauges look at. */
  | "due"
  /** Failed once and scheduled far ahead (kind 1): its marker is in the future, so no tick visits it. */
  | "scheduled"
  /** Dead-lettered: `?x`/`?X`, no marker. */
  | "dead"

export interface HookSpec {
  readonly ord: number
  readonly at: number
  readonly fate: Fate
}

export interface BuilderOptions {
  /** Sink names of every hook (one delivery row each). */
  readonly sinks?: ReadonlyArray<string>
  /** Body bytes of every hook. */
  readonly bodyBytes?: number
  readonly sourceId?: string
}

/** A due row as written: its key fields and its size (the envelope's); every bench row is a first attempt. */
export type DueRow = Omit<Deliveries.DueRow, "kind">

export const tenantName = (ord: number): string => `tenant-${ord}`

export interface Builder {
  readonly store: StoreShape
  /** Allocate tenants up to (and including) ordinal `ord`. */
  readonly ensureTenants: (ord: number) => Effect.Effect<void, StoreError>
  /**
   * Write hooks (allocating their tenants first when needed), BUILD_BATCH_HOOKS per unsynced batch.
   * `refs`, when given, receives every due row written (a load loop claims and restores them).
   */
  readonly add: (hooks: Iterable<HookSpec>, refs?: Array<DueRow>) => Effect.Effect<number, StoreError>
  readonly nextOrd: () => number
  readonly nextSeq: () => number
  /** Delivery rows written so far. */
  readonly rows: () => number
}

export const builder = (store: StoreShape, options: BuilderOptions = {}): Effect.Effect<Builder, StoreError> =>
  Effect.gen(function* () {
    const sinks = options.sinks ?? ["sink-0"]
    const body = Buffer.alloc(options.bodyBytes ?? 64, 0x61)
    const sourceId = options.sourceId ?? "bench"
    let nextOrd = Tenants.nextOrdOf(yield* store.get("default", K.Meta.nextOrd))
    const seqRaw = yield* store.get("default", K.Meta.nextSeq)
    let nextSeq = seqRaw === undefined ? 1 : K.readU64(seqRaw, 0)
    let rows = 0

    // One envelope per tenant (its id names the tenant, not the hook): encoding one per hook
    // would cost more than the rest of the build. Delivery and recovery never look at the id.
    const envelopes = new Map<number, Uint8Array>()
    const envelope = (ord: number) => {
      let env = envelopes.get(ord)
      if (env === undefined) {
        env = encodeEnvelope({
          id: `h_bench_tenant_${ord}`,
          tenantId: tenantName(ord),
          sourceId,
          receivedAt: 0,
          contentType: "application/json",
          headers: {},
          sinks,
          idempotencyKey: null,
          body
        })
        envelopes.set(ord, env)
      }
      return env
    }

    const allocations = (upTo: number): Array<Op> => {
      const ops: Array<Op> = []
      while (nextOrd <= upTo) {
        ops.push(...Tenants.allocate(tenantName(nextOrd), nextOrd))
        nextOrd++
      }
      if (ops.length > 0) ops.push(Tenants.nextOrdOp(nextOrd))
      return ops
    }

    /** The hook's transitions, and the size each of its delivery rows counts. */
    const transitions = (h: HookSpec, seq: number): { readonly ts: Array<Deliveries.Transition>; readonly size: number } => {
      if (h.fate === "due") {
        const env = envelope(h.ord)
        return { ts: [Deliveries.ingest({ seq, ord: h.ord, envelope: env, sinkCount: sinks.length, at: h.at, archive: false })], size: env.length }
      }
      // Ingested at the far-ahead time (so its marker is in the future), claimed, then retried or dead-lettered.
      const far = h.at + FAR_AHEAD_MS
      const env = envelope(h.ord)
      const ts = [Deliveries.ingest({ seq, ord: h.ord, envelope: env, sinkCount: sinks.length, at: far, archive: false })]
      for (let sink = 0; sink < sinks.length; sink++) {
        const ref = { ord: h.ord, seq, sink }
        ts.push(Deliveries.claim({ ...ref, at: far }, { size: env.length, kind: 0 }))
        const row = { attempts: 1, lastStatus: 500, size: env.length, lastAt: h.at }
        ts.push(h.fate === "scheduled" ? Deliveries.retry(ref, row, far) : Deliveries.deadLetter(ref, row, h.at, { sourceId, id: `h_bench_tenant_${h.ord}` }))
      }
      return { ts, size: env.length }
    }

    const flush = (ts: Array<Deliveries.Transition>, extra: Array<Op>) =>
      ts.length === 0 && extra.length === 0
        ? Effect.void
        : store.write(Deliveries.batch(ts, [...extra, put("default", K.Meta.nextSeq, K.encodeU64(nextSeq))]), { sync: false })

    const add = (hooks: Iterable<HookSpec>, refs?: Array<DueRow>) =>
      Effect.gen(function* () {
        let ts: Array<Deliveries.Transition> = []
        let extra: Array<Op> = []
        let inBatch = 0
        let n = 0
        for (const h of hooks) {
          if (h.ord >= nextOrd) extra.push(...allocations(h.ord))
          const seq = nextSeq++
          const t = transitions(h, seq)
          ts.push(...t.ts)
          if (refs !== undefined && h.fate === "due") {
            for (let sink = 0; sink < sinks.length; sink++) refs.push({ ord: h.ord, at: h.at, seq, sink, size: t.size })
          }
          rows += sinks.length
          n++
          if (++inBatch >= BUILD_BATCH_HOOKS) {
            yield* flush(ts, extra)
            ts = []
            extra = []
            inBatch = 0
          }
        }
        yield* flush(ts, extra)
        return n
      })

    return {
      store,
      ensureTenants: (ord) => (ord < nextOrd ? Effect.void : store.write(allocations(ord), { sync: false })),
      add,
      nextOrd: () => nextOrd,
      nextSeq: () => nextSeq,
      rows: () => rows
    } satisfies Builder
  })

/**
 * `count` due hooks spread round-robin over tenants `ords`, due at times spread
 * evenly over [now - spreadMs, now): with a fixed spread the number of markers
 * (tenants × distinct seconds) stops growing with the rows once the rows cover
 * every second, so a bench that varies the rows varies only the rows.
 */
export function* dueHooks(ords: ReadonlyArray<number>, count: number, now: number, spreadMs: number): Generator<HookSpec> {
  for (let i = 0; i < count; i++) {
    yield { ord: ords[i % ords.length]!, at: now - spreadMs + Math.floor((i * spreadMs) / count), fate: "due" }
  }
}

/** One hook for each ordinal in [from, to], alternately scheduled far ahead and dead: tenants with no work due. */
export function* idleTenantHooks(from: number, to: number, now: number): Generator<HookSpec> {
  for (let ord = from; ord <= to; ord++) yield { ord, at: now - 60_000, fate: ord % 2 === 0 ? "scheduled" : "dead" }
}
