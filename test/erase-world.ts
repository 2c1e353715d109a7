/**
 * The world of the erase tests (TEN-5): a RocksDB store under a data
 * directory with its archive, the services an erase touches (Writer, Queue,
 * Tenants, Quarantine, Audit, Limits, Archive, Erase), tenants filled with
 * rows in every family, and a snapshot of every row of the store and every
 * archived record, each attributed to the tenant that owns it.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Counters from "../src/domain/counters.js"
import { decodeEnvelope, tenantOf } from "../src/domain/envelope.js"
import * as K from "../src/domain/keys.js"
import { ColumnFamilies, type ColumnFamily } from "../src/domain/ops.js"
import { decodeRecord } from "../src/domain/quarantine.js"
import { DEFAULT_LIMITS } from "../src/domain/limits.js"
import * as Archive from "../src/lifecycle/archive.js"
import { listFiles, readSegment } from "../src/lifecycle/archive-files.js"
import * as Audit from "../src/lifecycle/audit.js"
import * as Erase from "../src/lifecycle/erase.js"
import * as Quarantine from "../src/lifecycle/quarantine.js"
import * as Endpoints from "../src/queue/endpoints.js"
import * as Limits from "../src/queue/limits.js"
import * as Queue from "../src/queue/queue.js"
import * as Tenants from "../src/queue/tenants.js"
import * as Wake from "../src/queue/wake.js"
import * as Writer from "../src/queue/writer.js"
import { makeRocksDbStore } from "../src/store/rocksdb.js"
import { Store, type StoreShape } from "../src/store/store.js"

export const SEGMENT_BYTES = 6 * 1024

export interface World {
  readonly dataDir: string
  readonly archiveDir: string
  readonly store: StoreShape
  readonly context: Context.Context<
    Store | Queue.Queue | Tenants.Tenants | Endpoints.Endpoints | Writer.Writer | Quarantine.Quarantine | Audit.Audit | Limits.Limits | Archive.Archive | Erase.Erase
  >
}

export const storeDirOf = (dataDir: string) => path.join(dataDir, "store")

/**
 * The services on a RocksDB store in `<dataDir>/store` (or the store `open` opens), the archive in
 * `<dataDir>/archive`; an erase's unfinished jobs resume as it is built.
 */
export const openWorld = <E = never, R = never>(dataDir: string, erase: Erase.EraseOptions = {}, open?: Effect.Effect<StoreShape, E, R>) =>
  Effect.gen(function* () {
    const archiveDir = Archive.archiveDir(dataDir)
    const store = yield* (open ?? makeRocksDbStore(storeDirOf(dataDir)))
    const base = Layer.mergeAll(
      Queue.layer,
      Tenants.layer,
      Writer.layer({ tenantsMax: 1_000, dedupeWindowMs: 86_400_000, lingerMs: 0 }).pipe(Layer.provide(Wake.layer)),
      Quarantine.layer(),
      Audit.layer(),
      Limits.layer(DEFAULT_LIMITS),
      Endpoints.layer
    )
    const withArchive = Archive.layer({ dir: archiveDir, enabled: true, segmentBytes: SEGMENT_BYTES, blockBytes: 4 * 1024 }).pipe(Layer.provideMerge(base))
    const all = Erase.layer(erase).pipe(Layer.provideMerge(withArchive), Layer.provideMerge(Layer.succeed(Store, store)))
    const context = yield* Layer.build(all)
    return { dataDir, archiveDir, store, context } satisfies World
  })

export const run = <A, E>(w: World, effect: Effect.Effect<A, E, World["context"] extends Context.Context<infer R> ? R : never>) =>
  Effect.provide(effect, w.context)

/** A random marker per tenant, in every body it sends (random bytes: no compressor keeps them as they are by accident). */
export const markerOf = () => randomBytes(24)

export interface Filled {
  readonly markers: ReadonlyMap<string, Buffer>
}

