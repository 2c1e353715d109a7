/**
 * W3C trace context (https://www.w3.org/TR/trace-context/): the `traceparent` codec, the
 * `tracestate` check and the parent-based ratio sampler's decision. Pure; the tracer is
 * src/observability/tracing.ts (docs/observability.md).
 */

export interface TraceContext {
  /** 32 lower-case hex digits, not all zero. */
  readonly traceId: string
  /** 16 lower-case hex digits, not all zero: the span that is the parent of what comes next. */
  readonly spanId: string
  readonly sampled: boolean
  /** The `tracestate` that came with it, checked (`validTraceState`); carried on as it is. */
  readonly traceState?: string | undefined
}

/** Whether `v[from, to)` is lower-case hex and not all zero (a char-code loop: no regex, no slice). */
const hexId = (v: string, from: number, to: number): boolean => {
  let nonZero = false
  for (let i = from; i < to; i++) {
    const c = v.charCodeAt(i)
    if (c >= 49 && c <= 57) nonZero = true
    else if (c >= 97 && c <= 102) nonZero = true
    else if (c !== 48) return false
  }
  return nonZero
}

/** The value of the two lower-case hex digits at `at`, or -1. */
const hexByte = (v: string, at: number): number => {
  const digit = (c: number) => (c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : -1)
  const hi = digit(v.charCodeAt(at))
  const lo = digit(v.charCodeAt(at + 1))
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo
}

/** At most 32 list members of at most 256 characters each, so 512 characters is the spec's limit to keep. */
export const TRACESTATE_MAX_CHARS = 512

/**
 * A `traceparent` header, or undefined when it is not one. Version 00 is exactly 55 characters;
 * a later version is read by its first four fields (the spec's forward compatibility), `ff` never.
 */
export const parseTraceparent = (value: string | undefined, traceState?: string | undefined): TraceContext | undefined => {
  if (value === undefined || value.length < 55) return undefined
  const v = value.length === 55 ? value : value.trim()
  if (v.length < 55 || v[2] !== "-" || v[35] !== "-" || v[52] !== "-") return undefined
  const version = hexByte(v, 0)
  if (version < 0 || version === 0xff) return undefined
  if (version === 0 ? v.length !== 55 : v.length > 55 && v[55] !== "-") return undefined
  const flags = hexByte(v, 53)
  if (!hexId(v, 3, 35) || !hexId(v, 36, 52) || flags < 0) return undefined
  const traceId = v.slice(3, 35)
  const spanId = v.slice(36, 52)
  const state = validTraceState(traceState)
  return state === undefined ? { traceId, spanId, sampled: (flags & 1) === 1 } : { traceId, spanId, sampled: (flags & 1) === 1, traceState: state }
}

/** The `traceparent` of a context (version 00). */
export const formatTraceparent = (c: TraceContext): string => `00-${c.traceId}-${c.spanId}-${c.sampled ? "01" : "00"}`

/** A stored `traceparent`'s sampled flag (this module wrote it), from its flags' last hex digit: no parse. */
export const storedSampled = (tp: string | undefined): boolean => tp !== undefined && tp.length >= 55 && (parseInt(tp[54]!, 16) & 1) === 1

/** A `tracestate` worth carrying on: printable ASCII, at most TRACESTATE_MAX_CHARS, not empty; else undefined (dropped). */
export const validTraceState = (value: string | undefined): string | undefined => {
  if (value === undefined) return undefined
  const v = value.trim()
  return v.length > 0 && v.length <= TRACESTATE_MAX_CHARS && /^[\x20-\x7e]+$/.test(v) ? v : undefined
}

/** hookTraceId's digits are written here and encoded once (per-int `toString(16)` costs several times more). */
const ID_BYTES = Buffer.allocUnsafe(16)

/**
 * The trace id of a hook that keeps no context (a new trace not sampled, or accepted with tracing
 * off): 128 bits hashed from its hook id (cyrb128), so each attempt, retry and replay sends the
 * same one with no stored bytes and no read. Random-looking digits, as W3C asks of a trace id;
 * never all zero. The seeds and multipliers are int32 (`| 0`) so the loop stays in integers.
 */
export const hookTraceId = (hookId: string): string => {
  let h1 = 1779033703 | 0, h2 = 3144134277 | 0, h3 = 1013904242 | 0, h4 = 2773480762 | 0
  for (let i = 0; i < hookId.length; i++) {
    const k = hookId.charCodeAt(i)
    h1 = h2 ^ Math.imul(h1 ^ k, 597399067)
    h2 = h3 ^ Math.imul(h2 ^ k, 2869860233 | 0)
    h3 = h4 ^ Math.imul(h3 ^ k, 951274213)
    h4 = h1 ^ Math.imul(h4 ^ k, 2716044179 | 0)
  }
  h1 = Math.imul(h3 ^ (h1 >>> 18), 597399067)
  h2 = Math.imul(h4 ^ (h2 >>> 22), 2869860233 | 0)
  h3 = Math.imul(h1 ^ (h3 >>> 17), 951274213)
  h4 = Math.imul(h2 ^ (h4 >>> 19), 2716044179 | 0)
  h1 ^= h2 ^ h3 ^ h4
  h2 ^= h1
  h3 ^= h1
  h4 ^= h1
  if ((h1 | h2 | h3 | h4) === 0) h4 = 1
  ID_BYTES.writeInt32BE(h1, 0)
  ID_BYTES.writeInt32BE(h2, 4)
  ID_BYTES.writeInt32BE(h3, 8)
  ID_BYTES.writeInt32BE(h4, 12)
  return ID_BYTES.toString("hex")
}

/**
 * The ratio sampler's decision for a trace with no parent to follow: the trace id's last 8 hex
 * digits as a fraction of 2^32 against `ratio`, so every span of one trace decides alike.
 */
export const sampledByRatio = (traceId: string, ratio: number): boolean => {
  if (ratio >= 1) return true
  if (ratio <= 0) return false
  return parseInt(traceId.slice(24, 32), 16) / 0x1_0000_0000 < ratio
}
