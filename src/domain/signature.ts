/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): the pipeline
 * signs deliveries with it and the edge verifies ingest with it.
 *
 * `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`;
 * the key is the base64 part of a `whsec_`-prefixed secret; `webhook-timestamp`
 * is in seconds. A header may carry several space-separated signatures (key
 * rotation); one valid `v1` is enough.
 */
import { createHmac, timingSafeEqual } from "node:crypto"

export const SECRET_PREFIX = "whsec_"
/** Default tolerance between `webhook-timestamp` and the verifier's clock. */
export const DEFAULT_TOLERANCE_SECONDS = 5 * 60

/** The key bytes of a secret (`whsec_` prefix optional), or undefined when it is not base64 of at least one byte. */
export const parseSecret = (secret: string): Uint8Array | undefined => {
  const b64 = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret
  if (b64.length === 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) return undefined
  const key = Buffer.from(b64, "base64")
  return key.length === 0 ? undefined : key
}

const toBytes = (body: Uint8Array | string): Uint8Array => (typeof body === "string" ? Buffer.from(body, "utf8") : body)

/** The bare base64 signature (without `v1,`). */
export const sign = (key: Uint8Array, id: string, timestampSeconds: number, body: Uint8Array | string): string =>
  createHmac("sha256", key).update(`${id}.${timestampSeconds}.`).update(toBytes(body)).digest("base64")

export interface SignatureHeaders {
  readonly "webhook-id": string
  readonly "webhook-timestamp": string
  readonly "webhook-signature": string
}

/** The three headers of a signed delivery. */
export const headers = (key: Uint8Array, id: string, timestampSeconds: number, body: Uint8Array | string): SignatureHeaders => ({
  "webhook-id": id,
  "webhook-timestamp": String(timestampSeconds),
  "webhook-signature": `v1,${sign(key, id, timestampSeconds, body)}`
})

export type Verification =
  | { readonly _tag: "Valid" }
  | { readonly _tag: "Invalid"; readonly reason: "missing_headers" | "bad_timestamp" | "stale_timestamp" | "bad_signature" }

export interface VerifyInput {
  /** Header lookup by lower-case name. */
  readonly header: (name: string) => string | undefined
  readonly body: Uint8Array | string
  /** Candidate keys (`parseSecret` output); any one may match. */
  readonly keys: ReadonlyArray<Uint8Array>
  /** The verifier's clock, ms since the epoch. */
  readonly now: number
  readonly toleranceSeconds?: number
}

export const verify = (input: VerifyInput): Verification => {
  const id = input.header("webhook-id")
  const ts = input.header("webhook-timestamp")
  const sig = input.header("webhook-signature")
  if (id === undefined || ts === undefined || sig === undefined) return { _tag: "Invalid", reason: "missing_headers" }
  if (!/^\d{1,15}$/.test(ts.trim())) return { _tag: "Invalid", reason: "bad_timestamp" }
  const seconds = Number(ts.trim())
  const tolerance = input.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS
  if (Math.abs(input.now / 1000 - seconds) > tolerance) return { _tag: "Invalid", reason: "stale_timestamp" }
  const offered = sig
    .split(" ")
    .filter((s) => s.startsWith("v1,"))
    .map((s) => Buffer.from(s.slice(3), "base64"))
  for (const key of input.keys) {
    const expected = Buffer.from(sign(key, id, seconds, input.body), "base64")
    for (const o of offered) {
      if (o.length === expected.length && timingSafeEqual(o, expected)) return { _tag: "Valid" }
    }
  }
  return { _tag: "Invalid", reason: "bad_signature" }
}
