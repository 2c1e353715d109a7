/**
 * Store fixtures (TEN-1 §7): a format 2 writer (the layout of TEN-1 §1, built
 * from `Deliveries.V2`; tenant only in the envelope) able to build any
 * format 2 store the upgrade tests need, and a format 3 writer that goes
 * through the real transitions (ingest, claim, retry, dead-letter, delivered)
 * so its counters are what the node itself would have written.
 *
 * A fixture is a list of hooks, each with the fate of every sink. Open the
 * store with `supportedFormat: 2` for a format 2 fixture (so it has only
 * format 2's families and stamp 2).
 */
import { Effect } from "effect"
import * as Deliveries from "../../domain/deliveries.js"
import { encodeEnvelope } from "../../domain/envelope.js"
import * as K from "../../domain/keys.js"
import { type Batch, type Op, put } from "../../domain/ops.js"
import * as Tenants from "../../domain/tenants.js"
import type { StoreError, StoreShape } from "../../store/store.js"

export type SinkFate =
  /** Waiting for its first attempt, due at the hook's `at`. */
  | { readonly state: "pending" }
  /** Failed `attempts` times, due again at `at`. */
  | { readonly state: "retrying"; readonly at: number; readonly attempts: number }
  /** Claimed and never settled: what a crash leaves. */
  | { readonly state: "inflight" }
  /** Dead-lettered at `at` after `attempts` attempts. */
  | { readonly state: "dead"; readonly at: number; readonly attempts: number }
  /** Delivered: no row left. */
  | { readonly state: "delivered" }

export interface FixtureHook {
  readonly seq: number
  /** null: the envelope has no tenant ("default"). */
  readonly tenant: string | null
  /** "envelope" (default); "garbage": the hooks row holds bytes that are no envelope; "gone": no hooks row (format 2 only). */
  readonly body?: "envelope" | "garbage" | "gone"
  readonly at: number
  readonly sinks: ReadonlyArray<SinkFate>
  readonly archive: boolean
  readonly sourceId?: string
}

const GARBAGE = Buffer.from("\u00ffnot an envelope")

export const hookId = (seq: number): string => `fixture-${seq}`

/** The hooks row value of a fixture hook (a "gone" hook's would-be envelope sizes its rows). */
export const envelopeOf = (h: FixtureHook): Uint8Array =>
  h.body === "garbage"
    ? GARBAGE
    : encodeEnvelope({
        id: hookId(h.seq),
        tenantId: h.tenant,
        sourceId: h.sourceId ?? "fixture",
        receivedAt: h.at,
        contentType: "application/json",
        headers: {},
        sinks: h.sinks.map((_, i) => `sink-${i}`),
        idempotencyKey: null,
        body: Buffer.from(JSON.stringify({ seq: h.seq, tenant: h.tenant }))
      })

const rowPut = (seq: number, sink: number, row: Deliveries.DeliveryRow): Op =>
  put("deliveries", K.deliveryKey(seq, sink), Deliveries.encodeRow(row))

const failedRow = (size: number, attempts: number, at: number): Deliveries.DeliveryRow => ({
  attempts,
  lastStatus: 500,
  size,
  lastAt: at
})

/** One format 2 hook as one batch (TEN-1 §1 layout): no counters, no ordinals. */
export const v2Batch = (h: FixtureHook): Batch => {
  const env = envelopeOf(h)
  const size = env.length
  const ops: Array<Op> = h.body === "gone" ? [] : [put("hooks", K.hookKey(h.seq), env)]
  h.sinks.forEach((s, sink) => {
    switch (s.state) {
      case "pending":
        ops.push(rowPut(h.seq, sink, Deliveries.freshRow(size)), Deliveries.V2.dueRow(h.at, h.seq, sink, size))
        break
      case "retrying":
        ops.push(rowPut(h.seq, sink, failedRow(size, s.attempts, h.at)), Deliveries.V2.dueRow(s.at, h.seq, sink, size))
        break
      case "inflight":
        ops.push(rowPut(h.seq, sink, Deliveries.freshRow(size)), Deliveries.V2.inflightRow(h.seq, sink, size))
        break
      case "dead":
        ops.push(
          rowPut(h.seq, sink, failedRow(size, s.attempts, s.at)),
          Deliveries.V2.deadRow(s.at, h.seq, sink, { sourceId: h.sourceId ?? "fixture", id: hookId(h.seq) })
        )
        break
      case "delivered":
        break
    }
  })
  if (h.archive) ops.push(Deliveries.V2.archiveRow(h.seq, size))
  return ops
}

