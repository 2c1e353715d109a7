/**
 * The SSRF guard of tenant endpoints (issue 27; docs/delivery.md "The SSRF guard"): which
 * addresses a tenant's URL may reach. Pure.
 *
 * - `classify(address, allow)`: one IP address (v4 or v6 text) → allowed, or the reason it is not.
 *   IPv4-mapped, IPv4-compatible and NAT64 (64:ff9b::/96) IPv6 addresses are classified as the
 *   IPv4 address they carry. `allow` (`endpoints.allowNetworks`) lets an operator through.
 * - `checkResolved(addresses, allow)`: the connect-time rule for a name. On every new connection
 *   the name is resolved to all its addresses and EACH is classified; the refused ones are dropped
 *   and the connection is made only to one that is allowed (a refused address is never dialled,
 *   whatever its place in the answer). None allowed refuses the call, naming the first refused.
 *   The pool applies it per address through its guard (src/delivery/http1.ts `guardedLookup`);
 *   literal addresses skip DNS and are judged by `checkUrl` when the pool opens.
 * - `checkUrl(url, options)`: the pre-check at save. It refuses literal addresses in every form
 *   the WHATWG URL parser normalises (`2130706433`, `0177.0.0.1`, `127.1`, `0x7f.1`, `[::1]`,
 *   `[::ffff:127.0.0.1]`) and `localhost` / `*.localhost`; other names are not resolved here.
 */
export type Refusal =
  | "loopback"
  | "private"
  | "link_local"
  | "metadata"
  | "multicast"
  | "unspecified"
  | "broadcast"
  | "reserved"
  | "not_an_address"

export type Verdict = { readonly ok: true } | { readonly ok: false; readonly reason: Refusal }

/** A network: `bits` of `value` (an IPv4 address as a 32-bit, IPv6 as a 128-bit integer). */
export interface Cidr {
  readonly version: 4 | 6
  readonly value: bigint
  readonly bits: number
  readonly text: string
}

const OK: Verdict = { ok: true }

// ---------------------------------------------------------------------------
// Parsing

/** Dotted decimal only, without leading zeros (`010.0.0.1` could be read as octal: not an address here). */
const parseV4 = (s: string): bigint | undefined => {
  const parts = s.split(".")
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255)) return undefined
  return parts.reduce((n, part) => (n << 8n) | BigInt(Number(part)), 0n)
}

const GROUP = /^[0-9a-f]{1,4}$/

