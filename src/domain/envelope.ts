/**
 * The hook envelope: the value of a `hooks` row. Versioned binary:
 * `<<1::8, metaLen::32, meta JSON (utf8), body bytes>>`; the body is kept as
 * the exact bytes received. See docs/storage.md.
 */

export interface Envelope {
  /** The public id answered with 202 and sent as `webhook-id`. */
  readonly id: string
  /** null means "default" (TEN-1 §1). */
  readonly tenantId: string | null
  readonly sourceId: string
  readonly receivedAt: number
  readonly contentType: string
  /** Selected request headers kept for delivery (lower-case names). */
  readonly headers: Readonly<Record<string, string>>
  /** Destinations by fan-out position (`sink::16` in the keys): sink names, and `endpoint:<id>` for a tenant endpoint. */
  readonly sinks: ReadonlyArray<string>
  /** The event type the source's rule found (docs/delivery.md "Tenant endpoints"); absent when none. */
  readonly eventType?: string | undefined
  /** The ordering key the source's rule found (docs/delivery.md "Ordered delivery"); absent when none. */
  readonly orderingKey?: string | undefined
  readonly idempotencyKey: string | null
  /**
   * The hook's trace context (docs/observability.md): the `traceparent` of its ingest span, and
   * the sender's `tracestate`; every delivery attempt continues it. Absent when tracing was off.
   */
  readonly traceparent?: string | undefined
  readonly tracestate?: string | undefined
  readonly body: Uint8Array
}

const VERSION = 1

export const DEFAULT_TENANT = "default"

export const tenantOf = (env: Pick<Envelope, "tenantId"> | undefined): string => env?.tenantId ?? DEFAULT_TENANT

export const encodeEnvelope = (e: Envelope): Uint8Array => {
  const meta = JSON.stringify({
    id: e.id,
    tenantId: e.tenantId,
    sourceId: e.sourceId,
    receivedAt: e.receivedAt,
    contentType: e.contentType,
    headers: e.headers,
    sinks: e.sinks,
    idempotencyKey: e.idempotencyKey,
    ...(e.eventType === undefined ? {} : { eventType: e.eventType }),
    ...(e.orderingKey === undefined ? {} : { orderingKey: e.orderingKey }),
    ...(e.traceparent === undefined ? {} : { traceparent: e.traceparent }),
    ...(e.tracestate === undefined ? {} : { tracestate: e.tracestate })
  })
  // One allocation, written in place: the head, the meta's UTF-8 and the body (every byte set).
  const metaLen = Buffer.byteLength(meta, "utf8")
  const out = Buffer.allocUnsafe(5 + metaLen + e.body.length)
  out[0] = VERSION
  out.writeUInt32BE(metaLen, 1)
  out.write(meta, 5, metaLen, "utf8")
  out.set(e.body, 5 + metaLen)
  return out
}

/** undefined when the bytes are not an envelope this build understands. */
export const decodeEnvelope = (bytes: Uint8Array | undefined): Envelope | undefined => {
  if (bytes === undefined || bytes.length < 5) return undefined
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (b[0] !== VERSION) return undefined
  const metaLen = b.readUInt32BE(1)
  if (5 + metaLen > b.length) return undefined
  try {
    const m = JSON.parse(b.toString("utf8", 5, 5 + metaLen)) as Omit<Envelope, "body">
    if (typeof m.id !== "string" || !Array.isArray(m.sinks)) return undefined
    return { ...m, body: b.subarray(5 + metaLen) }
  } catch {
    return undefined
  }
}

/** The size counted for each delivery row of a hook (TEN-1 §4 bytes): the stored envelope's size. */
export const sizeOf = (encoded: Uint8Array): number => encoded.length