/**
 * Fill `tenants`: `perTenant` hooks each (two sinks, the archive on, every other one with an
 * idempotency key), archived; then per tenant one row delivered, one dead-lettered and one left
 * inflight; a quarantined request and a limits override each.
 */
export const fill = (w: World, tenants: ReadonlyArray<string>, perTenant: number) =>
  run(
    w,
    Effect.gen(function* () {
      const writer = yield* Writer.Writer
      const queue = yield* Queue.Queue
      const markers = new Map<string, Buffer>()
      for (const t of tenants) markers.set(t, markerOf())
      for (let j = 0; j < perTenant; j++) {
        yield* Effect.forEach(
          tenants,
          (t) =>
            writer.submit({
              tenantId: t,
              sourceId: "src",
              sinks: ["s0", "s1"],
              body: Buffer.concat([markers.get(t)!, randomBytes(200), markers.get(t)!]),
              contentType: "application/octet-stream",
              headers: { "x-n": String(j) },
              idempotencyKey: j % 2 === 0 ? `key-${j}` : null,
              archive: true
            }),
          { concurrency: "unbounded" }
        )
      }
      yield* (yield* Archive.Archive).drain
      const now = yield* Clock.currentTimeMillis
      const tenantsApi = yield* Tenants.Tenants
      for (const t of tenants) {
        const ord = yield* tenantsApi.ord(t)
        const [visit] = yield* queue.claim(now + 1, [{ ord, floorAt: 0, limit: 3 }], 3, 1e9)
        const rows = visit!.rows
        const envs = yield* queue.envelopes(rows.map((r) => r.ref.seq))
        const [delivered, dead] = rows
        yield* queue.settle([
          { _tag: "Delivered", ref: { ord, seq: delivered!.ref.seq, sink: delivered!.ref.sink }, size: delivered!.value.size },
          {
            _tag: "DeadLetter",
            ref: { ord, seq: dead!.ref.seq, sink: dead!.ref.sink },
            row: yield* queue.deliveryRow({ ord, seq: dead!.ref.seq, sink: dead!.ref.sink }, dead!.value.size),
            at: now + 2,
            hook: { sourceId: "src", id: envs.get(dead!.ref.seq)!.id }
          }
        ])
        yield* (yield* Quarantine.Quarantine).put({ tenant: t, source: "src", reason: "bad signature", headers: {}, body: Buffer.concat([markers.get(t)!, randomBytes(40)]) })
        const row = yield* (yield* Audit.Audit).stage({ actor: "test", tenants: [t], action: "limits.set", params: {} })
        yield* (yield* Limits.Limits).set(ord, { weight: 3 }, row, t)
        for (const n of [1, 2]) {
          const audit = (yield* Audit.Audit).stage({ actor: "test", tenants: [t], action: "endpoint.create", params: {} })
          yield* (yield* Endpoints.Endpoints).create(ord, { url: `https://${t}.example/${n}` } as never, 10, () => audit)
        }
      }
      // One more hook each, not archived yet: its obligation waits.
      for (const t of tenants) {
        yield* writer.submit({
          tenantId: t,
          sourceId: "src",
          sinks: ["s0"],
          body: Buffer.concat([markers.get(t)!, randomBytes(100)]),
          contentType: "application/octet-stream",
          headers: {},
          idempotencyKey: "last",
          archive: true
        })
      }
      return { markers } satisfies Filled
    })
  )

export interface Row {
  /** What the row is, value included (an archived record: its seq and envelope). */
  readonly id: string
  /** The tenant it belongs to; "aggregate" for ord 0's counters; null for node rows (meta, audit, sentinels). */
  readonly owner: string | null
}

const hex = (b: Uint8Array) => K.asBuffer(b).toString("hex")