/** 128-bit value of an IPv6 text (zone id refused; an embedded dotted IPv4 tail accepted). */
const parseV6 = (s: string): bigint | undefined => {
  let text = s.toLowerCase()
  if (text.split("::").length > 2) return undefined
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted !== null) {
    const v4 = parseV4(dotted[1]!)
    if (v4 === undefined) return undefined
    text = text.slice(0, -dotted[1]!.length) + `${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined]
  const left = head === "" ? [] : head!.split(":")
  const right = tail === undefined || tail === "" ? [] : tail.split(":")
  if (tail !== undefined && left.length + right.length > 7) return undefined
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right]
  if (groups.length !== 8 || !groups.every((g) => GROUP.test(g))) return undefined
  return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n)
}

/** An address as a version and value; brackets (`[::1]`) are accepted. */
export const parseAddress = (address: string): { readonly version: 4 | 6; readonly value: bigint } | undefined => {
  const s = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address
  const v4 = parseV4(s)
  if (v4 !== undefined) return { version: 4, value: v4 }
  const v6 = parseV6(s)
  return v6 === undefined ? undefined : { version: 6, value: v6 }
}

/** `10.0.0.0/8`, `::1/128`, or a bare address (one host). Undefined for anything else, host bits past the prefix included. */
export const parseCidr = (text: string): Cidr | undefined => {
  const [addr = "", len, extra] = text.trim().split("/")
  if (extra !== undefined) return undefined
  const a = parseAddress(addr)
  if (a === undefined) return undefined
  const max = a.version === 4 ? 32 : 128
  if (len !== undefined && !/^\d{1,3}$/.test(len)) return undefined
  const bits = len === undefined ? max : Number(len)
  if (bits > max) return undefined
  const hostMask = (1n << BigInt(max - bits)) - 1n
  if ((a.value & hostMask) !== 0n) return undefined
  return { version: a.version, value: a.value, bits, text: text.trim() }
}

const cidr = (text: string): Cidr => {
  const c = parseCidr(text)
  if (c === undefined) throw new Error(`bad built-in network ${text}`)
  return c
}

const inside = (version: 4 | 6, value: bigint, c: Cidr): boolean => {
  if (c.version !== version) return false
  const shift = BigInt((version === 4 ? 32 : 128) - c.bits)
  return value >> shift === c.value >> shift
}

// ---------------------------------------------------------------------------
// The tables (IANA special-purpose registries)

const METADATA = cidr("169.254.169.254/32")

const V4: ReadonlyArray<readonly [Cidr, Refusal]> = [
  [cidr("0.0.0.0/32"), "unspecified"],
  [cidr("0.0.0.0/8"), "reserved"],
  [cidr("10.0.0.0/8"), "private"],
  [cidr("100.64.0.0/10"), "private"], // shared address space (CGNAT)
  [cidr("127.0.0.0/8"), "loopback"],
  [METADATA, "metadata"],
  [cidr("169.254.0.0/16"), "link_local"],
  [cidr("172.16.0.0/12"), "private"],
  [cidr("192.0.0.0/24"), "reserved"],
  [cidr("192.0.2.0/24"), "reserved"],
  [cidr("192.88.99.0/24"), "reserved"],
  [cidr("192.168.0.0/16"), "private"],
  [cidr("198.18.0.0/15"), "reserved"],
  [cidr("198.51.100.0/24"), "reserved"],
  [cidr("203.0.113.0/24"), "reserved"],
  [cidr("224.0.0.0/4"), "multicast"],
  [cidr("255.255.255.255/32"), "broadcast"],
  [cidr("240.0.0.0/4"), "reserved"]
]

/** IPv6 prefixes that carry an IPv4 address in their low 32 bits: classified as that address. */
const CARRIES_V4: ReadonlyArray<Cidr> = [cidr("::ffff:0:0/96"), cidr("::/96"), cidr("64:ff9b::/96")]

const V6: ReadonlyArray<readonly [Cidr, Refusal]> = [
  [cidr("::/128"), "unspecified"],
  [cidr("::1/128"), "loopback"],
  [cidr("fc00::/7"), "private"],
  [cidr("fe80::/10"), "link_local"],
  [cidr("ff00::/8"), "multicast"],
  [cidr("2001::/23"), "reserved"], // IETF protocol assignments, Teredo included
  [cidr("2001:db8::/32"), "reserved"],
  [cidr("2002::/16"), "reserved"], // 6to4
  [cidr("3fff::/20"), "reserved"]
]

/** Global unicast: every IPv6 address outside it (and not listed above) is reserved. */
const GLOBAL_V6 = cidr("2000::/3")

const allowed = (version: 4 | 6, value: bigint, allow: ReadonlyArray<Cidr>): boolean => allow.some((c) => inside(version, value, c))

const classifyV4 = (value: bigint, allow: ReadonlyArray<Cidr>): Verdict => {
  if (allowed(4, value, allow)) return OK
  for (const [c, reason] of V4) if (inside(4, value, c)) return { ok: false, reason }
  return OK
}

const classifyV6 = (value: bigint, allow: ReadonlyArray<Cidr>): Verdict => {
  if (allowed(6, value, allow)) return OK
  if (value > 1n && CARRIES_V4.some((c) => inside(6, value, c))) return classifyV4(value & 0xffff_ffffn, allow)
  for (const [c, reason] of V6) if (inside(6, value, c)) return { ok: false, reason }
  return inside(6, value, GLOBAL_V6) ? OK : { ok: false, reason: "reserved" }
}

/** Whether `address` (an IP address's text) may be reached, or why not. */
export const classify = (address: string, allow: ReadonlyArray<Cidr>): Verdict => {
  const a = parseAddress(address)
  if (a === undefined) return { ok: false, reason: "not_an_address" }
  return a.version === 4 ? classifyV4(a.value, allow) : classifyV6(a.value, allow)
}

/** The connect-time rule: the addresses a connection may use, in the resolver's order; none: the first refused one and why. */
export const checkResolved = (
  addresses: ReadonlyArray<string>,
  allow: ReadonlyArray<Cidr>
): { readonly ok: true; readonly addresses: ReadonlyArray<string> } | { readonly ok: false; readonly address: string; readonly reason: Refusal } => {
  const usable: Array<string> = []
  let refused: { readonly address: string; readonly reason: Refusal } | undefined
  for (const address of addresses) {
    const v = classify(address, allow)
    if (v.ok) usable.push(address)
    else refused ??= { address, reason: v.reason }
  }
  if (usable.length > 0) return { ok: true, addresses: usable }
  return { ok: false, ...(refused ?? { address: "", reason: "not_an_address" }) }
}

// ---------------------------------------------------------------------------
// The URL at save

export interface UrlPolicy {
  readonly allow: ReadonlyArray<Cidr>
  /** `endpoints.httpsOnly`. */
  readonly httpsOnly: boolean
}

export type UrlVerdict = { readonly ok: true } | { readonly ok: false; readonly message: string }

const isLocalhostName = (host: string): boolean => {
  const h = host.endsWith(".") ? host.slice(0, -1) : host
  return h === "localhost" || h.endsWith(".localhost")
}

const LOOPBACK_V4 = cidr("127.0.0.0/8")
const LOOPBACK_V6 = cidr("::1/128")

/**
 * A URL as it would be saved: http(s) (https only under `httpsOnly`), and a host that is not a
 * refused literal address nor `localhost`. `localhost` is let through only when the allow list
 * holds loopback (127.0.0.0/8 or ::1). The message names the field (`url: …`).
 */
export const checkUrl = (url: string, policy: UrlPolicy): UrlVerdict => {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return { ok: false, message: "url: expected an absolute http:// or https:// URL" }
  }
  if (u.protocol !== "https:" && (policy.httpsOnly || u.protocol !== "http:")) {
    return { ok: false, message: policy.httpsOnly ? "url: https only (endpoints.httpsOnly)" : "url: expected http:// or https://" }
  }
  // WHATWG has already turned every IPv4 form into dotted decimal and IPv6 into its bracketed short form.
  const host = u.hostname
  const literal = parseAddress(host)
  if (literal !== undefined) {
    const v = classify(host, policy.allow)
    return v.ok ? OK : { ok: false, message: `url: the host is a refused address (${v.reason})` }
  }
  if (isLocalhostName(host)) {
    const loopbackAllowed = policy.allow.some((c) => (c.version === 4 ? inside(4, 0x7f00_0001n, c) : inside(6, 1n, c)))
    return loopbackAllowed ? OK : { ok: false, message: "url: the host is localhost (a loopback name)" }
  }
  return OK
}

export const LOOPBACK: ReadonlyArray<Cidr> = [LOOPBACK_V4, LOOPBACK_V6]
