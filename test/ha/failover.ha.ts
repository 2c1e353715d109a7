/**
 * Failover (issue 41; docs/architecture.md "High availability", docs/deployment.md "High
 * availability"): two `ankusa serve` nodes on one PostgreSQL store, fenced by its lease, under a
 * load that records every 202. Nodes are killed, paused and resumed with real signals, and the
 * database's primary is killed and its synchronous standby promoted. Each test checks that every
 * acknowledged hook reaches the sink (duplicates counted, same `webhook-id`), that no hook id was
 * issued twice, and that the store's counters equal a fold of its rows. The measured times are
 * printed (`ha: ...` lines), and docs/deployment.md gives the latest.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type PgCluster, pgUnavailable, startCluster } from "../support/pg-cluster.js"
import { type AckedBy, ADMIN_TOKEN, HA, type HaNode, killNode, nodeConfig, readyz, sleep, startLoad, startNode, startSink, supervise, until, verify } from "./ha-world.js"
import { startTcpProxy } from "./tcp-proxy.js"

if (pgUnavailable !== undefined) throw new Error(pgUnavailable)

let cluster: PgCluster | undefined
const pg = () => cluster!

const world = Effect.acquireRelease(
  Effect.promise(async () => {
    const dir = mkdtempSync(join(tmpdir(), "ankusa-ha-"))
    const sink = await startSink()
    const db = await pg().createDatabase()
    return { dir, sink, db, nodes: [] as Array<HaNode> }
  }),
  (w) =>
    Effect.promise(async () => {
      for (const n of w.nodes) await killNode(n)
      await w.sink.close()
      rmSync(w.dir, { recursive: true, force: true })
    })
)

const tableDigest = (db: string) =>
  pg().psql(
    new URL(db).pathname.slice(1),
    `SELECT string_agg(t || '=' || d, ' ' ORDER BY t) FROM (
       SELECT 'default' t, md5(coalesce(string_agg(k::text || v::text, ',' ORDER BY k), '')) d FROM ankusa."default"
       UNION ALL SELECT 'hooks', md5(coalesce(string_agg(k::text || v::text, ',' ORDER BY k), '')) FROM ankusa.hooks
       UNION ALL SELECT 'index', md5(coalesce(string_agg(k::text || v::text, ',' ORDER BY k), '')) FROM ankusa."index"
       UNION ALL SELECT 'deliveries', md5(coalesce(string_agg(k::text || v::text, ',' ORDER BY k), '')) FROM ankusa.deliveries
       UNION ALL SELECT 'counters', md5(coalesce(string_agg(k::text || v::text, ',' ORDER BY k), '')) FROM ankusa.counters
       UNION ALL SELECT 'tenants', md5(coalesce(string_agg(k::text || v::text, ',' ORDER BY k), '')) FROM ankusa.tenants
       UNION ALL SELECT 'audit', md5(coalesce(string_agg(k::text || v::text, ',' ORDER BY k), '')) FROM ankusa.audit
       UNION ALL SELECT 'lease', md5(coalesce(string_agg(epoch::text || coalesce(holder, ''), ','), '')) FROM ankusa.lease) x`
  )

const post = (n: HaNode, path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${n.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) })

/** Every acknowledged hook delivered, ids unique, the counters a fold. */
const expectWhole = (db: string, acked: ReadonlyArray<AckedBy>, sink: { seen: Map<string, number> }) =>
  Effect.gen(function* () {
    expect(yield* Effect.promise(() => until(() => acked.every((h) => sink.seen.has(h.id)), 60_000))).toBe(true)
    const v = yield* verify(db, acked, sink as never)
    expect(v.undelivered).toEqual([])
    expect(v.reissued).toBe(0)
    expect(v.lost).toEqual([])
    expect(v.report.differences).toEqual([])
    return v
  })

/**
 * A primary with a synchronous standby of its own (the primary dies here), one database, a TCP
 * forwarder the node reaches it through, a sink answering after `sinkDelayMs`, and node `a`
 * under a service manager. `failover` promotes the standby and moves the forwarder to it.
 */
