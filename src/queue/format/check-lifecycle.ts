/**
 * The lifecycle part of `store check`: nothing is kept that nothing owes,
 * and nothing is owed that is gone.
 * - every hook has a delivery row, an archive obligation, or a `?c` marker
 *   (reclaim will look at it); otherwise it is "owed by nothing" and would
 *   never be reclaimed;
 * - every obligation `?a <<seq>>` and every delivery row has its hook.
 * A row or obligation whose hook is gone is what format 2 stores hold (the
 * standard fixture has one) and what the 2 -> 3 migration files under tenant
 * `default`: such a difference is a `leftover` of that documented path
 * (`LEFTOVER_NOTES`), not corruption. Under any other tenant it is corruption.
 * Sentinel-checked walks, one chunk of rows and one batch of point reads at
 * a time; differences kept up to `CHECK_MAX_DIFFERENCES` (the rest counted).
 */
import { Effect, Stream } from "effect"
import { DEFAULT_TENANT } from "../../domain/envelope.js"
import * as K from "../../domain/keys.js"
import { CHECK_CHUNK, CHECK_MAX_DIFFERENCES } from "./check.js"
import type { Entry, StoreError, StoreShape } from "../../store/store.js"
import { familyRows } from "../../store/family.js"

export type LifecycleProblem =
  | "hook_owed_by_nothing" // no delivery row, no obligation, no ?c marker
  | "obligation_without_hook" // ?a whose hook is gone
  | "row_without_hook" // a delivery row whose hook is gone
  | "bad_row" // a key that does not decode
  | "corrupt" // a family scan failed its sentinel check

/** The documented paths that leave a difference behind (docs/storage.md "store check"). */
export type Leftover = "format2_orphan" | "migrated_orphan"

export const LEFTOVER_NOTES: Readonly<Record<Leftover, string>> = {
  format2_orphan:
    "a format 2 row or obligation whose hook is gone (format 2 could lose a hook before its rows); `ankusa store migrate` files it under tenant default, after which it is a migrated_orphan",
  migrated_orphan:
    "filed under tenant default by the 2 -> 3 migration because its hook was gone (docs/storage.md \"Tenants\"); the node drops it: an obligation by the archive compactor (reason missing), a due or inflight row when the pipeline claims it (outcome dropped), a dead row when it is replayed or shed by the DLQ ceiling"
}

export interface LifecycleDifference {
  readonly problem: LifecycleProblem
  readonly family: string
  readonly seq?: number
  readonly ord?: number
  readonly found?: string
  /** Set when a documented path leaves this difference: not corruption. */
  readonly leftover?: Leftover
}

export interface LifecycleReport {
  readonly ok: boolean
  readonly hooks: number
  readonly obligations: number
  readonly rows: number
  readonly differences: ReadonlyArray<LifecycleDifference>
  readonly differenceCount: number
  /** Differences (all of them, past the listed ones too) that are leftovers, not corruption. */
  readonly leftoverCount: number
}

/** Seqs whose missing hook was reported already (rows of one hook in several families); bounded. */
const REPORTED_SEQS_MAX = 100_000

