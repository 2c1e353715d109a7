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
import { COMMIT_RETRY_MS, FIRST_SCAN_TENANTS, type SinkOptions } from "../src/delivery/pipeline.js"
import { Store, StoreError } from "../src/store/store.js"
import { makeIngest, memoryWorld, rocksWorld, startPipeline, until, type World } from "./pipeline-world.js"
import { type Received, startSink } from "./sink-server.js"

const fast: RetrySchedule = { delaysMs: [50, 50, 50], jitter: 0, maxRetryAfterMs: 5_000 }

const sinkOf = (name: string, url: string, o: Partial<SinkOptions> = {}): SinkOptions => ({
  name,
  url,
  timeoutMs: 5_000,
  headers: {},
  concurrency: 4,
  retry: fast,
  ...o
})

const secret = () => `whsec_${randomBytes(24).toString("base64")}`
const header = (h: IncomingHttpHeaders) => (name: string) => {
  const v = h[name]
  return Array.isArray(v) ? v.join(",") : v
}

const aggregateIsZero = (w: World) =>
  w.queue.aggregate.pipe(Effect.map((c) => c.pending === 0 && c.scheduled === 0 && c.inflight === 0 && c.bytes === 0 && c.dead === 0))

const count = (sink: string, o: M.Outcome) => Metric.value(M.outcome(sink, o)).pipe(Effect.map((s) => s.count))

const row = (w: World, seq: number, sink: number) =>
  w.store.get("deliveries", K.deliveryKey(seq, sink)).pipe(Effect.map(Deliveries.decodeRow))

const gaps = (rs: ReadonlyArray<Received>) => rs.slice(1).map((r, i) => r.at - rs[i]!.at)

