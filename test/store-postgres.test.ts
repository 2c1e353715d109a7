/**
 * The PostgreSQL layer on a real server: a throwaway PostgreSQL 15 cluster for this file
 * (test/support/pg-cluster.ts), a fresh database per store. Skipped, with the reason printed,
 * where PostgreSQL 15 is not installed (scripts/ensure-postgres.sh).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer, Stream } from "effect"
import fc from "fast-check"
import * as net from "node:net"
import { asBuffer, compare } from "../src/domain/keys.js"
import { type Batch, type ColumnFamily, del, deleteRange, encodeInt64LE, merge, type Op, put } from "../src/domain/ops.js"
import { makeMemoryStore } from "../src/store/memory.js"
import { layerPostgres, type PostgresOptions } from "../src/store/postgres.js"
import { CONFIRM_MS } from "../src/store/postgres-commit.js"
import { POSTGRES_SCHEMA_VERSION } from "../src/store/postgres-schema.js"
import { Store, type StoreShape } from "../src/store/store.js"
import { storeConformance } from "./store-conformance.js"
import { type PgCluster, pgUnavailable, startCluster } from "./support/pg-cluster.js"

if (pgUnavailable !== undefined) console.warn(pgUnavailable)

let cluster: PgCluster | undefined
const pg = () => {
  if (cluster === undefined) throw new Error("the PostgreSQL cluster is not running")
  return cluster
}
const dbOf = (url: string) => new URL(url).pathname.slice(1)

if (pgUnavailable === undefined) {
  beforeAll(async () => {
    cluster = await startCluster()
  })
  afterAll(async () => {
    await cluster?.stop()
  })
}

const freshDatabase = Effect.promise(() => pg().createDatabase())
const openStore = (options: PostgresOptions) => Effect.map(Layer.build(layerPostgres(options)), Context.get(Store))

/** A key the poison constraint refuses: a batch holding it fails in the server, after its other ops. */
const POISON_KEY = Buffer.from([0x7f, 0xee])

if (pgUnavailable === undefined) {
  storeConformance<string>({
    name: "postgres",
    fresh: freshDatabase,
    layer: (url, opts) => layerPostgres({ url, ...opts }),
    poison: (url) =>
      Effect.sync(() => {
        pg().psql(dbOf(url), `ALTER TABLE ankusa.audit ADD CONSTRAINT poison CHECK (k <> '\\x${POISON_KEY.toString("hex")}'::bytea)`)
        return [put("audit", POISON_KEY, Buffer.from([1]))]
      })
  })
} else {
  describe.skip("Store conformance: postgres", () => {
    it("needs PostgreSQL 15", () => {})
  })
}

const hex = (b: Uint8Array) => asBuffer(b).toString("hex")
const WHOLE = { lo: Buffer.alloc(0), hi: Buffer.alloc(12, 0xff) }
const FAMILIES: ReadonlyArray<ColumnFamily> = ["hooks", "index", "counters"]

const dump = (store: StoreShape, cf: ColumnFamily) =>
  Effect.map(Stream.runCollect(store.stream(cf, WHOLE, { chunk: 7 })), (es) => es.map((e) => `${hex(e.key)}=${hex(e.value)}`))

// Keys of a small space, so that ops collide: a prefix, then up to two of 00, 01, ff (prefixes of one another included).
const key = fc
  .tuple(fc.constantFrom(0x10, 0x20), fc.array(fc.constantFrom(0x00, 0x01, 0xff), { maxLength: 2 }))
  .map(([p, rest]) => Buffer.from([p, ...rest]))
// Counter keys are a tenant's (ord, field): 5 bytes, between the family's two sentinels.
const counterKey = fc.tuple(fc.constantFrom(1, 2, 0x101), fc.constantFrom(0x00, 0x01, 0xff)).map(([ord, f]) => Buffer.from([0, 0, ord >> 8, ord & 0xff, f]))
const keyOf = (cf: ColumnFamily) => (cf === "counters" ? counterKey : key)
const delta = fc.oneof(fc.bigInt(-1000n, 1000n), fc.bigInt(-(1n << 63n), (1n << 63n) - 1n))
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.tuple(fc.constantFrom<ColumnFamily>("hooks", "index"), key, fc.uint8Array({ maxLength: 3 })).map(([cf, k, v]) => put(cf, k, v)),
  fc.tuple(counterKey, delta).map(([k, d]) => put("counters", k, encodeInt64LE(d))),
  fc.constantFrom(...FAMILIES).chain((cf) => keyOf(cf).map((k) => del(cf, k))),
  { arbitrary: fc.tuple(counterKey, delta).map(([k, d]) => merge("counters", k, d)), weight: 3 },
  fc.constantFrom(...FAMILIES).chain((cf) => fc.tuple(keyOf(cf), keyOf(cf)).map(([lo, hi]) => deleteRange(cf, lo, hi)))
)
const batches = fc.array(fc.tuple(fc.array(op, { maxLength: 12 }), fc.boolean()), { minLength: 1, maxLength: 8 })