export const checkLifecycle = (store: StoreShape): Effect.Effect<LifecycleReport, StoreError> =>
  Effect.gen(function* () {
    const differences: Array<LifecycleDifference> = []
    let differenceCount = 0
    let leftoverCount = 0
    const report = (d: LifecycleDifference) => {
      differenceCount++
      if (d.leftover !== undefined) leftoverCount++
      if (differences.length < CHECK_MAX_DIFFERENCES) differences.push(d)
    }
    const counts = { hooks: 0, obligations: 0, rows: 0 }
    const format = yield* store.format
    const defaultOrd = format >= 3 ? yield* store.get("tenants", K.tenantOrdKey(DEFAULT_TENANT)) : undefined
    const ofDefault = defaultOrd === undefined || defaultOrd.length !== 4 ? undefined : K.decodeU32(defaultOrd)
    /** Format 2: every hook-less row is the format's own; format 3: a leftover only under tenant default. */
    const leftoverOf = (ord: number | undefined): Leftover | undefined =>
      format < 3 ? "format2_orphan" : ord !== undefined && ord === ofDefault ? "migrated_orphan" : undefined

    const walk = <A>(family: K.Family, decode: (e: Entry) => A, f: (items: ReadonlyArray<A>) => Effect.Effect<void, StoreError>) =>
      familyRows(store, family, { chunk: CHECK_CHUNK }).pipe(
        Stream.grouped(CHECK_CHUNK),
        Stream.runForEach((c) => {
          const items: Array<A> = []
          for (const e of c) {
            try {
              items.push(decode(e))
            } catch (err) {
              report({ problem: "bad_row", family: family.name, found: String(err) })
            }
          }
          return f(items)
        }),
        Effect.catchTag("StoreCorrupt", (e) => Effect.sync(() => report({ problem: "corrupt", family: family.name, found: e.message })))
      )

    const hooksOf = (seqs: ReadonlyArray<number>) =>
      store.multiGet("hooks", seqs.map(K.hookKey)).pipe(Effect.map((vs) => vs.map((v) => v !== undefined)))

    // Hooks: owed by a row, an obligation, or queued for reclaim.
    yield* walk(K.Families.hooks, (e) => K.decodeHookKey(e.key), (seqs) =>
      Effect.gen(function* () {
        counts.hooks += seqs.length
        const obligations = yield* store.multiGet("index", seqs.map(K.archiveKey))
        const markers = yield* store.multiGet("index", seqs.map(K.clearedKey))
        for (let i = 0; i < seqs.length; i++) {
          if (obligations[i] !== undefined || markers[i] !== undefined) continue
          const row = yield* store.first("deliveries", K.range(K.deliveryPrefix(seqs[i]!)))
          if (row === undefined) report({ problem: "hook_owed_by_nothing", family: "hooks", seq: seqs[i]! })
        }
      })
    )

    // Obligations: their hook exists (format 3 values name the tenant).
    const obligation = (e: Entry) => ({ seq: K.decodeArchiveKey(e.key), ord: format >= 3 ? K.decodeArchiveValue(e.value).ord : undefined })
    yield* walk(K.Families.archive, obligation, (items) =>
      Effect.gen(function* () {
        counts.obligations += items.length
        const present = yield* hooksOf(items.map((o) => o.seq))
        items.forEach((o, i) => {
          if (!present[i]) report({ problem: "obligation_without_hook", family: "archive", seq: o.seq, ...ordOf(o.ord), ...leftoverField(leftoverOf(o.ord)) })
        })
      })
    )

    // Delivery rows: their hook exists (one read per distinct seq of a chunk). Format 3 walks the
    // rows' index entries, which name the tenant; format 2's name none, so it walks the rows.
    const reported = new Set<number>()
    const rowsOf = (family: K.Family, decode: (e: Entry) => { readonly seq: number; readonly ord: number | undefined }) =>
      walk(family, decode, (rows) =>
        Effect.gen(function* () {
          counts.rows += rows.length
          const distinct = [...new Map(rows.map((r) => [r.seq, r.ord])).entries()].filter(([seq]) => !reported.has(seq))
          const present = yield* hooksOf(distinct.map(([seq]) => seq))
          distinct.forEach(([seq, ord], i) => {
            if (present[i]) return
            if (reported.size < REPORTED_SEQS_MAX) reported.add(seq)
            report({ problem: "row_without_hook", family: family.name, seq, ...ordOf(ord), ...leftoverField(leftoverOf(ord)) })
          })
        })
      )
    if (format >= 3) {
      yield* rowsOf(K.Families.due, (e) => K.decodeDueKey(e.key))
      yield* rowsOf(K.Families.inflight, (e) => K.decodeInflightKey(e.key))
      yield* rowsOf(K.Families.dead, (e) => ({ seq: K.decodeDeadKey(e.key).seq, ord: K.decodeDeadValue(e.value).ord }))
      yield* rowsOf(K.Families.waiting, (e) => K.decodeWaitingKey(e.key))
    } else {
      yield* rowsOf(K.Families.deliveries, (e) => ({ seq: K.decodeDeliveryKey(e.key).seq, ord: undefined }))
    }

    return { ok: differenceCount === 0, ...counts, differences, differenceCount, leftoverCount }
  })

const ordOf = (ord: number | undefined) => (ord === undefined ? {} : { ord })
const leftoverField = (leftover: Leftover | undefined) => (leftover === undefined ? {} : { leftover })

/** Differences that mean corruption. */
export const lifecycleCorruptions = (r: LifecycleReport): number => r.differenceCount - r.leftoverCount

/** One line per difference, for the CLI (after `formatReport` of check.ts); a leftover's line starts `leftover`, then one note per path. */
export const formatLifecycleReport = (r: LifecycleReport): string => {
  const corruptions = lifecycleCorruptions(r)
  const head = r.ok
    ? `lifecycle check: ok (${r.hooks} hooks, ${r.obligations} obligations, ${r.rows} delivery rows)`
    : `lifecycle check: ${r.differenceCount} difference(s): ${corruptions} corruption, ${r.leftoverCount} leftover(s) of a documented path`
  const lines = r.differences.map((d) =>
    [
      d.leftover === undefined ? "" : "leftover",
      d.problem,
      `family=${d.family}`,
      d.seq === undefined ? "" : `seq=${d.seq}`,
      d.ord === undefined ? "" : `ord=${d.ord}`,
      d.found === undefined ? "" : `found=${d.found}`,
      d.leftover === undefined ? "" : `(${d.leftover})`
    ]
      .filter((s) => s !== "")
      .join(" ")
  )
  if (r.differenceCount > r.differences.length) lines.push(`… and ${r.differenceCount - r.differences.length} more`)
  const paths = [...new Set(r.differences.flatMap((d) => (d.leftover === undefined ? [] : [d.leftover])))]
  for (const p of paths) lines.push(`note: ${p}: ${LEFTOVER_NOTES[p]}`)
  return [head, ...lines].join("\n")
}
