/**
 * One codec per key layout (layouts.ts), bound to a family's prefix (TEN-1 §1).
 *
 * Only keys.ts builds codecs: it names each family's constructors, and TEN-1 §3, §9 restrict
 * who may call some of them (test/source-rules.test.ts).
 */
import { asBuffer, corrupt, readU16, readU32, readU64, writeU64, zeroed } from "./bytes.js"
import type { Family } from "./families.js"
import type { FixedLayout, Width } from "./layouts.js"

export interface FixedCodec<V extends ReadonlyArray<number>, D extends object> {
  readonly encode: (...values: V) => Uint8Array
  readonly decode: (key: Uint8Array) => D
  /** The key of the leading fields only: a scan bound, below every key that starts with them. */
  readonly lead: (...values: ReadonlyArray<number>) => Uint8Array
  /** The first field of a key of this codec, read in place: no object, no length or prefix check (for hot paths over keys already known to be this family's). */
  readonly first: (key: Uint8Array) => number
}

const get = (k: Uint8Array, w: Width, off: number): number =>
  w === 8 ? readU64(k, off) : w === 4 ? readU32(k, off) : w === 2 ? readU16(k, off) : k[off]!

const put = (b: Buffer, w: Width, n: number, off: number): void => {
  if (w === 8) writeU64(b, n, off)
  else if (w === 4) b.writeUInt32BE(n, off)
  else if (w === 2) b.writeUInt16BE(n, off)
  else b[off] = n
}

const checked = (f: Family, tag: "fixed" | "variable", name?: string): void => {
  if (f.layout._tag !== tag || (name !== undefined && f.layout.name !== name)) {
    throw new Error(`family ${f.name} does not have layout ${name ?? tag}`)
  }
}

export const fixedCodec = <V extends ReadonlyArray<number>, D extends object>(
  family: Family,
  layout: FixedLayout<V, D>
): FixedCodec<V, D> => {
  if (family.layout !== layout) checked(family, "fixed", layout.name)
  const prefix = family.prefix
  const head = prefix === undefined ? 0 : 1
  const size = head + layout.width
  const { read, widths } = layout
  // Fixed arity rather than a spread: a layout has at most four fields, and this runs per key.
  const write = layout.write as unknown as (k: Buffer, off: number, a: number, b: number, c: number, d: number) => void
  if (widths.length > 4) throw new Error(`layout ${layout.name} has more than four fields`)
  // Every byte of a key is written (checked here, once per codec), so encode skips the zero fill.
  const probe = Buffer.alloc(size, 0xff)
  write(probe, head, 0, 0, 0, 0)
  if (probe.subarray(head).some((b) => b !== 0)) throw new Error(`layout ${layout.name} leaves bytes of its ${layout.width} unwritten`)
  const encode = (a: number, b: number, c: number, d: number): Uint8Array => {
    const k = Buffer.allocUnsafe(size)
    if (prefix !== undefined) k[0] = prefix
    write(k, head, a, b, c, d)
    return k
  }
  return {
    encode: encode as unknown as FixedCodec<V, D>["encode"],
    lead: (...values) => {
      let len = head
      for (let i = 0; i < values.length; i++) len += widths[i]!
      const k = zeroed(len)
      if (prefix !== undefined) k[0] = prefix
      for (let i = 0, off = head; i < values.length; off += widths[i]!, i++) put(k, widths[i]!, values[i]!, off)
      return k
    },
    decode: (k) => {
      if (k.length !== size || (prefix !== undefined && k[0] !== prefix)) corrupt(`${family.name} key`, k)
      return read(k, head)
    },
    first: (k) => get(k, widths[0]!, head)
  }
}

const utf8 = (s: string): Buffer => Buffer.from(s, "utf8")
const Z = Buffer.from([0])

const splitTenantAndKey = (family: Family, k: Uint8Array, off: number): { readonly tenant: string; readonly key: string } => {
  const b = asBuffer(k)
  const z = b.indexOf(0, off)
  if (z < 0) return corrupt(`${family.name} key`, k)
  return { tenant: b.toString("utf8", off, z), key: b.toString("utf8", z + 1) }
}

/** <<prefix, tenant, 0, key>>; `lead(tenant)` is every key of a tenant. */
export const tenantKeyCodec = (family: Family) => {
  checked(family, "variable", "tenantKey")
  const p = Buffer.from([family.prefix!])
  return {
    encode: (tenant: string, key: string): Uint8Array => Buffer.concat([p, utf8(tenant), Z, utf8(key)]),
    lead: (tenant: string): Uint8Array => Buffer.concat([p, utf8(tenant), Z]),
    decode: (k: Uint8Array): { readonly tenant: string; readonly key: string } =>
      k[0] === family.prefix ? splitTenantAndKey(family, k, 1) : corrupt(`${family.name} key`, k)
  }
}

/** <<prefix, at::64, tenant, 0, key>>; `lead(at)` bounds a scan by time. */
export const atTenantKeyCodec = (family: Family) => {
  checked(family, "variable", "atTenantKey")
  const lead = (at: number): Buffer => {
    const b = zeroed(9)
    b[0] = family.prefix!
    writeU64(b, at, 1)
    return b
  }
  return {
    encode: (at: number, tenant: string, key: string): Uint8Array => Buffer.concat([lead(at), utf8(tenant), Z, utf8(key)]),
    lead: (at: number): Uint8Array => lead(at),
    decode: (k: Uint8Array): { readonly at: number; readonly tenant: string; readonly key: string } =>
      k.length > 9 && k[0] === family.prefix
        ? { at: readU64(k, 1), ...splitTenantAndKey(family, k, 9) }
        : corrupt(`${family.name} key`, k)
  }
}

/** <<prefix, string>>. */
export const utf8Codec = (family: Family) => {
  checked(family, "variable", "utf8")
  const p = Buffer.from([family.prefix!])
  return {
    encode: (s: string): Uint8Array => Buffer.concat([p, utf8(s)]),
    decode: (k: Uint8Array): string =>
      k.length > 1 && k[0] === family.prefix ? asBuffer(k).toString("utf8", 1) : corrupt(`${family.name} key`, k)
  }
}
