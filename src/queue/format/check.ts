/**
 * The store's fsck (TEN-1 §4, §5, §9): fold the base families with sentinel
 * checks, compare every counter (every tenant and the aggregate, all six
 * fields) with the fold, and check the derived structures: markers, the
 * `?X`/`?x` mirror, delivery rows, the tenant maps, limits overrides, endpoints and `m:next_ord`.
 * Used by tests, `store check` and the crash test.
 *
 * Memory: one counter record per tenant and one chunk of rows at a time;
 * differences are kept up to `CHECK_MAX_DIFFERENCES` (the total is counted).
 */
import { Effect, Stream } from "effect"
import * as Counters from "../../domain/counters.js"
import * as Deliveries from "../../domain/deliveries.js"
import * as Endpoints from "../../domain/endpoints.js"
import * as K from "../../domain/keys.js"
import * as Limits from "../../domain/limits.js"
import { decodeInt64LE } from "../../domain/ops.js"
import * as Erase from "../../domain/erase.js"
import * as Tenants from "../../domain/tenants.js"
import { familyRows } from "../../store/family.js"
import { formatOrdering, orderingCheck, type OrderingReport } from "./check-ordering.js"
import type { Entry, StoreError, StoreShape } from "../../store/store.js"

/** Differences listed in a report; the rest are only counted. */
export const CHECK_MAX_DIFFERENCES = 1000
/** Rows per chunk (one multi-get of their delivery rows, markers or mirrors per chunk). */
export const CHECK_CHUNK = 500

export type Problem =
  | "counter" // a counter differs from the fold
  | "missing_marker" // a due row without its <<?A, floor(at/1000), ord>>
  | "missing_delivery_row" // a ?D/?F/?x row without its delivery row
  | "missing_by_tenant" // a ?x without its ?X
  | "missing_dead" // a ?X without its ?x
  | "mirror_ord" // ?X and ?x disagree on the tenant
  | "dead_without_ord" // a format 2 ?x value in a format 3 store
  | "tenant_without_ord" // a ?t whose ?n is missing or names another ord
  | "ord_without_tenant" // a ?n whose ?t is missing or names another tenant
  | "limits_without_tenant" // a ?l whose ?t is missing or a tombstone
  | "endpoint_without_tenant" // an ?e whose ?t is missing or a tombstone
  | "erase_without_tombstone" // a finished erase (?r) whose ordinal's ?t is not a tombstone, or whose ?n still names it
  | "ord_not_allocated" // an ordinal >= m:next_ord
  | "head_without_row" // an ordered lane's ?H naming a row that is not due or inflight (held: not dead)
  | "waiting_without_row" // a ?W row without its delivery row
  | "waiting_below_head" // a lane's first ?W row sorts before its ?H's row, and the head is not marked below
  | "bad_row" // a key or value that does not decode
  | "corrupt" // a family scan failed its sentinel check
  | "format" // not a format 3 store

export interface Difference {
  readonly problem: Problem
  readonly family: string
  readonly ord?: number
  readonly field?: Counters.FieldName
  readonly expected?: number | string
  readonly found?: number | string
  /** Hex of the offending key. */
  readonly key?: string
}

export interface CheckReport {
  readonly ok: boolean
  readonly format: number
  /** Data rows folded per family. */
  readonly rows: Readonly<Record<string, number>>
  /** Distinct real ordinals seen in rows, counters or the tenant maps. */
  readonly tenants: number
  readonly differences: ReadonlyArray<Difference>
  /** Every difference found, including those past `CHECK_MAX_DIFFERENCES`. */
  readonly differenceCount: number
  /** Ordered lanes (docs/delivery.md "Ordered delivery"). */
  readonly ordering?: OrderingReport
}

export type { OrderingReport } from "./check-ordering.js"


const hex = (k: Uint8Array) => K.asBuffer(k).toString("hex")

type Mutable = Record<Counters.FieldName, number>