const databaseWorld = (sinkDelayMs: number) =>
  Effect.gen(function* () {
    const primary = yield* Effect.acquireRelease(
      Effect.promise(() => startCluster({ settings: ["synchronous_standby_names=*"] })),
      (c) => Effect.promise(() => c.stop())
    )
    const standby = yield* Effect.acquireRelease(Effect.promise(() => primary.standby()), (s) => Effect.promise(() => s.stop()))
    const db = yield* Effect.promise(() => primary.createDatabase())
    const name = new URL(db).pathname.slice(1)
    const proxy = yield* Effect.acquireRelease(Effect.promise(() => startTcpProxy(primary.port)), (p) => Effect.promise(() => p.close()))
    const viaProxy = `postgres://postgres@127.0.0.1:${proxy.port}/${name}`
    const dir = mkdtempSync(join(tmpdir(), "ankusa-ha-db-"))
    const sink = yield* Effect.acquireRelease(Effect.promise(() => startSink(sinkDelayMs)), (s) => Effect.promise(() => s.close()))
    const node = yield* Effect.acquireRelease(Effect.promise(() => supervise(dir, "a", nodeConfig(viaProxy, sink.url))), (n) =>
      Effect.promise(() => n.stop()).pipe(Effect.andThen(Effect.sync(() => rmSync(dir, { recursive: true, force: true }))))
    )
    const a = node.current()
    expect(yield* Effect.promise(() => until(async () => (await readyz(a)).status === 200, 30_000))).toBe(true)
    // The primary reports its synchronous standby.
    const replicas = () => fetch(`${a.url}/metrics`).then((r) => r.text())
    expect(
      yield* Effect.promise(() => until(async () => (await replicas()).split("\n").some((l) => l.startsWith("ankusa_store_database_replicas{") && l.includes('state="streaming"') && l.includes('sync_state="sync"') && l.endsWith(" 1")), 10_000))
    ).toBe(true)
    const failover = async () => {
      await standby.promote()
      proxy.retarget(standby.port)
      return Date.now()
    }
    /**
     * Every 202 delivered, then the node stopped (it drains): the store check reads rows and counters
     * in separate statements, so nothing may commit meanwhile (a restarted node still redelivers the
     * rows its boot returned to due).
     */
    const quiet = async (acked: ReadonlyArray<AckedBy>) => {
      await until(() => acked.every((h) => sink.seen.has(h.id)), 60_000)
      await node.drain()
    }
    return { primary, standby, name, sink, node, failover, quiet }
  })

