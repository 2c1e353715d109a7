/**
 * The configuration of tenant endpoints and portal tokens (docs/configuration.md "Endpoints",
 * "Portal tokens"): `endpoints.*` and `portal.*`, Schemas config.ts puts in the file's.
 */
import { Schema } from "effect"
import { type Cidr, parseCidr } from "./ssrf.js"
import { int, withDefault } from "./schema-parts.js"

/** Shortest `portal.secret`. */
export const PORTAL_SECRET_MIN_CHARS = 32
/** Ceiling of `portal.maxTtlSeconds`: a week. */
export const PORTAL_TTL_CEILING_S = 7 * 24 * 3_600
/** Default and ceiling of `endpoints.maxPools`. */
export const MAX_POOLS_DEFAULT = 1_024
export const MAX_POOLS_LIMIT = 100_000

/** Most networks `endpoints.allowNetworks` lists. */
export const ALLOW_NETWORKS_MAX = 256

/** A CIDR as text (config values stay JSON: `GET /v1/config` and reload compare them); `allowList` parses them. */
const Network = Schema.String.check(
  Schema.makeFilter((s: string) => parseCidr(s) !== undefined || "expected a network such as 127.0.0.0/8 or ::1/128 (no host bits past the prefix)")
)

let parsed: { readonly of: ReadonlyArray<string>; readonly list: ReadonlyArray<Cidr> } | undefined

/** The networks of `endpoints.allowNetworks`, parsed once per list (a reload brings a new one). */
export const allowList = (networks: ReadonlyArray<string>): ReadonlyArray<Cidr> => {
  if (parsed === undefined || parsed.of !== networks) parsed = { of: networks, list: networks.flatMap((n) => parseCidr(n) ?? []) }
  return parsed.list
}

export const EndpointsSettings = Schema.Struct({
  /** Networks endpoint URLs may reach although the SSRF guard refuses them (tests and the demo allow loopback). */
  allowNetworks: withDefault(Schema.Array(Network).check(Schema.isMaxLength(ALLOW_NETWORKS_MAX)), () => []),
  /** Refuse endpoint URLs that are not https://. */
  httpsOnly: withDefault(Schema.Boolean, () => false),
  /** Endpoint connection pools open at once at most; the least recently used idle one closes for a new one. */
  maxPools: withDefault(int(1, MAX_POOLS_LIMIT), () => MAX_POOLS_DEFAULT),
  /** How long a rotated-out secret (an endpoint's, or a sink's changed by reload) still signs beside the new one. */
  rotationOverlapMs: withDefault(int(0, 30 * 24 * 3_600_000), () => 24 * 3_600_000),
  /** An endpoint that has failed without a single success for this long is disabled (memory only: a restart starts over). */
  disableAfterMs: withDefault(int(1_000, 365 * 24 * 3_600_000), () => 5 * 24 * 3_600_000)
})

/** `operations.*`: the gateway's own events (docs/api.md "Operational events"), delivered as hooks to a configured sink. */
export const OperationsSettings = Schema.Struct({
  sink: Schema.optional(Schema.String)
})

/** `breaker.*` (docs/delivery.md "Failing destinations"): every destination's circuit breaker. */
export const BreakerSettings = Schema.Struct({
  minCalls: withDefault(int(1, 1_000_000), () => 10),
  failureRatio: withDefault(Schema.Number.check(Schema.isBetween({ minimum: 0.01, maximum: 1 })), () => 0.7),
  windowMs: withDefault(int(1_000, 3_600_000), () => 60_000),
  openMs: withDefault(int(100, 3_600_000), () => 30_000),
  maxOpenMs: withDefault(int(100, 86_400_000), () => 600_000)
})

export const PortalSettings = Schema.Struct({
  /** Signs portal tokens (HMAC-SHA256); absent: portal tokens are off. Every node of a fleet has the same one. */
  secret: Schema.optional(
    Schema.String.check(Schema.isMinLength(PORTAL_SECRET_MIN_CHARS, { message: `expected a secret of at least ${PORTAL_SECRET_MIN_CHARS} characters` }))
  ),
  /** A token's life when the request names none. */
  ttlSeconds: withDefault(int(1, PORTAL_TTL_CEILING_S), () => 3_600),
  /** The longest life a request may ask for. */
  maxTtlSeconds: withDefault(int(1, PORTAL_TTL_CEILING_S), () => 24 * 3_600),
  /** The origin the portal URL names (the proxy's, in a fleet); absent: the request's own `Host`. */
  publicUrl: Schema.optional(
    Schema.String.check(
      Schema.makeFilter((s) => {
        try {
          const u = new URL(s)
          return ((u.protocol === "http:" || u.protocol === "https:") && u.search === "" && u.hash === "") || "expected an http(s) origin such as https://hooks.example.com"
        } catch {
          return "expected an http(s) origin such as https://hooks.example.com"
        }
      })
    )
  )
})
