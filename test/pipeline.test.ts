import { randomBytes } from "node:crypto"
import type { IncomingHttpHeaders } from "node:http"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Metric } from "effect"
import fc from "fast-check"
import * as Counters from "../src/domain/counters.js"
import * as Deliveries from "../src/domain/deliveries.js"
import * as K from "../src/domain/keys.js"
import { del, put } from "../src/domain/ops.js"
import type { RetrySchedule } from "../src/domain/retry-schedule.js"
import * as Signature from "../src/domain/signature.js"
import * as M from "../src/observability/delivery-metrics.js"
import * as Queue from "../src/queue/queue.js"
import { COMMIT_RETRY_MS, type SinkOptions } from "../src/delivery/pipeline.js"
import { Store, StoreError } from "../src/store/store.js"
import { fast, makeIngest, memoryWorld, rocksWorld, sinkOf, startPipeline, until, type World } from "./pipeline-world.js"
import { type Received, startSink } from "./sink-server.js"

const secret = () => `whsec_${randomBytes(24).toString("base64")}`
const header = (h: IncomingHttpHeaders) => (name: string) => {
  const v = h[name]
  return Array.isArray(v) ? v.join(",") : v
}

const aggregateIsZero = (w: World) =>
  w.queue.aggregate.pipe(Effect.map((c) => c.pending === 0 && c.scheduled === 0 && c.inflight === 0 && c.bytes === 0 && c.dead === 0))

/** Wait until every row is delivered and none is inflight; the most rows inflight at once meanwhile. */
const drainedInflightPeak = (w: World, inflight: Effect.Effect<number>) =>
  Effect.gen(function* () {
    let peak = 0
    yield* until(
      "every row is delivered",
      Effect.zipWith(aggregateIsZero(w), inflight, (zero, n) => {
        peak = Math.max(peak, n)
        return zero && n === 0
      })
    )
    return peak
  })
const count = (sink: string, o: M.Outcome) => Metric.value(M.outcome(sink, o)).pipe(Effect.map((s) => s.count))

const row = (w: World, seq: number, sink: number) =>
  w.store.get("deliveries", K.deliveryKey(seq, sink)).pipe(Effect.map(Deliveries.decodeRow))

const gaps = (rs: ReadonlyArray<Received>) => rs.slice(1).map((r, i) => r.at - rs[i]!.at)

