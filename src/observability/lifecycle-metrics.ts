/**
 * Metrics of the hook lifecycle's scheduled fibers (issue 7): dedupe sweep,
 * quarantine, archive compactor, reclaim, DLQ ceiling and audit pruning.
 * Effect metrics, exported by the edge's Prometheus endpoint with the rest.
 */
import { Effect, Layer, Metric } from "effect"

export const dedupeSwept = Metric.counter("ankusa_dedupe_swept_total", {
  description: "Expired dedupe keys (?u with their ?e) deleted by the sweep",
  incremental: true
})

export const quarantined = Metric.counter("ankusa_quarantine_stored_total", {
  description: "Requests that failed verification and were kept in quarantine",
  incremental: true
})

/** reason: count | bytes (the bound pushed the oldest out), retention, oversize (a record larger than maxBytes). */
export const quarantineDropped = Metric.counter("ankusa_quarantine_dropped_total", {
  description: "Quarantined requests dropped by a bound or by retention",
  incremental: true
})

export const archiveCompactions = Metric.counter("ankusa_archive_compactions_total", {
  description: "Compactor steps that appended a block to an archive segment",
  incremental: true
})

export const archiveHooks = Metric.counter("ankusa_archive_hooks_total", {
  description: "Hooks written to archive segments (obligations settled)",
  incremental: true
})

/** reason: retention (older than archive.retention), missing (the hook was gone). */
export const archiveDropped = Metric.counter("ankusa_archive_obligations_dropped_total", {
  description: "Archive obligations dropped without writing the hook",
  incremental: true
})

export const archiveRepairs = Metric.counter("ankusa_archive_repairs_total", {
  description: "Torn or uncommitted archive segment tails cut at start",
  incremental: true
})

export const archiveFramesLost = Metric.counter("ankusa_archive_frames_lost_total", {
  description: "Committed archive frames that failed their CRC at start (disk corruption)",
  incremental: true
})

export const reclaimHooks = Metric.counter("ankusa_reclaim_hooks_total", {
  description: "Hooks deleted by reclaim once nothing owed them",
  incremental: true
})

export const reclaimVisited = Metric.counter("ankusa_reclaim_markers_visited_total", {
  description: "?c cleared markers reclaim looked at",
  incremental: true
})

/** reason: rows (dlq.maxRows), bytes (dlq.maxBytes). */
export const dlqCeilingDropped = Metric.counter("ankusa_dlq_ceiling_dropped_total", {
  description: "Dead rows dropped, oldest first, by the DLQ ceiling",
  incremental: true
})

export const auditPruned = Metric.counter("ankusa_audit_pruned_total", {
  description: "Audit rows deleted by retention",
  incremental: true
})

/** The series of `m` labelled `reason`. */
export const withReason = (m: Metric.Counter<number>, reason: string): Metric.Counter<number> => Metric.withAttributes(m, { reason })

/** Every series above, each reason of the labelled ones included. */
const series: ReadonlyArray<Metric.Counter<number>> = [
  dedupeSwept,
  quarantined,
  ...["count", "bytes", "retention", "oversize"].map((r) => withReason(quarantineDropped, r)),
  archiveCompactions,
  archiveHooks,
  ...["retention", "missing"].map((r) => withReason(archiveDropped, r)),
  archiveRepairs,
  archiveFramesLost,
  reclaimHooks,
  reclaimVisited,
  ...["rows", "bytes"].map((r) => withReason(dlqCeilingDropped, r)),
  auditPruned
]

/** Registers every series at 0, so /metrics shows them from boot rather than from their first event. */
export const layer: Layer.Layer<never> = Layer.effectDiscard(Effect.forEach(series, (m) => Metric.update(m, 0), { discard: true }))