describe("failover", () => {
  beforeAll(async () => {
    cluster = await startCluster()
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  it.live("a standby answers 503 standby and writes nothing", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world
        const config = nodeConfig(w.db, w.sink.url)
        const a = yield* Effect.promise(() => startNode(w.dir, "a", config))
        w.nodes.push(a)
        expect(yield* Effect.promise(() => until(async () => (await readyz(a)).status === 200, 30_000))).toBe(true)
        const b = yield* Effect.promise(() => startNode(w.dir, "b", config))
        w.nodes.push(b)
        expect(yield* Effect.promise(() => until(async () => (await readyz(b)).body.phase === "standby", 10_000))).toBe(true)
        // The active node paused, so nothing but the standby could write while the tables are compared.
        a.signal("SIGSTOP")
        const before = tableDigest(w.db)
        const ingest = yield* Effect.promise(() => post(b, "/v1/hooks/ha", { x: 1 }, { "x-tenant": "acme" }))
        expect(ingest.status).toBe(503)
        expect(((yield* Effect.promise(() => ingest.json())) as { error: string }).error).toBe("standby")
        expect(Number(ingest.headers.get("retry-after"))).toBeGreaterThan(0)
        const admin = yield* Effect.promise(() => post(b, "/v1/tenants/acme/endpoints", { url: "https://acme.example/in" }, { authorization: `Bearer ${ADMIN_TOKEN}` }))
        expect(admin.status).toBe(503)
        expect(((yield* Effect.promise(() => admin.json())) as { error: string }).error).toBe("standby")
        yield* Effect.promise(() => sleep(1_000))
        expect(tableDigest(w.db)).toBe(before)
        a.signal("SIGCONT")
        // Once the active node stops, it gives the lease up and the standby serves.
        a.signal("SIGTERM")
        expect(yield* Effect.promise(() => until(async () => (await readyz(b)).status === 200, 20_000))).toBe(true)
        expect((yield* Effect.promise(() => post(b, "/v1/hooks/ha", { x: 2 }, { "x-tenant": "acme" }))).status).toBe(202)
      })
    ), 90_000)

  it.live("a killed active node is replaced by its standby and every acknowledged hook is delivered", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world
        const config = nodeConfig(w.db, w.sink.url)
        const a = yield* Effect.promise(() => startNode(w.dir, "a", config))
        expect(yield* Effect.promise(() => until(async () => (await readyz(a)).status === 200, 30_000))).toBe(true)
        const b = yield* Effect.promise(() => startNode(w.dir, "b", config))
        w.nodes.push(a, b)
        const acked: Array<AckedBy> = []
        const load = startLoad(() => [a, b], acked)
        yield* Effect.promise(() => sleep(2_000))
        const killedAt = Date.now()
        a.signal("SIGKILL")
        expect(yield* Effect.promise(() => until(() => acked.some((h) => h.node === "b"), 30_000))).toBe(true)
        const firstB = acked.find((h) => h.node === "b")!
        console.log(`ha: kill of the active node to the standby's first 202: ${firstB.at - killedAt} ms`)
        yield* Effect.promise(() => sleep(1_500))
        yield* Effect.promise(load.stop)
        expect(acked.filter((h) => h.node === "a").length).toBeGreaterThan(0)
        const v = yield* expectWhole(w.db, acked, w.sink)
        console.log(`ha: kill: ${acked.length} acknowledged, ${v.duplicates} delivered twice`)
      })
    ), 120_000)

  it.live("a paused active node loses its lease, the standby takes over, and the resumed node commits nothing and steps down", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const w = yield* world
        const config = nodeConfig(w.db, w.sink.url)
        const a = yield* Effect.promise(() => startNode(w.dir, "a", config))
        expect(yield* Effect.promise(() => until(async () => (await readyz(a)).status === 200, 30_000))).toBe(true)
        const b = yield* Effect.promise(() => startNode(w.dir, "b", config))
        w.nodes.push(a, b)
        const acked: Array<AckedBy> = []
        const load = startLoad(() => [a, b], acked)
        yield* Effect.promise(() => sleep(2_000))
        const pausedAt = Date.now()
        a.signal("SIGSTOP")
        expect(yield* Effect.promise(() => until(() => acked.some((h) => h.node === "b"), 30_000))).toBe(true)
        const firstB = acked.find((h) => h.node === "b")!
        console.log(`ha: pause of the active node to the standby's first 202: ${firstB.at - pausedAt} ms (ha.leaseMs ${HA.leaseMs})`)
        const resumedAt = Date.now()
        a.signal("SIGCONT")
        // The resumed node finds its lease gone at its next renewal and stops.
        const code = yield* Effect.promise(() => Promise.race([a.exited, sleep(30_000).then(() => "running" as const)]))
        expect(code, a.output().slice(-4_000)).toBe(75)
        expect(a.output()).toContain("lease lost")
        console.log(`ha: the resumed node stepped down in ${Date.now() - resumedAt} ms`)
        yield* Effect.promise(() => sleep(500))
        yield* Effect.promise(load.stop)
        // Nothing it acknowledged after the takeover: any 202 of the old node is of a hook committed before it.
        const lateA = acked.filter((h) => h.node === "a" && h.seq >= firstB.seq)
        expect(lateA).toEqual([])
        const v = yield* expectWhole(w.db, acked, w.sink)
        console.log(`ha: pause: ${acked.length} acknowledged, ${v.duplicates} delivered twice`)
      })
    ), 120_000)

  it.live("the database primary killed and its synchronous standby promoted loses no acknowledged hook", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const d = yield* databaseWorld(0)
        const acked: Array<AckedBy> = []
        const load = startLoad(() => [d.node.current()], acked)
        yield* Effect.promise(() => sleep(2_000))
        const killedAt = Date.now()
        yield* Effect.promise(() => d.primary.kill())
        const before = acked.length
        const movedAt = yield* Effect.promise(d.failover)
        expect(yield* Effect.promise(() => until(() => acked.length > before && acked[acked.length - 1]!.at > movedAt, 60_000))).toBe(true)
        const first = acked.find((h) => h.at > movedAt)!
        console.log(`ha: the database primary's death to the first 202 on the promoted standby: ${first.at - killedAt} ms`)
        yield* Effect.promise(() => sleep(1_500))
        yield* Effect.promise(load.stop)
        yield* Effect.promise(() => d.quiet(acked))
        const v = yield* expectWhole(d.standby.url(d.name), acked, d.sink)
        // A restart is the answer to unsynced commits the standby never received (the next test); any other exit is a failure.
        expect(d.node.exits.filter((c) => c !== 70)).toEqual([])
        console.log(`ha: database failover: ${acked.length} acknowledged, ${v.duplicates} delivered twice, ${d.node.exits.length} restarts`)
      })
    ), 150_000)

  it.live("unsynced commits the promoted standby never received restart the node, which loses no acknowledged hook", () =>
    Effect.scoped(
      Effect.gen(function* () {
        // A slow sink, so that a backlog builds up under the load and deliveries go on after it stops.
        const d = yield* databaseWorld(100)
        const acked: Array<AckedBy> = []
        const load = startLoad(() => [d.node.current()], acked)
        yield* Effect.promise(() => sleep(2_000))
        // Ingest stopped (its synced commits would hold every pooled connection while the standby
        // waits), then the primary's WAL sender: what commits from now on never reaches the standby,
        // and the deliveries' claims and outcomes, unsynced, are acknowledged all the same.
        yield* Effect.promise(load.stop)
        const senders = d.primary.psql("postgres", "SELECT pid FROM pg_stat_replication").trim().split("\n").map(Number)
        expect(senders.length).toBe(1)
        process.kill(senders[0]!, "SIGSTOP")
        const delivered = d.sink.seen.size
        expect(yield* Effect.promise(() => until(() => d.sink.seen.size >= delivered + 32, 10_000))).toBe(true)
        const killedAt = Date.now()
        yield* Effect.promise(() => d.primary.kill())
        process.kill(senders[0]!, "SIGKILL")
        const movedAt = yield* Effect.promise(d.failover)
        // The node's next commit finds the lost ones missing; it exits 70 and its restart rebuilds from the store.
        expect(yield* Effect.promise(() => until(() => d.node.exits.length > 0, 30_000))).toBe(true)
        expect(d.node.exits[0]).toBe(70)
        expect(d.node.outputs[0]).toContain("the database lost commits it had acknowledged")
        const again = startLoad(() => [d.node.current()], acked)
        expect(yield* Effect.promise(() => until(() => acked.some((h) => h.at > movedAt), 60_000))).toBe(true)
        const first = acked.find((h) => h.at > movedAt)!
        console.log(`ha: lost unsynced commits: the primary's death to the restarted node's first 202: ${first.at - killedAt} ms`)
        yield* Effect.promise(() => sleep(1_500))
        yield* Effect.promise(again.stop)
        yield* Effect.promise(() => d.quiet(acked))
        const v = yield* expectWhole(d.standby.url(d.name), acked, d.sink)
        expect(d.node.exits).toEqual([70])
        console.log(`ha: lost unsynced commits: ${acked.length} acknowledged, ${v.duplicates} delivered twice`)
      })
    ), 150_000)
})