/** A memory world whose Queue records the `limit` of every `activeTenants` call (the tick's marker scans). */
describe("pipeline", () => {
  it.live("a hook is delivered to every sink of its route", () =>
    Effect.gen(function* () {
      const w = yield* rocksWorld
      const a = yield* startSink()
      const b = yield* startSink(() => ({ status: 200, body: "ok" }))
      const c = yield* startSink(() => ({ status: 202 }))
      const secretA = secret()
      const secretC = secret()
      const sinks = [
        sinkOf("a", a.url, { secret: secretA, headers: { "X-Api-Key": "key-a" } }),
        sinkOf("b", b.url, { headers: { authorization: "Bearer b" } }),
        sinkOf("c", c.url, { secret: secretC, concurrency: 1 })
      ]
      const before = { a: yield* count("a", "delivered"), b: yield* count("b", "delivered"), c: yield* count("c", "delivered") }
      const now = Date.now()
      const ingest = makeIngest(w.store)
      const hooks = yield* ingest([
        {
          tenant: "acme",
          sinks: ["a", "b", "c"],
          at: now,
          body: Buffer.from('{"event":"paid","amount":12}'),
          contentType: "application/vnd.acme+json",
          // A kept ingest header is forwarded; the upstream's own signature never is.
          headers: { "x-upstream": "shop-1", "webhook-signature": "v1,upstream" }
        },
        { tenant: "globex", sinks: ["c", "a"], at: now, body: randomBytes(300), contentType: "application/octet-stream" }
      ])
      const more = yield* ingest([{ tenant: "acme", sinks: ["b"], at: now, body: Buffer.from("x=1&y=2"), contentType: "application/x-www-form-urlencoded" }])
      const all = [...hooks, ...more]

      const { pipeline } = yield* startPipeline(w, { tickMs: 20, sinks })
      const expected = (name: string) => all.filter((h) => h.sinks.includes(name))
      yield* until("every sink received its hooks", Effect.sync(() => a.received.length >= 2 && b.received.length >= 2 && c.received.length >= 2))
      // The pipeline counts a row settled (and its metrics) just after the commit that the counters show.
      yield* until("the counters return to zero", Effect.zipWith(aggregateIsZero(w), pipeline.inflight, (zero, n) => zero && n === 0))

      const keys = { a: Signature.parseSecret(secretA)!, c: Signature.parseSecret(secretC)! }
      for (const [name, server] of [["a", a], ["b", b], ["c", c]] as const) {
        const want = expected(name)
        expect(server.received.map((r) => r.headers["webhook-id"]).sort()).toEqual(want.map((h) => h.id).sort())
        for (const r of server.received) {
          const h = want.find((x) => x.id === r.headers["webhook-id"])!
          expect(r.method).toBe("POST")
          expect(Buffer.compare(r.body, Buffer.from(h.envelope.body))).toBe(0)
          expect(r.headers["content-type"]).toBe(h.envelope.contentType)
          if (h.headers?.["x-upstream"] !== undefined) expect(r.headers["x-upstream"]).toBe("shop-1")
          if (name === "b") {
            expect(r.headers["authorization"]).toBe("Bearer b")
            expect(r.headers["webhook-signature"]).toBeUndefined()
          } else {
            if (name === "a") expect(r.headers["x-api-key"]).toBe("key-a")
            const v = Signature.verify({ header: header(r.headers), body: r.body, keys: [keys[name]], now: Date.now() })
            expect(v).toEqual({ _tag: "Valid" })
            // Signed with this sink's secret, not another's.
            const other = name === "a" ? keys.c : keys.a
            expect(Signature.verify({ header: header(r.headers), body: r.body, keys: [other], now: Date.now() })._tag).toBe("Invalid")
          }
        }
      }
      // Each hook once per sink; every row and its envelope's counts are gone.
      for (const h of all) for (let s = 0; s < h.sinks.length; s++) expect(yield* row(w, h.seq, s)).toBeUndefined()
      for (const ord of new Set(all.map((h) => h.ord))) expect(yield* w.queue.counters(ord)).toEqual(Counters.zero)
      expect((yield* count("a", "delivered")) - before.a).toBe(2)
      expect((yield* count("b", "delivered")) - before.b).toBe(2)
      expect((yield* count("c", "delivered")) - before.c).toBe(2)
    })
  )

  it.live("a failing sink is retried on its schedule and then dead-lettered", () =>
    Effect.gen(function* () {
      const w = yield* rocksWorld
      // 503, then 429 with Retry-After: 1 (s), then 500 until the schedule runs out.
      const retry = yield* startSink((_, n) =>
        n === 1 ? { status: 503 } : n === 2 ? { status: 429, headers: { "retry-after": "1" } } : { status: 500 }
      )
      const gone = yield* startSink(() => ({ status: 410 }))
      const transport = yield* startSink((_, n) => (n === 1 ? { destroy: true } : { status: 204 }))
      const slow = yield* startSink((_, n) => (n === 1 ? { status: 204, delayMs: 5_000 } : { status: 204 }))
      const schedule: RetrySchedule = { delaysMs: [50, 100, 150], jitter: 0, maxRetryAfterMs: 5_000 }
      const sinks = [
        sinkOf("retry", retry.url, { retry: schedule }),
        sinkOf("gone", gone.url),
        sinkOf("transport", transport.url),
        sinkOf("slow", slow.url, { timeoutMs: 1_000 })
      ]
      const before = {
        retried: yield* count("retry", "retried"),
        dead: yield* count("retry", "dead"),
        goneDead: yield* count("gone", "dead"),
        transportRetried: yield* count("transport", "retried"),
        slowRetried: yield* count("slow", "retried")
      }
      const ingest = makeIngest(w.store)
      const [h] = yield* ingest([{ tenant: "acme", sinks: ["retry", "gone", "transport", "slow"], at: Date.now() }])
      const { pipeline } = yield* startPipeline(w, { tickMs: 20, sinks })

      yield* until(
        "the retry sink is given up",
        Effect.zipWith(w.queue.aggregate, pipeline.inflight, (c, n) => c.dead === 2 && c.inflight === 0 && c.pending + c.scheduled === 0 && n === 0)
      )
      // Four attempts (the schedule's three retries), spaced by the schedule except where Retry-After asked for more.
      expect(retry.received).toHaveLength(4)
      const g = gaps(retry.received)
      expect(g[0]).toBeGreaterThanOrEqual(50)
      expect(g[1]).toBeGreaterThanOrEqual(1_000)
      expect(g[2]).toBeGreaterThanOrEqual(150)
      expect(yield* row(w, h!.seq, 0)).toMatchObject({ attempts: 4, lastStatus: 500 })
      // 410: one attempt, dead at once.
      expect(gone.received).toHaveLength(1)
      expect(yield* row(w, h!.seq, 1)).toMatchObject({ attempts: 1, lastStatus: 410 })
      // A dropped connection and a timeout are retried, then delivered (a loaded machine may time out a retry too).
      expect(transport.received.length).toBeGreaterThanOrEqual(2)
      expect(slow.received.length).toBeGreaterThanOrEqual(2)
      expect(yield* row(w, h!.seq, 2)).toBeUndefined()
      expect(yield* row(w, h!.seq, 3)).toBeUndefined()

      const dead = yield* w.queue.dead({ ords: [h!.ord], limit: 10 })
      expect(dead.items.map((d) => d.sink).sort()).toEqual([0, 1])
      expect(dead.items.every((d) => d.id === h!.id && d.sourceId === "src")).toBe(true)
      expect(yield* w.queue.counters(h!.ord)).toEqual({ ...Counters.zero, dead: 2, bytes: 2 * h!.size })
      expect((yield* count("retry", "retried")) - before.retried).toBe(3)
      expect((yield* count("retry", "dead")) - before.dead).toBe(1)
      expect((yield* count("gone", "dead")) - before.goneDead).toBe(1)
      expect((yield* count("transport", "retried")) - before.transportRetried).toBe(transport.received.length - 1)
      expect((yield* count("slow", "retried")) - before.slowRetried).toBe(slow.received.length - 1)
    })
  )

  it.live("rows of one tenant are claimed in at order", () =>
    Effect.gen(function* () {
      const sink = yield* startSink()
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(
            fc.array(fc.integer({ min: 0, max: 8_000 }), { minLength: 1, maxLength: 40 }),
            fc.integer({ min: 1, max: 8 }),
            fc.integer({ min: 1, max: 4 }),
            (offsets, claimLimit, batches) =>
              Effect.runPromise(
                Effect.scoped(
                  Effect.gen(function* () {
                    const w = yield* memoryWorld
                    const ingest = makeIngest(w.store)
                    const base = Date.now() - 30_000
                    // Commit order (seq) differs from due order (at).
                    const specs = offsets.map((off) => ({ tenant: "solo", sinks: ["s"], at: base + off }))
                    const hooks = []
                    const per = Math.ceil(specs.length / batches)
                    for (let i = 0; i < specs.length; i += per) hooks.push(...(yield* ingest(specs.slice(i, i + per))))
                    const { pipeline } = yield* startPipeline(w, { tickMs: 60_000, claimLimit, maxInflight: 1_000, sinks: [sinkOf("s", sink.url)] })
                    const claimed: Array<K.DueRef> = []
                    for (;;) {
                      const r = yield* pipeline.tick
                      if (r.claimed.length === 0) break
                      expect(r.claimed.length).toBeLessThanOrEqual(claimLimit)
                      claimed.push(...r.claimed)
                    }
                    const want = hooks
                      .map((h) => ({ ord: h.ord, at: h.at, seq: h.seq, sink: 0 }))
                      .sort((x, y) => x.at - y.at || x.seq - y.seq)
                    expect(claimed).toEqual(want)
                  })
                )
              )
          ),
          { numRuns: 10 }
        )
      )
    })
  )

  it.live("across tenants rows are claimed by deficit round-robin, within a tenant in at order (replaces oldest second first, TEN-3)", () =>
    Effect.gen(function* () {
      // TEN-3 replaces TEN-1 §5's "oldest second first": each tick every tenant with work gets its
      // weight's share of the claim (equal weights here), and a tenant's own rows come in `at` order.
      // There is no order across tenants beyond the round.
      const sink = yield* startSink(() => ({ status: 204, delayMs: 30_000 }))
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(
            fc.array(fc.record({ tenant: fc.integer({ min: 1, max: 5 }), off: fc.integer({ min: 0, max: 6_000 }) }), { minLength: 1, maxLength: 40 }),
            fc.integer({ min: 1, max: 12 }),
            (rows, claimLimit) =>
              Effect.runPromise(
                Effect.scoped(
                  Effect.gen(function* () {
                    const w = yield* memoryWorld
                    const base = Date.now() - 30_000
                    const hs = yield* makeIngest(w.store)(rows.map((x) => ({ tenant: `t${x.tenant}`, sinks: ["s"], at: base + x.off })))
                    const { pipeline } = yield* startPipeline(w, {
                      tickMs: 60_000,
                      claimLimit,
                      maxInflight: 1_000,
                      // A quantum of one row: the shares below are exact to a row.
                      quantumRows: 1,
                      graceMs: 0,
                      sinks: [sinkOf("s", sink.url, { timeoutMs: 60_000 })]
                    })
                    const left = new Map<number, number>()
                    for (const h of hs) left.set(h.ord, (left.get(h.ord) ?? 0) + 1)
                    const claimed: Array<K.DueRef> = []
                    for (;;) {
                      const r = yield* pipeline.tick
                      if (r.claimed.length === 0) break
                      // Work-conserving: a tick claims the whole budget while rows are left.
                      const remaining = [...left.values()].reduce((a, b) => a + b, 0)
                      expect(r.claimed.length).toBe(Math.min(claimLimit, remaining))
                      // Equal shares: a tenant gets more than one row beyond its share only with every
                      // row it had, or when the shares of tenants that ran out went to those still holding
                      // rows (work-conserving, above): then none of those left with rows got two rows less.
                      const per = new Map<number, number>()
                      for (const d of r.claimed) per.set(d.ord, (per.get(d.ord) ?? 0) + 1)
                      const share = Math.max(1, claimLimit / [...left.values()].filter((n) => n > 0).length)
                      const after = new Map([...left].map(([ord, n]) => [ord, n - (per.get(ord) ?? 0)] as const))
                      for (const [ord, n] of per) {
                        const othersLeft = [...after].filter(([o, rest]) => o !== ord && rest > 0)
                        expect(n <= Math.ceil(share) + 1 || n === left.get(ord) || othersLeft.every(([o]) => (per.get(o) ?? 0) >= n - 1)).toBe(true)
                      }
                      for (const [ord, n] of per) left.set(ord, left.get(ord)! - n)
                      claimed.push(...r.claimed)
                    }
                    // Every row once; within each tenant, in `at` order.
                    expect(claimed).toHaveLength(hs.length)
                    for (const ord of new Set(hs.map((h) => h.ord))) {
                      const mine = claimed.filter((d) => d.ord === ord)
                      const want = hs.filter((h) => h.ord === ord).map((h) => ({ ord, at: h.at, seq: h.seq, sink: 0 })).sort((x, y) => x.at - y.at || x.seq - y.seq)
                      expect(mine).toEqual(want)
                    }
                  })
                )
              )
          ),
          { numRuns: 15 }
        )
      )
    })
  )

  it.live("a tick visits only tenants with work", () =>
    Effect.gen(function* () {
      const sink = yield* startSink()
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const now = Date.now()
      // 1,000 tenants: 997 have rows due an hour from now, 3 have rows due now.
      const active = new Set([17, 500, 998])
      yield* ingest(
        Array.from({ length: 1_000 }, (_, i) => ({ tenant: `t${i + 1}`, sinks: ["s"], at: active.has(i + 1) ? now - 1_000 : now + 3_600_000 }))
      )
      const { pipeline } = yield* startPipeline(w, { tickMs: 60_000, sinks: [sinkOf("s", sink.url)] })
      yield* w.store.resetStats
      const r = yield* pipeline.tick
      expect([...r.visited].sort((x, y) => x - y)).toEqual([...active])
      expect(r.claimed).toHaveLength(3)
      expect((yield* Metric.value(M.activeTenants)).value).toBe(3)
      // One due-range read per visited tenant for claiming, none for the 997 others.
      const stats = yield* w.store.stats
      expect(stats.scans["due"] ?? 0).toBeLessThanOrEqual(3 * 3)
    })
  )

  it.live("a tick removes every marker its claims made stale, whichever tenants it served", () =>
    Effect.gen(function* () {
      // A sink that never answers in time: no outcome commits, so no tick runs but the test's.
      const sink = yield* startSink(() => ({ status: 204, delayMs: 30_000 }))
      const w = yield* memoryWorld
      const ingest = makeIngest(w.store)
      const s0 = K.bucketOf(Date.now()) - 30
      // Tenant a: one row in each of seconds s0..s9; tenants b..f: one row in s0.
      const hooks = yield* ingest([
        ...Array.from({ length: 10 }, (_, i) => ({ tenant: "a", sinks: ["s"], at: (s0 + i) * 1000 + 500 })),
        ...["b", "c", "d", "e", "f"].map((tenant) => ({ tenant, sinks: ["s"], at: s0 * 1000 + 700 }))
      ])
      const markers = () =>
        w.store.scan("index", K.familyDataRange(K.Families.active), { limit: 1_000 }).pipe(
          Effect.map((es) => es.map((e) => K.decodeActiveKey(e.key)))
        )
      const ordA = hooks[0]!.ord
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 60_000,
        claimLimit: 5,
        maxInflight: 1_000,
        graceMs: 0,
        sinks: [sinkOf("s", sink.url, { concurrency: 1, timeoutMs: 60_000, maxWaiting: 1_000 })]
      })
      const r = yield* pipeline.tick
      // Five rows for six tenants: one row each for the first five of the round.
      expect(r.claimed).toHaveLength(5)
      expect(new Set(r.claimed.map((d) => d.ord)).size).toBe(5)
      // Every marker whose second the claim emptied is gone; a's later seconds keep theirs.
      const claimedOrds = new Set(r.claimed.map((d) => d.ord))
      const left = yield* markers()
      expect(left.filter((m) => m.ord === ordA).map((m) => m.bucket - s0)).toEqual(claimedOrds.has(ordA) ? [1, 2, 3, 4, 5, 6, 7, 8, 9] : [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
      expect(left.filter((m) => m.ord !== ordA).map((m) => m.ord)).toEqual(hooks.slice(10).map((h) => h.ord).filter((o) => !claimedOrds.has(o)))
      // Drain the rest by hand: every row claimed once, and no marker left behind.
      const claimed = [...r.claimed]
      for (;;) {
        const next = yield* pipeline.tick
        if (next.claimed.length === 0) break
        claimed.push(...next.claimed)
      }
      expect(claimed.map((d) => d.seq).sort((x, y) => x - y)).toEqual(hooks.map((h) => h.seq))
      yield* pipeline.tick
      expect(yield* markers()).toEqual([])
    })
  )

  it.live("a row whose hook is gone or undecodable is dropped, one whose sink is unknown is dead-lettered", () =>
    Effect.gen(function* () {
      const w = yield* rocksWorld
      const sink = yield* startSink()
      const ingest = makeIngest(w.store)
      const [gone, garbled, orphanedSink] = yield* ingest([
        { tenant: "acme", sinks: ["s"], at: Date.now() },
        { tenant: "acme", sinks: ["s", "s2"], at: Date.now() },
        { tenant: "acme", sinks: ["removed"], at: Date.now() }
      ])
      yield* w.store.write([del("hooks", K.hookKey(gone!.seq)), put("hooks", K.hookKey(garbled!.seq), Buffer.from("not an envelope"))], { sync: false })
      const before = { dropped: yield* count("unknown", "dropped"), dead: yield* count("removed", "dead") }
      const { pipeline } = yield* startPipeline(w, { tickMs: 20, sinks: [sinkOf("s", sink.url)] })
      yield* until(
        "every row settled",
        Effect.zipWith(w.queue.aggregate, pipeline.inflight, (c, n) => c.pending + c.scheduled + c.inflight === 0 && n === 0)
      )
      expect(sink.received).toHaveLength(0)
      expect((yield* count("unknown", "dropped")) - before.dropped).toBe(3)
      expect((yield* count("removed", "dead")) - before.dead).toBe(1)
      // Dropped rows are gone with their bytes; the unknown sink's row waits in the DLQ for a replay.
      for (const [h, n] of [[gone!, 1], [garbled!, 2]] as const) for (let s = 0; s < n; s++) expect(yield* row(w, h.seq, s)).toBeUndefined()
      expect(yield* w.queue.counters(orphanedSink!.ord)).toEqual({ ...Counters.zero, dead: 1, bytes: orphanedSink!.size })
      const dead = yield* w.queue.dead({ ords: [orphanedSink!.ord], limit: 10 })
      expect(dead.items.map((d) => d.seq)).toEqual([orphanedSink!.seq])
    })
  )

  it.live("calls stay within each sink's concurrency and the global inflight limit", () =>
    Effect.gen(function* () {
      const w = yield* memoryWorld
      const DELAY = 60
      // Calls open at a sink when a request arrives: those that arrived less than DELAY - 15 ms ago
      // (a reply is sent DELAY after arrival; the margin covers timer and clock granularity).
      const arrivals: Array<{ readonly sink: string; readonly at: number }> = []
      const peak = { a: 0, b: 0, all: 0 }
      const track = (name: "a" | "b") => (r: Received) => {
        arrivals.push({ sink: name, at: r.at })
        const open = arrivals.filter((x) => x.at > r.at - (DELAY - 15))
        peak[name] = Math.max(peak[name], open.filter((x) => x.sink === name).length)
        peak.all = Math.max(peak.all, open.length)
        return { status: 204, delayMs: DELAY }
      }
      const a = yield* startSink(track("a"))
      const b = yield* startSink(track("b"))
      const ingest = makeIngest(w.store)
      yield* ingest(Array.from({ length: 12 }, (_, i) => ({ tenant: `t${i % 3}`, sinks: ["a", "b"], at: Date.now() })))
      const { pipeline } = yield* startPipeline(w, {
        tickMs: 10,
        maxInflight: 4,
        sinks: [sinkOf("a", a.url, { concurrency: 3 }), sinkOf("b", b.url, { concurrency: 3 })]
      })
      const inflightPeak = yield* drainedInflightPeak(w, pipeline.inflight)
      expect(a.received.length).toBe(12)
      expect(b.received.length).toBe(12)
      expect(peak.a).toBeLessThanOrEqual(3)
      expect(peak.b).toBeLessThanOrEqual(3)
      expect(peak.all).toBeLessThanOrEqual(4)
      expect(inflightPeak).toBeLessThanOrEqual(4)
      // The bounds were reached, not just respected by a pipeline that calls one at a time.
      expect(peak.all).toBeGreaterThanOrEqual(2)
    })
  )

  it.live("the rows claimed and not settled stay within maxInflightBytes", () =>
    Effect.gen(function* () {
      const w = yield* memoryWorld
      const sink = yield* startSink(() => ({ status: 204, delayMs: 40 }))
      const ingest = makeIngest(w.store)
      // Rows of about one size (their ids differ by a digit): the bound is 3 of the largest, so no 4 fit,
      // however many rows and sink slots are free (1,000 rows, 8 connections).
      const hooks = yield* ingest(Array.from({ length: 12 }, (_, i) => ({ tenant: `t${i % 3}`, sinks: ["s"], at: Date.now(), body: Buffer.alloc(1_000, 97) })))
      const size = Math.max(...hooks.map((h) => h.size))
      expect(4 * Math.min(...hooks.map((h) => h.size))).toBeGreaterThan(3 * size)
      const { pipeline } = yield* startPipeline(w, { tickMs: 10, maxInflight: 1_000, maxInflightBytes: 3 * size, sinks: [sinkOf("s", sink.url, { concurrency: 8 })] })
      const peak = yield* drainedInflightPeak(w, pipeline.inflight)
      expect(sink.received.length).toBe(12)
      // The bound and one row past it at most: a claim takes its first row even past the bytes left.
      expect(peak).toBeLessThanOrEqual(4)
      // The bound was reached, not just respected by a pipeline that calls one at a time.
      expect(peak).toBeGreaterThanOrEqual(3)
    })
  )

  it.live("shutdown lets inflight calls finish within the grace period and leaves the rest inflight", () =>
    Effect.gen(function* () {
      const w = yield* rocksWorld
      const quick = yield* startSink(() => ({ status: 204, delayMs: 300 }))
      const stuck = yield* startSink(() => ({ status: 204, delayMs: 5_000 }))
      const ingest = makeIngest(w.store)
      const [h] = yield* ingest([{ tenant: "acme", sinks: ["quick", "stuck"], at: Date.now() }])
      const { shutdown } = yield* startPipeline(w, {
        tickMs: 20,
        graceMs: 1_000,
        sinks: [sinkOf("quick", quick.url, { timeoutMs: 10_000 }), sinkOf("stuck", stuck.url, { timeoutMs: 10_000 })]
      })
      yield* until("both sinks were called", Effect.sync(() => quick.received.length === 1 && stuck.received.length === 1))
      const t0 = Date.now()
      yield* shutdown
      const took = Date.now() - t0
      expect(took).toBeGreaterThanOrEqual(900)
      expect(took).toBeLessThan(4_000)
      // The quick call finished inside the grace period and its outcome was committed.
      expect(yield* row(w, h!.seq, 0)).toBeUndefined()
      // The stuck one was cut: still inflight, for boot recovery to return to due.
      expect(yield* w.queue.counters(h!.ord)).toMatchObject({ inflight: 1, pending: 0, scheduled: 0 })
      expect(yield* w.queue.recoverInflight(Date.now())).toBe(1)
      expect(yield* w.queue.counters(h!.ord)).toMatchObject({ inflight: 0, pending: 1 })
    })
  )
  it.live("an outcome commit that fails is written again until it succeeds; counters exact", () =>
    Effect.gen(function* () {
      const w = yield* memoryWorld
      // The first two outcome writes (those that mark a hook cleared, `?c`) fail; claims and the rest go through.
      const failures: Array<number> = []
      const store = {
        ...w.store,
        // Decided when the write runs (a retry may run the same effect again).
        write: (batch: Parameters<typeof w.store.write>[0], opts: { readonly sync: boolean }) =>
          Effect.suspend(() =>
            batch.some((op) => op._tag === "put" && op.key[0] === K.clearedKey(0)[0]) && failures.length < 2
              ? Effect.sync(() => failures.push(Date.now())).pipe(Effect.andThen(Effect.fail(new StoreError({ op: "write", message: "injected" }))))
              : w.store.write(batch, opts)
          )
      }
      // The pipeline writes through the Queue, so the Queue is built on the failing store.
      const failing: World = { ...w, store, context: Context.add(Context.add(w.context, Store, store), Queue.Queue, Queue.make(store)) }
      const sink = yield* startSink()
      const before = yield* count("commit-retry", "delivered")
      const hooks = yield* makeIngest(w.store)([1, 2, 3].map(() => ({ tenant: "acme", sinks: ["commit-retry"], at: Date.now() })))
      const { pipeline } = yield* startPipeline(failing, { tickMs: 20, sinks: [sinkOf("commit-retry", sink.url)] })
      yield* until(
        "every row delivered and committed",
        Effect.zipWith(w.queue.aggregate, pipeline.inflight, (c, n) => c.inflight === 0 && c.pending + c.scheduled === 0 && c.bytes === 0 && n === 0)
      )
      expect(failures).toHaveLength(2)
      // Written again after COMMIT_RETRY_MS, not at once.
      expect(failures[1]! - failures[0]!).toBeGreaterThanOrEqual(COMMIT_RETRY_MS - 5)
      for (const h of hooks) expect(yield* row(w, h.seq, 0)).toBeUndefined()
      expect(yield* w.queue.counters(hooks[0]!.ord)).toEqual(Counters.zero)
      expect((yield* count("commit-retry", "delivered")) - before).toBe(3)
      expect(sink.received).toHaveLength(3)
    })
  )
})
