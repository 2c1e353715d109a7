/**
 * ingest-bench's store-alone batches: `hooks` ingested hooks (1 KiB bodies by default, every sink
 * a delivery row) built by `Deliveries.ingest` + `Deliveries.batch` as the Writer builds them,
 * the next seq put beside them. The RocksDB floor commits them through the store; the PostgreSQL
 * floor writes the same ops with a plain script (pg-floor.ts).
 */
import * as Deliveries from "../../src/domain/deliveries.js"
import { encodeEnvelope } from "../../src/domain/envelope.js"
import * as K from "../../src/domain/keys.js"
import { type Batch, put } from "../../src/domain/ops.js"

export interface IngestShape {
  readonly tenants: number
  readonly sinks: ReadonlyArray<string>
  readonly bodyBytes: number
}

export const hookEnvelope = (shape: IngestShape, seq: number, tenant: string) =>
  encodeEnvelope({
    id: `h_0123456789abcdef_${seq.toString(16).padStart(16, "0")}`,
    tenantId: tenant,
    sourceId: "bench",
    receivedAt: Date.now(),
    contentType: "application/json",
    headers: { "user-agent": "ankusa-bench" },
    sinks: shape.sinks,
    idempotencyKey: null,
    body: Buffer.alloc(shape.bodyBytes, 0x61)
  })

/** A builder of consecutive batches of `hooks` hooks (seqs from 1, tenants round-robin). */
export const ingestBatches = (shape: IngestShape, hooks: number) => {
  let seq = 1
  return (): Batch => {
    const ts: Array<Deliveries.Transition> = []
    const at = Date.now()
    for (let i = 0; i < hooks; i++, seq++) {
      const ord = 1 + (seq % shape.tenants)
      ts.push(Deliveries.ingest({ seq, ord, envelope: hookEnvelope(shape, seq, `tenant-${ord}`), sinkCount: shape.sinks.length, at, archive: false }))
    }
    return Deliveries.batch(ts, [put("default", K.Meta.nextSeq, K.encodeU64(seq))])
  }
}
