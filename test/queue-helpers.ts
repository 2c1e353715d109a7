/**
 * Helpers for the queue tests: a memory store with the Queue on it, tenant
 * allocation ops and small hooks. Transitions are always Deliveries builders
 * committed with `Deliveries.batch`, as production writers do.
 */
import { Effect, Stream } from "effect"
import * as Deliveries from "../src/domain/deliveries.js"
import { encodeEnvelope } from "../src/domain/envelope.js"
import * as K from "../src/domain/keys.js"
import type { Op } from "../src/domain/ops.js"
import * as Tenants from "../src/domain/tenants.js"
import * as Queue from "../src/queue/queue.js"
import type { StoreShape } from "../src/store/store.js"
import { makeMemoryStore } from "../src/store/memory.js"

export const memory = Effect.gen(function* () {
  const store = yield* makeMemoryStore()
  return { store, queue: Queue.make(store) }
})

/** Ops that allocate ordinal `ord` to tenant `t<ord>` and move `m:next_ord` past it. */
export const allocOps = (ord: number): ReadonlyArray<Op> => [...Tenants.allocate(`t${ord}`, ord), Tenants.nextOrdOp(ord + 1)]

/** Ops that allocate ordinals 1..n. */
export const allocAll = (n: number): ReadonlyArray<Op> => {
  const out: Array<Op> = []
  for (let ord = 1; ord <= n; ord++) out.push(...Tenants.allocate(`t${ord}`, ord))
  out.push(Tenants.nextOrdOp(n + 1))
  return out
}

export const envelope = (o: { readonly id: string; readonly tenant: string; readonly sourceId?: string; readonly bodyBytes?: number; readonly sinks?: number }) =>
  encodeEnvelope({
    id: o.id,
    tenantId: o.tenant,
    sourceId: o.sourceId ?? "src",
    receivedAt: 0,
    contentType: "application/json",
    headers: {},
    sinks: Array.from({ length: o.sinks ?? 1 }, (_, i) => `sink${i}`),
    idempotencyKey: null,
    body: Buffer.alloc(o.bodyBytes ?? 10, 0x61)
  })

export const commit = (store: StoreShape, ts: ReadonlyArray<Deliveries.Transition>, extra: ReadonlyArray<Op> = []) =>
  store.write(Deliveries.batch(ts, extra), { sync: false })

/** Every row of a store's index, deliveries and counters families as hex pairs (for "unchanged" checks). */
export const dump = (store: StoreShape, cf: "index" | "deliveries" | "counters" | "hooks") =>
  Stream.runCollect(store.stream(cf, { lo: new Uint8Array(0), hi: K.CF_END })).pipe(
    Effect.map((c) => [...c].map((e) => `${K.asBuffer(e.key).toString("hex")}=${K.asBuffer(e.value).toString("hex")}`))
  )

/** A due key's tenant, for filtering dumps by tenant. */
export const ordOfIndexKey = (hex: string): number | undefined => {
  const k = Buffer.from(hex.split("=")[0]!, "hex")
  switch (k[0]) {
    case K.P.due:
      return K.decodeDueKey(k).ord
    case K.P.inflight:
      return K.decodeInflightKey(k).ord
    case K.P.deadByTenant:
      return K.decodeDeadByTenantKey(k).ord
    case K.P.active:
      return K.decodeActiveKey(k).ord
    default:
      return undefined
  }
}