/** The counters as a plain fold of the batches: a put sets, a delete or a range drops, a merge adds (wrapping at 64 bits). */
const foldCounters = (bs: ReadonlyArray<Batch>): Map<string, bigint> => {
  const totals = new Map<string, bigint>()
  for (const ops of bs) {
    for (const o of ops) {
      if (o.cf !== "counters") continue
      if (o._tag === "put") totals.set(hex(o.key), asBuffer(o.value).readBigInt64LE(0))
      else if (o._tag === "del") totals.delete(hex(o.key))
      else if (o._tag === "merge") totals.set(hex(o.key), BigInt.asIntN(64, (totals.get(hex(o.key)) ?? 0n) + o.delta))
      else for (const k of [...totals.keys()]) if (compare(Buffer.from(k, "hex"), o.lo) >= 0 && compare(Buffer.from(k, "hex"), o.hi) < 0) totals.delete(k)
    }
  }
  return totals
}

let schemas = 0

describe.skipIf(pgUnavailable !== undefined)("Store on PostgreSQL", () => {
  it.effect("the postgres layer's counters equal a fold after random batches", () =>
    Effect.gen(function* () {
      const url = yield* freshDatabase
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(batches, (bs) =>
            Effect.runPromise(
              Effect.scoped(
                Effect.gen(function* () {
                  // A schema of its own per run: a fresh store in the same database.
                  const store = yield* openStore({ url, schema: `prop_${++schemas}` })
                  const memory = yield* makeMemoryStore()
                  for (const [ops, sync] of bs) {
                    yield* store.write(ops, { sync })
                    yield* memory.write(ops, { sync })
                  }
                  const expected = foldCounters(bs.map(([ops]) => ops))
                  const keys = [...expected.keys()].map((k) => Buffer.from(k, "hex"))
                  expect(yield* store.getCounters("counters", keys)).toEqual([...expected.values()])
                  // No counter beyond the fold's (the two sentinels aside).
                  expect(yield* dump(store, "counters")).toHaveLength(expected.size + 2)
                  for (const cf of FAMILIES) expect(yield* dump(store, cf), cf).toEqual(yield* dump(memory, cf))
                })
              )
            )
          ),
          { numRuns: 40 }
        )
      )
    }), 120_000)

  it.effect("a postgres store refuses a schema newer than the build", () =>
    Effect.gen(function* () {
      const url = yield* freshDatabase
      const row = Buffer.from([1, 2, 3])
      yield* Effect.scoped(Effect.flatMap(openStore({ url }), (s) => s.write([put("hooks", row, row)], { sync: true })))
      const newer = POSTGRES_SCHEMA_VERSION + 1
      pg().psql(dbOf(url), `UPDATE ankusa.meta SET value = ${newer} WHERE name = 'schema_version'`)
      const err = yield* Effect.scoped(openStore({ url })).pipe(Effect.flip)
      expect(err).toMatchObject({ _tag: "StoreFormatNewer", found: newer, supported: POSTGRES_SCHEMA_VERSION, of: "postgres schema" })
      expect(err.message).toBe(`postgres schema ${newer} is newer than this build supports (${POSTGRES_SCHEMA_VERSION})`)
      // It changed nothing: the stamp and the rows are as the newer release left them.
      expect(pg().psql(dbOf(url), "SELECT value FROM ankusa.meta WHERE name = 'schema_version'").trim()).toBe(String(newer))
      expect(pg().psql(dbOf(url), "SELECT encode(v, 'hex') FROM ankusa.hooks WHERE k = '\\x010203'").trim()).toBe("010203")
      pg().psql(dbOf(url), `UPDATE ankusa.meta SET value = ${POSTGRES_SCHEMA_VERSION} WHERE name = 'schema_version'`)
      const store = yield* openStore({ url })
      expect(yield* store.get("hooks", row)).toEqual(row)
    }))

  it.live("a commit whose answer is lost is applied once and reported committed; one never sent is reported failed", () =>
    Effect.gen(function* () {
      const url = new URL(yield* freshDatabase)
      // A forwarder that can swallow the server's answers and then cut its connections.
      let swallow = false
      let cutUp = false
      const open = new Set<net.Socket>()
      const proxy = net.createServer((client) => {
        const upstream = net.connect(Number(url.port), "127.0.0.1")
        for (const sock of [client, upstream]) {
          open.add(sock)
          sock.on("close", () => open.delete(sock))
          sock.on("error", () => sock.destroy())
        }
        client.on("data", (d) => void (cutUp || upstream.write(d)))
        upstream.on("data", (d) => void (swallow || client.write(d)))
        client.on("close", () => upstream.destroy())
        upstream.on("close", () => client.destroy())
      })
      yield* Effect.promise(() => new Promise<void>((r) => proxy.listen(0, "127.0.0.1", () => r())))
      yield* Effect.addFinalizer(() => Effect.promise(() => new Promise<void>((r) => proxy.close(() => r()))))
      const via = new URL(url.href)
      via.port = String((proxy.address() as net.AddressInfo).port)
      const store = yield* openStore({ url: via.href, connectTimeoutMs: 2_000 })
      const key = Buffer.from([0x00, 0x00, 0x00, 0x01, 0x61])
      yield* store.write([merge("counters", key, 1n)], { sync: true })
      // The next commit reaches the server and commits; its answer never comes back, then the connection drops.
      swallow = true
      const lost = Effect.runPromiseExit(store.write([merge("counters", key, 1n)], { sync: true }))
      yield* Effect.sleep("500 millis")
      swallow = false
      for (const sock of open) sock.destroy()
      const exit = yield* Effect.promise(() => lost)
      // Settled by its token: committed, so a success, and the caller has nothing to send again.
      expect(exit._tag).toBe("Success")
      expect(yield* store.getCounters("counters", [key])).toEqual([2n])
      expect(pg().psql(dbOf(url.href), "SELECT count(*) FROM ankusa.applied").trim()).toBe("3")
      // A commit that never reaches the server: settled as absent (its token poisoned), so a failure
      // the caller may send again, and the counter moved by nobody.
      cutUp = true
      const never = Effect.runPromiseExit(store.write([merge("counters", key, 1n)], { sync: true }))
      yield* Effect.sleep("300 millis")
      cutUp = false
      for (const sock of open) sock.destroy()
      expect((yield* Effect.promise(() => never))._tag).toBe("Failure")
      expect(yield* store.getCounters("counters", [key])).toEqual([2n])
      expect(pg().psql(dbOf(url.href), "SELECT count(*) FROM ankusa.applied WHERE poisoned").trim()).toBe("1")
    }), 60_000)

  it.live("an idle store confirms its last unsynced commits with a synced one within CONFIRM_MS, and the confirm refuses a token the database lost", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const db = dbOf(url)
        const store = yield* openStore({ url })
        const tokens = () => pg().psql(db, "SELECT token FROM ankusa.applied ORDER BY at, token").trim().split("\n").filter((l) => l !== "")
        const k = Buffer.from([0, 0, 0, 1, 0])
        // The open's own synced commits first: settled, so the confirmer has nothing to do.
        yield* Effect.sleep(Duration.millis(CONFIRM_MS * 2 + 500))
        const opened = tokens().length
        yield* store.write([merge("counters", k, 1n)], { sync: false })
        const unsynced = tokens()[opened]
        // The next commit confirms it in its own statement (what loses it is test/ha's: unsynced commits the promoted standby never received).
        yield* store.write([merge("counters", k, 1n)], { sync: false })
        expect(tokens()).toHaveLength(opened + 2)
        // Nothing else sent: the confirmer commits a token of its own, synced, within CONFIRM_MS and a poll.
        yield* Effect.sleep(Duration.millis(CONFIRM_MS * 2 + 500))
        expect(tokens()).toHaveLength(opened + 3)
        // Idle and confirmed: no more.
        yield* Effect.sleep(Duration.millis(CONFIRM_MS * 2 + 500))
        expect(tokens()).toHaveLength(opened + 3)
        // The check itself: a token the database does not hold fails the statement with LOST_SQLSTATE.
        pg().psql(db, `SELECT ankusa.confirm(ARRAY[${unsynced}]::bigint[])`)
        const missing = (() => {
          try {
            pg().psql(db, `SELECT ankusa.confirm(ARRAY[${unsynced}, 1]::bigint[])`)
            return "no error"
          } catch (e) {
            return String((e as { stderr?: unknown }).stderr)
          }
        })()
        expect(missing).toContain("lost: 1 of 2 acknowledged commits are not in the database")
      })
    ), 30_000)

  it.effect("a schema 3 database gets the confirm function at its next open", () =>
    Effect.gen(function* () {
      const url = yield* freshDatabase
      yield* Effect.scoped(openStore({ url }))
      pg().psql(dbOf(url), "DROP FUNCTION ankusa.confirm(bigint[]); UPDATE ankusa.meta SET value = 3 WHERE name = 'schema_version'")
      yield* Effect.scoped(Effect.flatMap(openStore({ url }), (s) => s.write([merge("counters", Buffer.from([0, 0, 0, 1, 0]), 1n)], { sync: false })))
      expect(pg().psql(dbOf(url), "SELECT value FROM ankusa.meta WHERE name = 'schema_version'").trim()).toBe(String(POSTGRES_SCHEMA_VERSION))
      expect(pg().psql(dbOf(url), "SELECT count(*) FROM pg_proc WHERE proname = 'confirm'").trim()).toBe("1")
    }))

  it.effect("a store that cannot connect fails to open with a StoreError that names the host and not the password", () =>
    Effect.gen(function* () {
      const url = `postgres://ankusa:s3cret-pw@127.0.0.1:${pg().port + 1}/nowhere`
      const err = yield* Effect.scoped(openStore({ url, connectTimeoutMs: 2_000 })).pipe(Effect.flip)
      expect(err._tag).toBe("StoreError")
      expect(err.message).toContain("127.0.0.1")
      expect(err.message).not.toContain("s3cret-pw")
    }))
})
