/**
 * The gateway's span: what the exporter sends (otlp-export.ts), made by the plain-callback hot
 * paths through `Tracing.start` and by Effect code through the tracer of tracing.ts, so it is
 * also an Effect `Tracer.Span` (a log line under it carries its ids, logger.ts).
 */
import { Context, type Exit, Option, type Tracer } from "effect"
import { randomFillSync } from "node:crypto"
import type { TraceContext } from "../domain/trace-context.js"

// Ids come from a pool of random bytes refilled 4 KiB at a time and hex-encoded once a refill:
// one syscall and one encoding per ~170 spans, each id a slice of that text.
const POOL = Buffer.allocUnsafe(4096)
let hex = ""
let at = POOL.length * 2
const randomHex = (bytes: number): string => {
  const chars = bytes * 2
  if (at + chars > hex.length) (randomFillSync(POOL), (hex = POOL.toString("hex")), (at = 0))
  const s = hex.slice(at, at + chars)
  at += chars
  return s
}
export const newTraceId = (): string => randomHex(16)
export const newSpanId = (): string => randomHex(8)

// Epoch nanoseconds with the monotonic clock's resolution.
const ORIGIN = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint()
export const nowNanos = (): bigint => ORIGIN + process.hrtime.bigint()

export interface Link {
  readonly traceId: string
  readonly spanId: string
}

export type Sink = (span: TraceSpan) => void

const NO_LINKS: Array<Tracer.SpanLink> = []
const NO_LINKED: Array<Link> = []

export class TraceSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly annotations = Context.empty()
  readonly attributes = new Map<string, unknown>()
  /** Shared empty arrays until a first link: most spans have none. */
  links: Array<Tracer.SpanLink> = NO_LINKS
  /** Links to spans of other traces (a batch's requests), exported as OTLP links. */
  linked: Array<Link> = NO_LINKED
  status: Tracer.SpanStatus
  /** OTLP status: 0 unset, 2 error. */
  error = false
  constructor(
    readonly name: string,
    readonly kind: Tracer.SpanKind,
    readonly traceId: string,
    readonly spanId: string,
    readonly parentSpanId: string | undefined,
    readonly sampled: boolean,
    readonly traceState: string | undefined,
    startTime: bigint,
    private readonly sink: Sink | undefined
  ) {
    this.status = { _tag: "Started", startTime }
  }
  get parent(): Option.Option<Tracer.AnySpan> {
    return this.parentSpanId === undefined ? Option.none() : Option.some({ _tag: "ExternalSpan", spanId: this.parentSpanId, traceId: this.traceId, sampled: this.sampled, annotations: Context.empty() })
  }
  /** The context a child of this span, or a receiver, continues. */
  context(): TraceContext {
    return { traceId: this.traceId, spanId: this.spanId, sampled: this.sampled, traceState: this.traceState }
  }
  /** Kept only on a sampled span: an unsampled one is never exported, so its attributes are not worth a write. */
  attribute(key: string, value: unknown): void {
    if (this.sampled) this.attributes.set(key, value)
  }
  event(): void {}
  /** A link to a span of another trace. */
  link(l: Link): void {
    if (this.linked === NO_LINKED) this.linked = []
    this.linked.push(l)
  }
  addLinks(links: ReadonlyArray<Tracer.SpanLink>): void {
    if (links.length === 0) return
    if (this.links === NO_LINKS) this.links = []
    this.links.push(...links)
    for (const l of links) this.link({ traceId: l.span.traceId, spanId: l.span.spanId })
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    if (this.status._tag === "Ended") return
    if (exit._tag === "Failure") this.error = true
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
    if (this.sampled) this.sink?.(this)
  }
  /** End now, from a plain callback: `error` marks the span's status as an error. */
  endNow(error = false): void {
    if (error) this.error = true
    this.end(nowNanos(), OK)
  }
}

const OK = { _tag: "Success", value: undefined } as unknown as Exit.Exit<unknown, unknown>
