/**
 * The world of test/crash.test.ts: sinks that succeed, fail and time out; a
 * continuous ingest load over many tenants that remembers every hook answered
 * 202; and the offline check of a killed server's store: every acknowledged
 * hook has, for each of its sinks, a delivery seen by the sink or a due,
 * inflight or dead row under its tenant's ordinal, and `checkStore` is clean.
 */
import { Effect, Stream } from "effect"
import { createServer, type Server } from "node:http"
import * as K from "../../src/domain/keys.js"
import { checkStore, type CheckReport } from "../../src/queue/format/check.js"
import { familyRows } from "../../src/store/family.js"
import { makeRocksDbStore } from "../../src/store/rocksdb.js"
import type { StoreShape } from "../../src/store/store.js"

/** Sinks of every hook, in fan-out order: `ok` answers 204, `fail` 500, `slow` never (the sink times out). */
export const SINKS = ["ok", "fail", "slow"] as const
export const TENANTS = 40
/** Concurrent ingest loops. */
export const INGEST_LOOPS = 6

export interface Sinks {
  readonly url: string
  /** webhook-ids the ok sink answered 204 to. */
  readonly delivered: Set<string>
  readonly attempts: Record<(typeof SINKS)[number], number>
  readonly close: () => Promise<void>
}

export const startSinks = (): Promise<Sinks> =>
  new Promise((resolve) => {
    const delivered = new Set<string>()
    const attempts = { ok: 0, fail: 0, slow: 0 }
    const server: Server = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const sink = (req.url ?? "").slice(1) as (typeof SINKS)[number]
        if (sink in attempts) attempts[sink]++
        if (sink === "ok") {
          delivered.add(String(req.headers["webhook-id"]))
          res.writeHead(204).end()
        } else if (sink === "fail") res.writeHead(500).end()
        // slow: never answered; the pipeline's timeout cuts it.
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const a = server.address()
      const port = typeof a === "object" && a !== null ? a.port : 0
      resolve({
        url: `http://127.0.0.1:${port}`,
        delivered,
        attempts,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })

/** The server's configuration: retries after 20 and 40 ms, then the DLQ; a 100 ms timeout for the slow sink. */
export const crashConfig = (sinks: Sinks) => ({
  sources: [{ id: "crash", tenant: { header: "x-tenant" }, routes: [...SINKS] }],
  sinks: SINKS.map((name) => ({
    name,
    url: `${sinks.url}/${name}`,
    timeoutMs: 100,
    concurrency: 8,
    retry: { delaysMs: [20, 40], jitter: 0 }
  })),
  pipeline: { tickMs: 20 },
  gauges: { intervalMs: 1_000 },
  // The failing sinks must keep failing rows into retries and the DLQ: their breakers never open here.
  breaker: { minCalls: 1_000_000 },
  http: { demoSink: false },
  log: { level: "info" }
})

export interface Acked {
  readonly id: string
  readonly seq: number
  readonly tenant: string
}

/** Ingest loops against `url` until stopped; a request that gets no 202 (the server died) claims nothing. */
export const startIngest = (url: string, acked: Array<Acked>) => {
  let running = true
  let n = 0
  const loop = async () => {
    while (running) {
      const tenant = `tenant-${(n++ * 7) % TENANTS}`
      try {
        const r = await fetch(`${url}/v1/hooks/crash`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-tenant": tenant },
          body: JSON.stringify({ n, tenant })
        })
        const text = await r.text()
        if (r.status === 202) {
          const { id, seq } = JSON.parse(text) as { id: string; seq: number }
          acked.push({ id, seq, tenant })
        }
      } catch {
        // Connection refused or reset by the kill: not acknowledged.
        await new Promise((r) => setTimeout(r, 20))
      }
    }
  }
  const loops = Array.from({ length: INGEST_LOOPS }, loop)
  return {
    stop: async () => {
      running = false
      await Promise.all(loops)
    }
  }
}

export interface Inspection {
  readonly report: CheckReport
  /** `<id> sink <name>` of every acknowledged row with no trace. */
  readonly lost: ReadonlyArray<string>
  readonly traces: { readonly delivered: number; readonly due: number; readonly inflight: number; readonly dead: number }
}

/** `ord/seq/sink` of every row of a family. */
const keysOf = (store: StoreShape, family: K.Family, decode: (k: Uint8Array) => K.InflightRef) =>
  familyRows(store, family).pipe(
    Stream.runCollect,
    Effect.map((c) => new Set(c.map((e) => {
      const r = decode(e.key)
      return `${r.ord}/${r.seq}/${r.sink}`
    })))
  )

/** Open the killed server's store (as its restart would), check it, and trace every acknowledged row. */
export const inspect = (storeDir: string, acked: ReadonlyArray<Acked>, delivered: ReadonlySet<string>) =>
  inspectStore(makeRocksDbStore(storeDir, { commitThread: "main" }), acked, delivered)

/** `inspect` on a store `open` opens for the check's scope (any layer), for the hooks' `sinks` in fan-out order. */
export const inspectStore = <E, R>(
  open: Effect.Effect<StoreShape, E, R>,
  acked: ReadonlyArray<Acked>,
  delivered: ReadonlySet<string>,
  sinks: ReadonlyArray<string> = SINKS
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* open
      const report = yield* checkStore(store)
      const due = yield* keysOf(store, K.Families.due, K.decodeDueKey)
      const inflight = yield* keysOf(store, K.Families.inflight, K.decodeInflightKey)
      const dead = yield* keysOf(store, K.Families.dead_by_tenant, K.decodeDeadByTenantKey)
      const ords = new Map<string, number | undefined>()
      const lost: Array<string> = []
      const traces = { delivered: 0, due: 0, inflight: 0, dead: 0 }
      for (const h of acked) {
        if (!ords.has(h.tenant)) {
          const v = yield* store.get("tenants", K.tenantOrdKey(h.tenant))
          ords.set(h.tenant, v === undefined ? undefined : K.decodeU32(v))
        }
        const ord = ords.get(h.tenant)
        sinks.forEach((name, sink) => {
          const key = `${ord}/${h.seq}/${sink}`
          if (name === "ok" && delivered.has(h.id)) traces.delivered++
          else if (due.has(key)) traces.due++
          else if (inflight.has(key)) traces.inflight++
          else if (dead.has(key)) traces.dead++
          else lost.push(`${h.id} (tenant ${h.tenant}, ord ${ord}) sink ${name}`)
        })
      }
      return { report, lost, traces } satisfies Inspection
    })
  )
