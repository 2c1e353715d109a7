/**
 * The store check's part for ordered lanes (docs/storage.md "Ordered lanes"): heads are read
 * first and each must then be seen among the due or inflight rows (a held head: the dead rows);
 * waiting rows are folded into `waiting` and `bytes` and need their delivery row. A lane with
 * waiting rows and no head is counted, not a difference: the Writer's commit and the lane's
 * promotion are two batches, and boot promotes what a crash left between them.
 */
import { Effect } from "effect"
import type * as Counters from "../../domain/counters.js"
import * as K from "../../domain/keys.js"
import * as Ordering from "../../domain/ordering.js"
import type { Entry, StoreError, StoreShape } from "../../store/store.js"
import type { Difference } from "./check.js"

/** Heads cross-checked at most (kept in memory, about 100 B each); past it they are only counted. */
export const CHECK_MAX_HEADS = 1_000_000

export interface OrderingReport {
  /** `?H` rows: busy lanes, of which `held` wait for a dead head's replay (onDead hold). */
  readonly heads: number
  readonly held: number
  /** `?W` rows, and the lanes they are in. */
  readonly waiting: number
  readonly lanes: number
  /** Lanes with waiting rows and no head (see the module header). */
  readonly lanesAwaitingHead: number
  /** Heads were more than CHECK_MAX_HEADS: not cross-checked. */
  readonly headsUnchecked: boolean
}

interface Deps {
  readonly store: StoreShape
  readonly walk: (family: K.Family, f: (chunk: ReadonlyArray<Entry>) => Effect.Effect<void, StoreError>) => Effect.Effect<void, StoreError>
  readonly decodeAll: <A>(family: K.Family, chunk: ReadonlyArray<Entry>, f: (e: Entry) => A) => Array<A>
  readonly report: (d: Difference) => void
  readonly tally: (ord: number, field: Counters.FieldName, n: number) => void
  readonly seenOrds: Set<number>
  readonly sizes: (refs: ReadonlyArray<{ readonly seq: number; readonly sink: number }>) => Effect.Effect<Array<number | undefined>, StoreError>
}

const hex = (k: Uint8Array) => K.asBuffer(k).toString("hex")

export const orderingCheck = (d: Deps) => {
  const bySlot = new Map<string, { readonly key: Uint8Array; readonly ord: number; readonly held: boolean; found: boolean }>()
  const report = { heads: 0, held: 0, waiting: 0, lanes: 0, lanesAwaitingHead: 0, headsUnchecked: false }
  const slot = (seq: number, sink: number) => `${seq}:${sink}`

  const heads = d.walk(K.Families.heads, (chunk) =>
    Effect.sync(() => {
      for (const h of d.decodeAll(K.Families.heads, chunk, (e) => ({ key: e.key, ...K.decodeHeadKey(e.key), ...K.decodeHeadValue(e.value) }))) {
        report.heads++
        if (h.held) report.held++
        d.seenOrds.add(h.ord)
        if (bySlot.size >= CHECK_MAX_HEADS) report.headsUnchecked = true
        else bySlot.set(slot(h.seq, h.sink), { key: h.key, ord: h.ord, held: h.held, found: false })
      }
    })
  )

  /** A due or inflight row (`dead` false) or a dead row was folded: the head naming it is found. */
  const sawRow = (seq: number, sink: number, dead: boolean) => {
    if (bySlot.size === 0) return
    const h = bySlot.get(slot(seq, sink))
    if (h !== undefined && h.held === dead) h.found = true
  }

  /** After the due, inflight and dead walks: heads whose row was not seen. */
  const unfound = () => {
    for (const h of bySlot.values()) {
      if (!h.found) d.report({ problem: "head_without_row", family: "heads", ord: h.ord, expected: h.held ? "a dead row" : "a due or inflight row", key: hex(h.key) })
    }
  }

  let lastLane = ""
  const waiting = d.walk(K.Families.waiting, (chunk) =>
    Effect.gen(function* () {
      const rows = d.decodeAll(K.Families.waiting, chunk, (e) => ({ key: e.key, ref: K.decodeWaitingKey(e.key), size: K.decodeSizeValue(e.value) }))
      // Each lane's first `?W` row (in this walk: a lane's rows are contiguous).
      const lanes: Array<K.WaitingRef> = []
      for (const r of rows) {
        report.waiting++
        d.tally(r.ref.ord, "waiting", 1)
        d.tally(r.ref.ord, "bytes", r.size)
        const id = `${r.ref.ord}:${r.ref.lane}`
        if (id !== lastLane) lanes.push(r.ref)
        lastLane = id
      }
      report.lanes += lanes.length
      const s = yield* d.sizes(rows.map((r) => r.ref))
      rows.forEach((r, i) => {
        if (s[i] === undefined) d.report({ problem: "waiting_without_row", family: "waiting", ord: r.ref.ord, key: hex(r.key) })
      })
      const hs = lanes.length === 0 ? [] : yield* d.store.multiGet("index", lanes.map(Ordering.headKey))
      hs.forEach((v, i) => {
        if (v === undefined) return void report.lanesAwaitingHead++
        // The settle reads a lane's next row from its head's place unless the head says a row waits below it.
        const h = K.decodeHeadValue(v)
        const first = lanes[i]!
        if (!h.below && Ordering.sortsBefore(first, h)) {
          d.report({ problem: "waiting_below_head", family: "waiting", ord: first.ord, expected: "a head marked below", key: hex(K.waitingKey(first.ord, first.lane, first.seq, first.sink)) })
        }
      })
    })
  )

  return { heads, sawRow, unfound, waiting, report: report as OrderingReport }
}

/** The CLI's line, when there are lanes. */
export const formatOrdering = (o: OrderingReport | undefined): Array<string> =>
  o === undefined || (o.heads === 0 && o.waiting === 0)
    ? []
    : [
        `ordered lanes: ${o.heads} heads (${o.held} held), ${o.waiting} waiting rows in ${o.lanes} lanes, ${o.lanesAwaitingHead} awaiting a head` +
          (o.headsUnchecked ? ", heads not cross-checked" : "")
      ]
