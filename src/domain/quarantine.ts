/**
 * Quarantined requests: ingest requests that failed verification, kept for
 * an operator to inspect and never delivered. Key `<<?q, at::64, qid::64>>`
 * in the index family (time order, so the oldest go first under a bound and
 * to retention). Value: `<<1::8, metaLen::32, meta JSON utf8, body bytes>>`,
 * meta = `{tenant, source, reason, headers}`; the body is the exact bytes
 * received.
 */
import { decodeQuarantineKey, quarantineKey } from "./keys.js"

export interface QuarantineInput {
  /** The tenant the request claimed (fixed by the source or taken from its header); "default" if none. */
  readonly tenant: string
  readonly source: string
  /** Why verification failed, e.g. "signature_mismatch", "timestamp_too_old", "missing_signature". */
  readonly reason: string
  /** Request headers as received (lower-case names); the edge drops credentials before they get here. */
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
}

export interface QuarantineRecord extends QuarantineInput {
  readonly at: number
  readonly qid: number
}

const VERSION = 1

export const encodeRecord = (r: QuarantineInput): Uint8Array => {
  const meta = Buffer.from(JSON.stringify({ tenant: r.tenant, source: r.source, reason: r.reason, headers: r.headers }), "utf8")
  const head = Buffer.alloc(5)
  head[0] = VERSION
  head.writeUInt32BE(meta.length, 1)
  return Buffer.concat([head, meta, r.body])
}

/** Throws on bytes this build cannot read (a defect: only this module writes the family). */
export const decodeRecord = (key: Uint8Array, v: Uint8Array): QuarantineRecord => {
  const { at, qid } = decodeQuarantineKey(key)
  const b = Buffer.from(v.buffer, v.byteOffset, v.byteLength)
  if (b.length < 5 || b[0] !== VERSION || 5 + b.readUInt32BE(1) > b.length) {
    throw new Error(`corrupt quarantine value at ${Buffer.from(key).toString("hex")}`)
  }
  const metaLen = b.readUInt32BE(1)
  const m = JSON.parse(b.toString("utf8", 5, 5 + metaLen)) as Omit<QuarantineInput, "body">
  return { at, qid, tenant: m.tenant, source: m.source, reason: m.reason, headers: m.headers, body: b.subarray(5 + metaLen) }
}

/** The tenant of a stored value without decoding the body. */
export const tenantOfValue = (v: Uint8Array): string => {
  const b = Buffer.from(v.buffer, v.byteOffset, v.byteLength)
  const metaLen = b.readUInt32BE(1)
  return (JSON.parse(b.toString("utf8", 5, 5 + metaLen)) as { tenant: string }).tenant
}

/** What a record costs against `quarantine.maxBytes`: key plus value. */
export const recordBytes = (key: Uint8Array, value: Uint8Array): number => key.length + value.length

/** A scoped token sees only its tenants' records; a global one (null) sees all. */
export const visibleTo = (tenant: string, scope: ReadonlyArray<string> | null): boolean =>
  scope === null || scope.includes(tenant)

/** Page cursors are "<at>.<qid>" of the last record returned. */
export const encodeCursor = (r: Pick<QuarantineRecord, "at" | "qid">): string => `${r.at}.${r.qid}`
export const cursorKey = (c: string | undefined): Uint8Array | undefined => {
  const m = c === undefined ? null : /^(\d{1,16})\.(\d{1,16})$/.exec(c)
  return m === null ? undefined : quarantineKey(Number(m[1]), Number(m[2]))
}
