import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import * as Sig from "../src/domain/signature.js"

// The example of the Standard Webhooks specification.
const vector = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
}

const lookup = (h: Record<string, string>) => (name: string) => h[name]

describe("signature", () => {
  it("matches the Standard Webhooks example", () => {
    const key = Sig.parseSecret(vector.secret)!
    expect(Sig.headers(key, vector.id, vector.timestamp, vector.body)["webhook-signature"]).toBe(vector.signature)
    const h = { "webhook-id": vector.id, "webhook-timestamp": String(vector.timestamp), "webhook-signature": vector.signature }
    expect(Sig.verify({ header: lookup(h), body: vector.body, keys: [key], now: vector.timestamp * 1000 })).toEqual({ _tag: "Valid" })
  })

  it("what is signed verifies; any change to id, timestamp, body or key does not", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 64 }),
        fc.uint8Array({ minLength: 1, maxLength: 64 }),
        fc.string({ minLength: 1, maxLength: 40 }).filter((s) => !s.includes(" ")),
        fc.uint8Array({ maxLength: 256 }),
        fc.integer({ min: 1_000_000_000, max: 4_000_000_000 }),
        (k1, k2, id, body, ts) => {
          const key = Sig.parseSecret(`whsec_${Buffer.from(k1).toString("base64")}`)!
          const other = Sig.parseSecret(Buffer.from(k2).toString("base64"))!
          const h: Record<string, string> = { ...Sig.headers(key, id, ts, body) }
          const now = ts * 1000
          expect(Sig.verify({ header: lookup(h), body, keys: [other, key], now })._tag).toBe("Valid")
          if (Buffer.compare(Buffer.from(k1), Buffer.from(k2)) !== 0) {
            expect(Sig.verify({ header: lookup(h), body, keys: [other], now })).toEqual({ _tag: "Invalid", reason: "bad_signature" })
          }
          const changed = Buffer.concat([Buffer.from(body), Buffer.from([1])])
          expect(Sig.verify({ header: lookup(h), body: changed, keys: [key], now })._tag).toBe("Invalid")
          expect(Sig.verify({ header: lookup({ ...h, "webhook-id": `${id}x` }), body, keys: [key], now })._tag).toBe("Invalid")
          expect(Sig.verify({ header: lookup({ ...h, "webhook-timestamp": String(ts + 1) }), body, keys: [key], now })._tag).toBe("Invalid")
        }
      )
    )
  })

  it("accepts one valid signature among several, refuses stale or malformed input", () => {
    const key = Sig.parseSecret(vector.secret)!
    const now = vector.timestamp * 1000
    const h = { "webhook-id": vector.id, "webhook-timestamp": String(vector.timestamp), "webhook-signature": `v1,AAAA v2,xyz ${vector.signature}` }
    expect(Sig.verify({ header: lookup(h), body: vector.body, keys: [key], now })._tag).toBe("Valid")
    expect(Sig.verify({ header: lookup(h), body: vector.body, keys: [key], now: now + 301_000 })).toEqual({ _tag: "Invalid", reason: "stale_timestamp" })
    expect(Sig.verify({ header: lookup(h), body: vector.body, keys: [key], now: now - 301_000 })).toEqual({ _tag: "Invalid", reason: "stale_timestamp" })
    expect(Sig.verify({ header: lookup({ ...h, "webhook-timestamp": "12ab" }), body: vector.body, keys: [key], now })).toEqual({ _tag: "Invalid", reason: "bad_timestamp" })
    expect(Sig.verify({ header: lookup({ "webhook-id": vector.id }), body: vector.body, keys: [key], now })).toEqual({ _tag: "Invalid", reason: "missing_headers" })
    expect(Sig.parseSecret("whsec_")).toBeUndefined()
    expect(Sig.parseSecret("whsec_not base64!")).toBeUndefined()
  })
})