/** Tenant names by ordinal, tombstones included (read before an erase, to attribute rows after it). */
export const ordNames = (store: StoreShape) =>
  Effect.map(store.scan("tenants", K.familyDataRange(K.Families.tenants), { limit: 1_000_000 }), (rows) => {
    const m = new Map<number, string>()
    for (const e of rows) m.set(K.decodeTenantKey(e.key), K.asBuffer(e.value).toString("utf8"))
    return m
  })

const ownerOf = (cf: ColumnFamily, key: Uint8Array, value: Uint8Array, names: ReadonlyMap<number, string>, bySeq: ReadonlyMap<number, string>): string | null => {
  const ord = (o: number) => (o === 0 ? "aggregate" : (names.get(o) ?? `#${o}`))
  const seq = (s: number) => bySeq.get(s) ?? `hook#${s}`
  for (const f of K.familiesOf(3)) if (f.cf === cf && K.isSentinel(f, key)) return null
  switch (cf) {
    case "default":
    case "audit":
      return null
    case "hooks":
      return seq(K.decodeHookKey(key))
    case "deliveries":
      return seq(K.decodeDeliveryKey(key).seq)
    case "counters":
      return ord(K.decodeCounterKey(key).ord)
    case "tenants": {
      const p = String.fromCharCode(key[0]!)
      if (p === "t") return ord(K.decodeTenantKey(key))
      if (p === "n") return K.decodeTenantOrdKey(key)
      if (p === "l") return ord(K.decodeTenantLimitsKey(key))
      if (p === "r") return K.decodeErasureKey(key)
      if (p === "e") return ord(K.decodeEndpointKey(key).ord)
      return `unknown:${p}`
    }
    case "index": {
      const p = String.fromCharCode(key[0]!)
      switch (p) {
        case "D":
          return ord(K.decodeDueKey(key).ord)
        case "F":
          return ord(K.decodeInflightKey(key).ord)
        case "X":
          return ord(K.decodeDeadByTenantKey(key).ord)
        case "x":
          return ord(K.decodeDeadValue(value).ord ?? -1)
        case "a":
          return ord(K.decodeArchiveValue(value).ord)
        case "A":
          return ord(K.decodeActiveKey(key).ord)
        case "c":
          return seq(K.decodeClearedKey(key))
        case "u":
          return K.decodeDedupeKey(key).tenant
        case "e":
          return K.decodeExpiryKey(key).tenant
        case "q":
          return decodeRecord(key, value).tenant
      }
      return `unknown:${p}`
    }
  }
}

/** Every row of every column family and every archived record, attributed (`names` from before the erase). */
export const snapshot = (w: World, names: ReadonlyMap<number, string>) =>
  Effect.gen(function* () {
    const hooks = yield* w.store.scan("hooks", K.familyDataRange(K.Families.hooks), { limit: 1_000_000 })
    const bySeq = new Map(hooks.map((e) => [K.decodeHookKey(e.key), tenantOf(decodeEnvelope(e.value))]))
    const rows: Array<Row> = []
    for (const cf of ColumnFamilies) {
      const all = yield* w.store.scan(cf, { lo: new Uint8Array(0), hi: K.CF_END }, { limit: 10_000_000 })
      for (const e of all) rows.push({ id: `${cf}:${hex(e.key)}=${hex(e.value)}`, owner: ownerOf(cf, e.key, e.value, names, bySeq) })
    }
    const files = fs.existsSync(w.archiveDir) ? yield* listFiles(w.archiveDir) : []
    for (const f of files.filter((f) => f.kind === "seg")) {
      for (const r of yield* readSegment(f.path)) {
        rows.push({ id: `archive:${r.seq}:${r.ord}=${hex(r.envelope)}`, owner: names.get(r.ord) ?? `#${r.ord}` })
      }
    }
    return rows
  })

export const idsOf = (rows: ReadonlyArray<Row>, owner: string) => rows.filter((r) => r.owner === owner).map((r) => r.id).sort()

export const countersOf = (store: StoreShape, ord: number) =>
  store.getCounters("counters", Counters.keysOf(ord)).pipe(Effect.map(Counters.fromTotals))