/** Hooks per write batch when a fixture is built in bulk (`hooksPerBatch`). */
export const DEFAULT_HOOKS_PER_BATCH = 1

/** Write format 2 hooks (the store must be a format 2 one), `hooksPerBatch` hooks per write. */
export const writeV2 = (
  store: StoreShape,
  hooks: ReadonlyArray<FixtureHook>,
  opts: { readonly sync?: boolean; readonly hooksPerBatch?: number } = {}
): Effect.Effect<void, StoreError> =>
  Effect.gen(function* () {
    const per = Math.max(1, opts.hooksPerBatch ?? DEFAULT_HOOKS_PER_BATCH)
    for (let i = 0; i < hooks.length; i += per) {
      yield* store.write(hooks.slice(i, i + per).flatMap(v2Batch), { sync: opts.sync ?? false })
    }
  })

/**
 * One format 3 hook as the node writes it: the ingest batch (with the ordinal
 * allocation when the tenant is new), then one batch per transition of each
 * sink's fate. `ords` is the tenant → ord map so far (updated); `nextOrd` too.
 */
export const v3Batches = (h: FixtureHook, state: { ords: Map<string, number>; nextOrd: number }): ReadonlyArray<Batch> => {
  if (h.body !== undefined && h.body !== "envelope") throw new Error(`a format 3 fixture hook has an envelope (seq ${h.seq})`)
  const tenant = h.tenant ?? "default"
  const env = envelopeOf(h)
  const size = env.length
  const extra: Array<Op> = [put("default", K.Meta.nextSeq, K.encodeU64(h.seq + 1))]
  let ord = state.ords.get(tenant)
  if (ord === undefined) {
    ord = state.nextOrd++
    state.ords.set(tenant, ord)
    extra.push(...Tenants.allocate(tenant, ord), Tenants.nextOrdOp(state.nextOrd))
  }
  const out: Array<Batch> = [
    Deliveries.batch([Deliveries.ingest({ seq: h.seq, ord, envelope: env, sinkCount: h.sinks.length, at: h.at, archive: h.archive })], extra)
  ]
  const hook = { sourceId: h.sourceId ?? "fixture", id: hookId(h.seq) }
  h.sinks.forEach((s, sink) => {
    if (s.state === "pending") return
    const due = { ord, at: h.at, seq: h.seq, sink }
    const inflight = { ord, seq: h.seq, sink }
    out.push(Deliveries.batch([Deliveries.claim(due, { size, kind: 0 })]))
    switch (s.state) {
      case "retrying":
        out.push(Deliveries.batch([Deliveries.retry(inflight, failedRow(size, s.attempts, h.at), s.at)]))
        break
      case "dead":
        out.push(Deliveries.batch([Deliveries.deadLetter(inflight, failedRow(size, s.attempts, s.at), s.at, hook)]))
        break
      case "delivered":
        out.push(Deliveries.batch([Deliveries.delivered(inflight, size)]))
        break
      case "inflight":
        break
    }
  })
  return out
}

/** Write format 3 hooks through the transitions (the store must be at format 3). */
export const writeV3 = (
  store: StoreShape,
  hooks: ReadonlyArray<FixtureHook>,
  opts: { readonly sync?: boolean } = {}
): Effect.Effect<ReadonlyMap<string, number>, StoreError> =>
  Effect.gen(function* () {
    const state = { ords: new Map<string, number>(), nextOrd: Tenants.nextOrdOf(yield* store.get("default", K.Meta.nextOrd)) }
    const known = new Set<string>()
    for (const h of hooks) {
      const tenant = h.tenant ?? "default"
      if (!known.has(tenant) && !state.ords.has(tenant)) {
        known.add(tenant)
        const v = yield* store.get("tenants", K.tenantOrdKey(tenant))
        if (v !== undefined) state.ords.set(tenant, K.decodeU32(v))
      }
      for (const b of v3Batches(h, state)) yield* store.write(b, { sync: opts.sync ?? false })
    }
    return state.ords
  })

// ---------------------------------------------------------------------------
// The standard fixture (test/fixtures/store-v2.tar.zst and store-v3.tar.zst)