/** Over 80 lines because it is one pass over the families in the order their cross-checks need (heads before the rows they name). */
export const checkStore = (store: StoreShape): Effect.Effect<CheckReport, StoreError> =>
  Effect.gen(function* () {
    const differences: Array<Difference> = []
    let differenceCount = 0
    const report = (d: Difference) => {
      differenceCount++
      if (differences.length < CHECK_MAX_DIFFERENCES) differences.push(d)
    }
    const rows: Record<string, number> = {}
    const fold = new Map<number, Mutable>()
    const seenOrds = new Set<number>()
    const tally = (ord: number, field: Counters.FieldName, n: number) => {
      let c = fold.get(ord)
      if (c === undefined) {
        c = { ...Counters.zero }
        fold.set(ord, c)
      }
      c[field] += n
      seenOrds.add(ord)
    }

    const format = yield* store.format
    if (format !== 3) {
      report({ problem: "format", family: "meta", expected: 3, found: format })
      return { ok: false, format, rows, tenants: 0, differences, differenceCount }
    }

    /** Walk a family in chunks; a decode error is a difference, a failed sentinel check ends that family. */
    const walk = (family: K.Family, f: (chunk: ReadonlyArray<Entry>) => Effect.Effect<void, StoreError>) =>
      familyRows(store, family, { chunk: CHECK_CHUNK }).pipe(
        Stream.grouped(CHECK_CHUNK),
        Stream.runForEach((chunk) => {
          rows[family.name] = (rows[family.name] ?? 0) + chunk.length
          return f(chunk)
        }),
        Effect.catchTag("StoreCorrupt", (e) =>
          Effect.sync(() => report({ problem: "corrupt", family: family.name, found: e.message, key: e.lastKey }))
        )
      )

    /** Decode every row of a chunk, reporting those that do not decode. */
    const decodeAll = <A>(family: K.Family, chunk: ReadonlyArray<Entry>, f: (e: Entry) => A): Array<A> => {
      const out: Array<A> = []
      for (const e of chunk) {
        try {
          out.push(f(e))
        } catch (err) {
          report({ problem: "bad_row", family: family.name, key: hex(e.key), found: String(err) })
        }
      }
      return out
    }

    const sizes = (refs: ReadonlyArray<{ readonly seq: number; readonly sink: number }>) =>
      store
        .multiGet("deliveries", refs.map((r) => K.deliveryKey(r.seq, r.sink)))
        .pipe(Effect.map((vs) => vs.map((v) => (v === undefined ? undefined : Deliveries.decodeRow(v)?.size ?? -1))))

    const missingRow = (family: K.Family, key: Uint8Array, ord: number, size: number | undefined) => {
      if (size === undefined) report({ problem: "missing_delivery_row", family: family.name, ord, key: hex(key) })
      else if (size < 0) report({ problem: "bad_row", family: "deliveries", ord, key: hex(key) })
    }

    // Ordered lanes' heads first: each must be found below among the due and inflight rows (held: dead).
    const lanes = orderingCheck({ store, walk, decodeAll, report, tally, seenOrds, sizes })
    yield* lanes.heads

    // due: pending/scheduled and bytes by kind; its marker; its delivery row.
    let lastMarker = ""
    yield* walk(K.Families.due, (chunk) =>
      Effect.gen(function* () {
        const due = decodeAll(K.Families.due, chunk, (e) => ({ key: e.key, ref: K.decodeDueKey(e.key), v: K.decodeDueValue(e.value) }))
        for (const d of due) {
          tally(d.ref.ord, d.v.kind === 0 ? "pending" : "scheduled", 1)
          tally(d.ref.ord, "bytes", d.v.size)
          lanes.sawRow(d.ref.seq, d.ref.sink, false)
        }
        // Due rows are in (ord, at) order: rows of one (ord, second) are adjacent, so one read per marker.
        const markers: Array<{ readonly id: string; readonly key: Uint8Array; readonly rowKey: Uint8Array; readonly ord: number }> = []
        for (const d of due) {
          const id = `${d.ref.ord}:${K.bucketOf(d.ref.at)}`
          if (id === lastMarker) continue
          lastMarker = id
          markers.push({ id, key: Deliveries.markerKey(K.bucketOf(d.ref.at), d.ref.ord), rowKey: d.key, ord: d.ref.ord })
        }
        const found = yield* store.multiGet("index", markers.map((m) => m.key))
        markers.forEach((m, i) => {
          if (found[i] === undefined) report({ problem: "missing_marker", family: "active", ord: m.ord, expected: hex(m.key), key: hex(m.rowKey) })
        })
        const s = yield* sizes(due.map((d) => d.ref))
        due.forEach((d, i) => missingRow(K.Families.due, d.key, d.ref.ord, s[i]))
      })
    )

    // inflight: inflight and bytes; its delivery row.
    yield* walk(K.Families.inflight, (chunk) =>
      Effect.gen(function* () {
        const rows = decodeAll(K.Families.inflight, chunk, (e) => ({ key: e.key, ref: K.decodeInflightKey(e.key), size: K.decodeSizeValue(e.value) }))
        for (const r of rows) {
          tally(r.ref.ord, "inflight", 1)
          tally(r.ref.ord, "bytes", r.size)
          lanes.sawRow(r.ref.seq, r.ref.sink, false)
        }
        const s = yield* sizes(rows.map((r) => r.ref))
        rows.forEach((r, i) => missingRow(K.Families.inflight, r.key, r.ref.ord, s[i]))
      })
    )

    // dead ?x: dead and bytes (size from the delivery row); its ?X twin.
    yield* walk(K.Families.dead, (chunk) =>
      Effect.gen(function* () {
        const rows = decodeAll(K.Families.dead, chunk, (e) => ({ key: e.key, ref: K.decodeDeadKey(e.key), v: K.decodeDeadValue(e.value) }))
        const withOrd: Array<{ readonly key: Uint8Array; readonly ref: K.DeadRef; readonly ord: number }> = []
        for (const r of rows) {
          if (r.v.ord === undefined) report({ problem: "dead_without_ord", family: "dead", key: hex(r.key) })
          else withOrd.push({ key: r.key, ref: r.ref, ord: r.v.ord })
        }
        const s = yield* sizes(rows.map((r) => r.ref))
        rows.forEach((r, i) => missingRow(K.Families.dead, r.key, r.v.ord ?? 0, s[i]))
        rows.forEach((r, i) => {
          if (r.v.ord === undefined) return
          lanes.sawRow(r.ref.seq, r.ref.sink, true)
          tally(r.v.ord, "dead", 1)
          tally(r.v.ord, "bytes", Math.max(0, s[i] ?? 0))
        })
        const twins = yield* store.multiGet("index", withOrd.map((r) => Deliveries.byTenantKeyOfDead(r.ord, r.ref)))
        withOrd.forEach((r, i) => {
          if (twins[i] === undefined) report({ problem: "missing_by_tenant", family: "dead_by_tenant", ord: r.ord, key: hex(r.key) })
        })
      })
    )

    // ?X: its ?x exists and names the same tenant.
    yield* walk(K.Families.dead_by_tenant, (chunk) =>
      Effect.gen(function* () {
        const rows = decodeAll(K.Families.dead_by_tenant, chunk, (e) => ({ key: e.key, ...Deliveries.deadKeyOfByTenant(e.key) }))
        const values = yield* store.multiGet("index", rows.map((r) => r.deadKey))
        rows.forEach((r, i) => {
          seenOrds.add(r.ord)
          const v = values[i]
          if (v === undefined) return report({ problem: "missing_dead", family: "dead", ord: r.ord, key: hex(r.key) })
          let ord: number | undefined
          try {
            ord = K.decodeDeadValue(v).ord
          } catch {
            return // reported by the ?x walk
          }
          if (ord !== undefined && ord !== r.ord) report({ problem: "mirror_ord", family: "dead_by_tenant", ord: r.ord, expected: r.ord, found: ord, key: hex(r.key) })
        })
      })
    )

    lanes.unfound()
    yield* lanes.waiting

    // archive obligations.
    yield* walk(K.Families.archive, (chunk) =>
      Effect.sync(() => {
        for (const a of decodeAll(K.Families.archive, chunk, (e) => K.decodeArchiveValue(e.value))) tally(a.ord, "archive_pending", 1)
      })
    )

    /** Rows kept under a tenant's ordinal: each decodes, and its tenant is live. */
    const tenantRows = (
      family: K.Family,
      ordOf: (key: Uint8Array) => number,
      valid: (key: Uint8Array, value: Uint8Array) => boolean,
      orphan: Problem
    ) =>
      walk(family, (chunk) =>
        Effect.gen(function* () {
          const rows = decodeAll(family, chunk, (e) => ({ key: e.key, ord: ordOf(e.key), value: e.value }))
          for (const r of rows) {
            seenOrds.add(r.ord)
            if (!valid(r.key, r.value)) report({ problem: "bad_row", family: family.name, ord: r.ord, key: hex(r.key), found: hex(r.value) })
          }
          const ids = yield* store.multiGet("tenants", rows.map((r) => K.tenantKey(r.ord)))
          rows.forEach((r, i) => {
            if (ids[i] === undefined || ids[i]!.length === 0) report({ problem: orphan, family: "tenants", ord: r.ord, found: ids[i] === undefined ? "none" : "tombstone", key: hex(r.key) })
          })
        })
      )

    // The tenant maps, the limits overrides and the endpoints, in one pass each.
    const tenantMaps = Effect.gen(function* () {
      // Tenant maps: ?t -> ?n and ?n -> ?t (a ?t tombstone has an empty value and no ?n).
      yield* walk(K.Families.tenants, (chunk) =>
        Effect.gen(function* () {
          const live = decodeAll(K.Families.tenants, chunk, (e) => ({ key: e.key, ord: K.decodeTenantKey(e.key), id: K.asBuffer(e.value).toString("utf8") }))
          for (const t of live) seenOrds.add(t.ord)
          const named = live.filter((t) => t.id.length > 0)
          const ords = yield* store.multiGet("tenants", named.map((t) => K.tenantOrdKey(t.id)))
          named.forEach((t, i) => {
            const v = ords[i]
            const found = v === undefined || v.length !== 4 ? undefined : K.decodeU32(v)
            if (found !== t.ord) report({ problem: "tenant_without_ord", family: "tenant_ords", ord: t.ord, expected: t.ord, found: found ?? "none", key: hex(t.key) })
          })
        })
      )
      yield* walk(K.Families.tenant_ords, (chunk) =>
        Effect.gen(function* () {
          const named = decodeAll(K.Families.tenant_ords, chunk, (e) => ({ key: e.key, id: K.decodeTenantOrdKey(e.key), ord: K.decodeU32(e.value) }))
          for (const n of named) seenOrds.add(n.ord)
          const ids = yield* store.multiGet("tenants", named.map((n) => K.tenantKey(n.ord)))
          named.forEach((n, i) => {
            const v = ids[i]
            const found = v === undefined ? undefined : K.asBuffer(v).toString("utf8")
            if (found !== n.id) report({ problem: "ord_without_tenant", family: "tenants", ord: n.ord, expected: n.id, found: found ?? "none", key: hex(n.key) })
          })
        })
      )

      // Limits overrides ?l and endpoints ?e: a value this build reads, of a live tenant.
      yield* tenantRows(K.Families.tenant_limits, (k) => K.decodeTenantLimitsKey(k), (_k, v) => Limits.decode(v) !== undefined, "limits_without_tenant")
      yield* tenantRows(K.Families.endpoints, (k) => K.decodeEndpointKey(k).ord, (k, v) => Endpoints.decode(K.decodeEndpointKey(k).id, v) !== undefined, "endpoint_without_tenant")
      // Erase records ?r (TEN-5): each decodes; a finished one left its ordinal a tombstone and no ?n pointing at it.
      yield* walk(K.Families.erasures, (chunk) =>
        Effect.gen(function* () {
          const jobs = chunk.flatMap((e) => {
            const job = Erase.decodeJob(e.value)
            if (job === undefined) report({ problem: "bad_row", family: "erasures", key: hex(e.key) })
            return job === undefined || !Erase.isDone(job) ? [] : [{ key: e.key, job }]
          })
          const ids = yield* store.multiGet("tenants", jobs.map((j) => K.tenantKey(j.job.ord)))
          const ords = yield* store.multiGet("tenants", jobs.map((j) => K.tenantOrdKey(j.job.tenant)))
          jobs.forEach(({ key, job }, i) => {
            const named = ords[i] !== undefined && ords[i]!.length === 4 && K.decodeU32(ords[i]!) === job.ord
            if (ids[i]?.length !== 0 || named) report({ problem: "erase_without_tombstone", family: "tenants", ord: job.ord, found: ids[i] === undefined ? "none" : named ? "named" : "live", key: hex(key) })
          })
        })
      )
    })
    yield* tenantMaps

    // Counters as stored.
    const stored = new Map<number, Mutable>()
    const byField = new Map<number, Counters.FieldName>(Counters.FieldNames.map((f) => [Counters.Fields[f], f]))
    yield* walk(K.Families.counters, (chunk) =>
      Effect.sync(() => {
        for (const c of decodeAll(K.Families.counters, chunk, (e) => ({ key: e.key, ...K.decodeCounterKey(e.key), value: decodeInt64LE(e.value) }))) {
          const field = byField.get(c.field)
          if (field === undefined) {
            report({ problem: "bad_row", family: "counters", ord: c.ord, key: hex(c.key), found: `field ${c.field}` })
            continue
          }
          let rec = stored.get(c.ord)
          if (rec === undefined) {
            rec = { ...Counters.zero }
            stored.set(c.ord, rec)
          }
          rec[field] += Number(c.value)
          if (c.ord !== Counters.AGGREGATE) seenOrds.add(c.ord)
        }
      })
    )

    compareWithFold(fold, stored, report)
    // m:next_ord is above every ordinal in use.
    const nextOrd = Tenants.nextOrdOf(yield* store.get("default", K.Meta.nextOrd))
    for (const ord of [...seenOrds].sort((a, b) => a - b)) {
      if (ord >= nextOrd) report({ problem: "ord_not_allocated", family: "meta", ord, expected: `< ${nextOrd}`, found: ord })
    }

    const tenants = [...seenOrds].filter((o) => o !== Counters.AGGREGATE).length
    return { ok: differenceCount === 0, format, rows, tenants, differences, differenceCount, ordering: lanes.report }
  })

