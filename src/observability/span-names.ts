/**
 * Every span the gateway makes, in one table (docs/observability.md): its name, its kind and
 * where it starts. HTTP spans follow OpenTelemetry's semantic conventions (`{method} {route}`
 * for the server, `{method}` for the client).
 */
export const Spans = {
  /** The ingest request (src/http/ingest.ts), continuing the sender's `traceparent`. */
  ingest: { name: "POST /v1/hooks/:source", kind: "server" },
  /** The Writer's synced commit (src/queue/writer-commit.ts): one a batch, linked to the requests it carries. */
  commit: { name: "ankusa.writer.commit", kind: "internal" },
  /** A claim of due rows (src/delivery/tick.ts): linked to the hooks it claimed. */
  claim: { name: "ankusa.queue.claim", kind: "internal" },
  /** One delivery attempt (src/delivery/call-trace.ts), a child of the hook's ingest span. */
  attempt: { name: "POST", kind: "client" },
  /** The outcome committer's write (src/delivery/outcomes.ts): one a batch, linked to the attempts it settles. */
  outcome: { name: "ankusa.pipeline.outcome_commit", kind: "internal" }
} as const

export type SpanName = (typeof Spans)[keyof typeof Spans]

/** Links one span keeps at most (a batch's requests or attempts past it are counted in `ankusa.links_dropped`). */
export const MAX_LINKS = 128
