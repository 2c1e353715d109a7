/**
 * Helpers for the lifecycle tests (archive, reclaim, DLQ ceiling): hooks
 * ingested and moved through Deliveries' transitions exactly as production
 * writers commit them, and whole-family reads for comparisons.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import * as Counters from "../src/domain/counters.js"
import * as Deliveries from "../src/domain/deliveries.js"
import { encodeEnvelope } from "../src/domain/envelope.js"
import * as K from "../src/domain/keys.js"
import type { Op } from "../src/domain/ops.js"
import * as Tenants from "../src/domain/tenants.js"
import type { StoreShape } from "../src/store/store.js"

export const tempDir = (prefix: string) => fs.mkdtempSync(path.join(os.tmpdir(), `ankusa-${prefix}-`))
export const rmDir = (dir: string) => fs.rmSync(dir, { recursive: true, force: true })

/** Ops that allocate ordinals 1..n to tenants t1..tn. */
export const allocAll = (n: number): ReadonlyArray<Op> => {
  const out: Array<Op> = []
  for (let ord = 1; ord <= n; ord++) out.push(...Tenants.allocate(`t${ord}`, ord))
  out.push(Tenants.nextOrdOp(n + 1))
  return out
}

export const envelopeOf = (seq: number, ord: number, receivedAt: number, sinks: number, bodyBytes = 40) =>
  encodeEnvelope({
    id: `hook_${seq}`,
    tenantId: `t${ord}`,
    sourceId: "src",
    receivedAt,
    contentType: "application/octet-stream",
    headers: { "x-n": String(seq) },
    sinks: Array.from({ length: sinks }, (_, i) => `sink${i}`),
    idempotencyKey: null,
    // Distinct bodies, so a segment that mixes hooks up is caught.
    body: Buffer.from(Array.from({ length: bodyBytes }, (_, i) => (seq * 31 + i) % 256))
  })

export const commit = (store: StoreShape, ts: ReadonlyArray<Deliveries.Transition>, extra: ReadonlyArray<Op> = [], sync = false) =>
  store.write(Deliveries.batch(ts, extra), { sync })

export const aggregate = (store: StoreShape) =>
  store.getCounters("counters", Counters.keysOf(Counters.AGGREGATE)).pipe(Effect.map(Counters.fromTotals))

/** Every data row of a family (sentinels excluded). */
export const rowsOf = (store: StoreShape, family: K.Family) => store.scan(family.cf, K.familyDataRange(family), { limit: 10_000_000 })

export const seqsOf = (store: StoreShape, family: K.Family, decode: (k: Uint8Array) => number) =>
  rowsOf(store, family).pipe(Effect.map((rows) => rows.map((e) => decode(e.key))))