/** Every tenant's counters against the fold, then the aggregate against the fold's sum. */
const compareWithFold = (fold: ReadonlyMap<number, Mutable>, stored: ReadonlyMap<number, Mutable>, report: (d: Difference) => void) => {
  const sum: Mutable = { ...Counters.zero }
  for (const c of fold.values()) for (const f of Counters.FieldNames) sum[f] += c[f]
  const ords = [...new Set([...fold.keys(), ...stored.keys()])].filter((o) => o !== Counters.AGGREGATE).sort((a, b) => a - b)
  const compare = (ord: number, expected: Counters.TenantCounters, found: Counters.TenantCounters) => {
    for (const f of Counters.FieldNames) {
      if (expected[f] !== found[f]) report({ problem: "counter", family: "counters", ord, field: f, expected: expected[f], found: found[f] })
    }
  }
  for (const ord of ords) compare(ord, fold.get(ord) ?? Counters.zero, stored.get(ord) ?? Counters.zero)
  compare(Counters.AGGREGATE, sum, stored.get(Counters.AGGREGATE) ?? Counters.zero)
  if (fold.has(Counters.AGGREGATE)) report({ problem: "ord_not_allocated", family: "index", ord: Counters.AGGREGATE, found: "rows filed under the aggregate ord 0" })
}

/** One line per difference, for the CLI. */
export const formatReport = (r: CheckReport): string => {
  const head = r.ok
    ? `store check: ok (format ${r.format}, ${r.tenants} tenants)`
    : `store check: ${r.differenceCount} difference(s) (format ${r.format}, ${r.tenants} tenants)`
  const ordering = formatOrdering(r.ordering)
  const lines = r.differences.map((d) =>
    [
      d.problem,
      `family=${d.family}`,
      d.ord === undefined ? "" : `ord=${d.ord}`,
      d.field === undefined ? "" : `field=${d.field}`,
      d.expected === undefined ? "" : `expected=${d.expected}`,
      d.found === undefined ? "" : `found=${d.found}`,
      d.key === undefined ? "" : `key=${d.key}`
    ]
      .filter((s) => s !== "")
      .join(" ")
  )
  if (r.differenceCount > r.differences.length) lines.push(`… and ${r.differenceCount - r.differences.length} more`)
  return [head, ...ordering, ...lines].join("\n")
}
