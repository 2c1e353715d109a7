/**
 * The Writer's metrics (docs/api.md "Metrics"): how many requests each
 * synced commit carried (the group commit at work) and how long the synced
 * write took. Together they say whether ingest is bound by the disk (long
 * commits) or by the edge (short commits of few requests).
 */
import { Metric } from "effect"

/** 1 to 4,096 requests (`writer.maxBatch` is at most 4,096), doubling. */
export const batchRequests = Metric.histogram("ankusa_writer_batch_requests", {
  description: "Requests answered by one Writer commit (new hooks and their duplicates)",
  boundaries: Metric.exponentialBoundaries({ start: 1, factor: 2, count: 13 })
})

/** 0.25 ms to about 8 s, doubling. */
export const commitSeconds = Metric.histogram("ankusa_writer_commit_seconds", {
  description: "Duration of the Writer's synced write (the fsync included), per commit",
  boundaries: Metric.exponentialBoundaries({ start: 0.00025, factor: 2, count: 16 })
})

/** 1 while the store takes the Writer's commits; 0 from one it failed (a full disk, an I/O error) until one it takes. */
export const storeWritable = Metric.gauge("ankusa_store_writable", {
  description: "1 while the store takes the Writer's commits, 0 from a commit it failed (disk full, I/O error) until one succeeds"
})