/** 2023-11-14T22:13:20Z: every first attempt is due long before any migration runs. */
export const FIXTURE_BASE_AT = 1_700_000_000_000
/** 2100-01-01: retries still waiting out their backoff whenever the fixture is migrated. */
export const FIXTURE_LATER_AT = 4_102_444_800_000

/**
 * Four tenants (acme, globex, initech and default), pending, retrying and
 * inflight rows, dead rows, archive obligations, a tenant with only dead rows
 * (initech), an archive obligation whose deliveries are all done; format 2
 * adds a hook whose envelope does not decode and rows whose hook is gone.
 */
export const standardHooks = (format: 2 | 3): ReadonlyArray<FixtureHook> => {
  const at = (i: number) => FIXTURE_BASE_AT + i * 1_000
  const dead = (i: number) => ({ state: "dead", at: at(100 + i), attempts: 5 }) as const
  const retrying = (i: number) => ({ state: "retrying", at: FIXTURE_LATER_AT + i * 1_000, attempts: 2 }) as const
  const hooks: Array<FixtureHook> = [
    { seq: 1, tenant: "acme", at: at(1), sinks: [{ state: "pending" }, retrying(1)], archive: true },
    { seq: 2, tenant: "acme", at: at(2), sinks: [{ state: "inflight" }], archive: true },
    { seq: 3, tenant: "acme", at: at(3), sinks: [dead(3)], archive: false },
    { seq: 4, tenant: "globex", at: at(4), sinks: [{ state: "pending" }, { state: "inflight" }], archive: true },
    { seq: 5, tenant: "globex", at: at(5), sinks: [retrying(5)], archive: false },
    { seq: 6, tenant: null, at: at(6), sinks: [{ state: "pending" }], archive: true },
    { seq: 7, tenant: null, at: at(7), sinks: [dead(7), { state: "pending" }], archive: false },
    { seq: 8, tenant: "initech", at: at(8), sinks: [dead(8)], archive: false },
    { seq: 9, tenant: "initech", at: at(9), sinks: [dead(9), dead(10)], archive: false },
    { seq: 10, tenant: "acme", at: at(10), sinks: [{ state: "delivered" }, { state: "pending" }], archive: false },
    { seq: 11, tenant: "globex", at: at(11), sinks: [{ state: "delivered" }], archive: true },
    { seq: 12, tenant: "default", at: at(12), sinks: [{ state: "inflight" }], archive: false }
  ]
  if (format === 2) {
    hooks.push(
      { seq: 13, tenant: "acme", body: "garbage", at: at(13), sinks: [{ state: "pending" }], archive: true },
      { seq: 14, tenant: "globex", body: "gone", at: at(14), sinks: [dead(14), { state: "pending" }, { state: "inflight" }], archive: true }
    )
  }
  return hooks
}

/**
 * A deterministic format 2 workload of `hooks` hooks over `tenants` named
 * tenants plus hooks with no tenant, with an undecodable envelope and with
 * no hooks row; 1 to 3 sinks each, cycling through every fate.
 */
export const syntheticHooks = (o: { readonly hooks: number; readonly tenants: number; readonly firstSeq?: number }): Array<FixtureHook> => {
  const out: Array<FixtureHook> = []
  const fates = (i: number, n: number): Array<SinkFate> =>
    Array.from({ length: n }, (_, k): SinkFate => {
      switch ((i + k * 7) % 6) {
        case 0:
        case 1:
          return { state: "pending" }
        case 2:
          return { state: "retrying", at: FIXTURE_LATER_AT + i * 10, attempts: 1 + (i % 4) }
        case 3:
          return { state: "inflight" }
        case 4:
          return { state: "dead", at: FIXTURE_BASE_AT + 1_000_000 + i * 10, attempts: 5 }
        default:
          return { state: "delivered" }
      }
    })
  for (let i = 0; i < o.hooks; i++) {
    const seq = (o.firstSeq ?? 1) + i
    // Knuth's multiplicative hash spreads tenants so each shows up across many steps.
    const pick = ((i * 2654435761) >>> 0) % (o.tenants + 3)
    const tenant = pick < o.tenants ? `tenant-${pick}` : null
    const body = pick === o.tenants + 1 ? "garbage" : pick === o.tenants + 2 ? "gone" : "envelope"
    out.push({ seq, tenant, body, at: FIXTURE_BASE_AT + i * 37, sinks: fates(i, 1 + (i % 3)), archive: i % 3 === 0 })
  }
  return out
}