/** A memory world whose Queue records the `limit` of every `activeTenants` call (the tick's marker scans). */
const limitRecordingWorld = Effect.gen(function* () {
  const w = yield* memoryWorld
  const limits: Array<number | undefined> = []
  const queue: Queue.QueueShape = {
    ...w.queue,
    activeTenants: (now, limit) => Effect.sync(() => limits.push(limit)).pipe(Effect.andThen(w.queue.activeTenants(now, limit)))
  }
  const counted: World = { ...w, queue, context: Context.add(w.context, Queue.Queue, queue) }
  return { w, limits, counted }
})

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

  it.live(
    "across tenants rows are claimed oldest second first (replaces strict cross-tenant oldest-first, TEN-1 §5)",
    () =>
      Effect.gen(function* () {
        // TEN-1 §5 amends the old statement "rows are claimed oldest first across the node":
        // tenants are visited in active-marker order (oldest second first, ties by ordinal) and each
        // visited tenant gives its due rows in `at` order before the next tenant is visited.
        const sink = yield* startSink()
        const w = yield* memoryWorld
        const ingest = makeIngest(w.store)
        const s = Math.floor(Date.now() / 1000) * 1000 - 20_000
        const hooks = yield* ingest([
          { tenant: "a", sinks: ["s"], at: s + 100 },
          { tenant: "b", sinks: ["s"], at: s + 1_200 },
          { tenant: "a", sinks: ["s"], at: s + 2_500 },
          { tenant: "c", sinks: ["s"], at: s + 900 }
        ])
        const { pipeline } = yield* startPipeline(w, { tickMs: 60_000, sinks: [sinkOf("s", sink.url)] })
        const r = yield* pipeline.tick
        const ats = r.claimed.map((d) => d.at - s)
        // Oldest second first: a (second 0) takes all its rows, then c (second 0), then b (second 1).
        expect(ats).toEqual([100, 2_500, 900, 1_200])
        // Not strict oldest-first, which would interleave tenants by `at`.
        expect(ats).not.toEqual([100, 900, 1_200, 2_500])
        expect(r.visited).toEqual([hooks[0]!.ord, hooks[3]!.ord, hooks[1]!.ord])

        // The same rule over random tenants and times.
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(
              fc.array(fc.record({ tenant: fc.integer({ min: 1, max: 6 }), off: fc.integer({ min: 0, max: 6_000 }) }), { minLength: 1, maxLength: 30 }),
              (rows) =>
                Effect.runPromise(
                  Effect.scoped(
                    Effect.gen(function* () {
                      const w = yield* memoryWorld
                      const ingest = makeIngest(w.store)
                      const base = Date.now() - 30_000
                      const hs = yield* ingest(rows.map((x) => ({ tenant: `t${x.tenant}`, sinks: ["s"], at: base + x.off })))
                      const { pipeline } = yield* startPipeline(w, { tickMs: 60_000, sinks: [sinkOf("s", sink.url)] })
                      const got = (yield* pipeline.tick).claimed
                      const firstBucket = new Map<number, number>()
                      for (const h of hs) firstBucket.set(h.ord, Math.min(firstBucket.get(h.ord) ?? Infinity, K.bucketOf(h.at)))
                      const want = hs
                        .map((h) => ({ ord: h.ord, at: h.at, seq: h.seq, sink: 0 }))
                        .sort(
                          (x, y) =>
                            firstBucket.get(x.ord)! - firstBucket.get(y.ord)! || x.ord - y.ord || x.at - y.at || x.seq - y.seq
                        )
                      expect(got).toEqual(want)
                    })
                  )
                )
            ),
            { numRuns: 10 }
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

  it.live("a tick reads the markers of no more tenants than it can claim rows, and still removes every marker its claims made stale", () =>
    Effect.gen(function* () {
      // A sink that never answers in time: no outcome commits, so no tick runs but the test's.
      const sink = yield* startSink(() => ({ status: 204, delayMs: 30_000 }))
      const { w, limits, counted } = yield* limitRecordingWorld
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
      const { pipeline } = yield* startPipeline(counted, {
        tickMs: 60_000,
        claimLimit: 5,
        graceMs: 0,
        sinks: [sinkOf("s", sink.url, { concurrency: 1, timeoutMs: 60_000 })]
      })
      const r = yield* pipeline.tick
      // Five rows to claim: five tenants asked for, though six have work; a gives all five.
      expect(limits).toEqual([5])
      expect(r.visited).toEqual([ordA])
      expect(r.claimed.map((d) => K.bucketOf(d.at) - s0)).toEqual([0, 1, 2, 3, 4])
      // The scan saw only a's marker of s0, yet the markers of s1..s4, emptied by the claim, are gone too.
      const left = yield* markers()
      expect(left.filter((m) => m.ord === ordA).map((m) => m.bucket - s0)).toEqual([5, 6, 7, 8, 9])
      expect(left.filter((m) => m.ord !== ordA).map((m) => m.bucket - s0)).toEqual([0, 0, 0, 0, 0])
      // Drain the rest by hand: every row claimed once, and no marker left behind.
      const claimed = [...r.claimed]
      for (;;) {
        const next = yield* pipeline.tick
        if (next.claimed.length === 0) break
        claimed.push(...next.claimed)
      }
      expect(claimed.map((d) => d.seq).sort((x, y) => x - y)).toEqual(hooks.map((h) => h.seq))
      expect(yield* markers()).toEqual([])
    })
  )

  it.live("a tick scans for more tenants only when the first ones leave rows to claim", () =>
    Effect.gen(function* () {
      const sink = yield* startSink(() => ({ status: 204, delayMs: 30_000 }))
      const { w, limits, counted } = yield* limitRecordingWorld
      const ingest = makeIngest(w.store)
      const at = (K.bucketOf(Date.now()) - 30) * 1000
      // 20 tenants with one row each, then one with 100 rows, all in one second: marker order is ordinal order.
      const hooks = yield* ingest([
        ...Array.from({ length: 20 }, (_, i) => ({ tenant: `t${i}`, sinks: ["s"], at })),
        ...Array.from({ length: 100 }, () => ({ tenant: "big", sinks: ["s"], at: at + 1 }))
      ])
      const ords = [...new Set(hooks.map((h) => h.ord))]
      const { pipeline } = yield* startPipeline(counted, {
        tickMs: 60_000,
        claimLimit: 30,
        graceMs: 0,
        sinks: [sinkOf("s", sink.url, { concurrency: 1, timeoutMs: 60_000 })]
      })
      // The first 16 tenants give one row each: 14 rows left, so the tick scans again (for up to 30).
      const first = yield* pipeline.tick
      expect(limits).toEqual([FIRST_SCAN_TENANTS, 30])
      expect(first.visited).toEqual(ords.slice(0, 21))
      expect(first.claimed).toHaveLength(30)
      // Now "big" comes first and fills the tick alone: one scan.
      limits.length = 0
      const second = yield* pipeline.tick
      expect(limits).toEqual([FIRST_SCAN_TENANTS])
      expect(second.visited).toEqual([ords[20]])
      expect(second.claimed).toHaveLength(30)
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
      let inflightPeak = 0
      yield* until(
        "every row is delivered",
        Effect.zipWith(aggregateIsZero(w), pipeline.inflight, (zero, n) => {
          inflightPeak = Math.max(inflightPeak, n)
          return zero && n === 0
        })
      )
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
