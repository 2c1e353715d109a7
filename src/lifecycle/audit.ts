/**
 * The `Audit` service: appends audit rows (replay, purge, quarantine deletes,
 * config reads), lists them newest first within a token's scope, and prunes
 * them by retention from a scheduled fiber. It builds every audit row; `stage`
 * hands one to an action that commits it in its own batch (limits).
 */
import { Clock, Context, Duration, Effect, Layer, Metric, Ref } from "effect"
import { type AuditEntry, type AuditRow, decodeAudit, encodeAudit, mentions, visibleTo } from "../domain/audit.js"
import { auditKey, decodeAuditKey, Families, familyDataRange } from "../domain/keys.js"
import { del, type Put, put } from "../domain/ops.js"
import { auditPruned } from "../observability/lifecycle-metrics.js"
import { scheduled } from "./scheduled.js"
import { Store, type StoreError } from "../store/store.js"

export interface AuditOptions {
  /** Rows older than this are pruned. */
  readonly retention: Duration.Input
  /** How often the pruner runs. */
  readonly pruneInterval: Duration.Input
  /** Rows deleted per pruning batch (one unsynced batch each). */
  readonly pruneChunk: number
  /** Most rows a list call examines (scope filtering can skip rows); it then answers with a cursor. */
  readonly listScanBudget: number
}

export const AuditDefaults: AuditOptions = {
  retention: Duration.days(90),
  pruneInterval: Duration.hours(1),
  pruneChunk: 1_000,
  listScanBudget: 10_000
}

/** Largest page a list call returns. */
export const MAX_LIST_LIMIT = 1_000

export interface AuditListQuery {
  /** The token's tenants; null for a global token. */
  readonly scope: ReadonlyArray<string> | null
  /** Only rows naming this tenant. */
  readonly tenant?: string
  readonly limit: number
  /** From a previous page: rows older than it. */
  readonly cursor?: string
}

export interface AuditPage {
  readonly rows: ReadonlyArray<AuditRow>
  /** Pass back for the next (older) page; null at the end. */
  readonly cursor: string | null
}

export interface AuditShape {
  /** Append one row (synced: an admin action is not acknowledged without its trace). */
  readonly record: (entry: AuditEntry) => Effect.Effect<AuditRow, StoreError>
  /** The put of a new row (its seq taken now), for an action that commits it with its own ops in one synced batch. */
  readonly stage: (entry: AuditEntry) => Effect.Effect<Put>
  readonly list: (q: AuditListQuery) => Effect.Effect<AuditPage, StoreError>
  /** Delete rows older than the retention; returns how many. */
  readonly prune: Effect.Effect<number, StoreError>
}

export class Audit extends Context.Service<Audit, AuditShape>()("ankusa/Audit") {}

const DATA = familyDataRange(Families.audit)

/** A cursor is the seq of the last row returned; anything else reads from the newest row. */
const parseCursor = (c: string | undefined): number | undefined => {
  if (c === undefined || !/^\d{1,16}$/.test(c)) return undefined
  return Number(c)
}

export const make = (options: Partial<AuditOptions> = {}) =>
  Effect.gen(function* () {
    const o = { ...AuditDefaults, ...options }
    const store = yield* Store
    const retentionMs = Duration.toMillis(o.retention)
    const last = yield* store.first("audit", DATA, { reverse: true })
    const nextSeq = yield* Ref.make(last === undefined ? 1 : decodeAuditKey(last.key).seq + 1)

    const staged = (entry: AuditEntry) =>
      Effect.gen(function* () {
        const seq = yield* Ref.getAndUpdate(nextSeq, (n) => n + 1)
        const at = yield* Clock.currentTimeMillis
        return { row: { ...entry, seq, at }, op: put("audit", auditKey(seq, at), encodeAudit(entry)) }
      })

    const record = (entry: AuditEntry) =>
      Effect.flatMap(staged(entry), ({ op, row }) => Effect.as(store.write([op], { sync: true }), row))

    const stage = (entry: AuditEntry) => Effect.map(staged(entry), ({ op }) => op)

    const list = (q: AuditListQuery) =>
      Effect.gen(function* () {
        const limit = Math.max(1, Math.min(q.limit, MAX_LIST_LIMIT))
        const before = parseCursor(q.cursor)
        let hi = before === undefined ? DATA.hi : auditKey(before, 0)
        const rows: Array<AuditRow> = []
        let examined = 0
        let lastSeq: number | undefined
        while (rows.length < limit && examined < o.listScanBudget) {
          const want = Math.min(limit - rows.length, o.listScanBudget - examined)
          const page = yield* store.scan("audit", { lo: DATA.lo, hi }, { limit: want, reverse: true })
          for (const e of page) {
            examined++
            const k = decodeAuditKey(e.key)
            lastSeq = k.seq
            const row = decodeAudit(k.seq, k.at, e.value)
            if (visibleTo(row, q.scope) && mentions(row, q.tenant)) rows.push(row)
          }
          if (page.length < want) return { rows, cursor: null }
          hi = auditKey(lastSeq!, 0)
        }
        // Stopped by the page size or the scan budget: older rows may remain.
        return { rows, cursor: lastSeq === undefined ? null : String(lastSeq) }
      })

    const prune = Effect.gen(function* () {
      const cutoff = (yield* Clock.currentTimeMillis) - retentionMs
      let pruned = 0
      for (;;) {
        const page = yield* store.scan("audit", DATA, { limit: o.pruneChunk })
        // Rows are in seq order and seq follows time, so the first young row ends the pass.
        const old = page.filter((e) => decodeAuditKey(e.key).at < cutoff)
        const stop = old.length < page.length || page.length < o.pruneChunk
        if (old.length > 0) {
          yield* store.write(old.map((e) => del("audit", e.key)), { sync: false })
          pruned += old.length
        }
        if (stop || old.length === 0) break
      }
      if (pruned > 0) yield* Metric.update(auditPruned, pruned)
      return pruned
    })

    return { record, stage, list, prune } satisfies AuditShape
  })

/**
 * Run an admin action behind its audit row. The row is written (synced)
 * before the action, so nothing changes data without a trace; a crash or a
 * failure after it leaves the row of an attempt, which is what an auditor
 * wants to see.
 */
export const audited = <A, E, R>(entry: AuditEntry, action: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreError, R | Audit> =>
  Effect.flatMap(Audit, (audit) => Effect.andThen(audit.record(entry), action))

export const layer = (options: Partial<AuditOptions> = {}): Layer.Layer<Audit, StoreError, Store> =>
  Layer.effect(Audit, make(options))

/** The retention pruner: a scoped fiber, interrupted at shutdown. */
export const layerPruner = (options: Partial<AuditOptions> = {}): Layer.Layer<never, never, Audit> =>
  scheduled(Audit, "audit prune", options.pruneInterval ?? AuditDefaults.pruneInterval, (a) => a.prune)
