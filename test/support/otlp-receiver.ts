/**
 * An OTLP/HTTP traces receiver on 127.0.0.1, port 0, for the tests and benches that trace a
 * real `ankusa serve` child: it decodes each JSON `ExportTraceServiceRequest` into flat spans.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"

export interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly startTimeUnixNano: string
  readonly endTimeUnixNano: string
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: Record<string, unknown> }>
  readonly links: ReadonlyArray<{ readonly traceId: string; readonly spanId: string }>
  readonly status: { readonly code: number }
}

export interface OtlpReceiver {
  readonly url: string
  readonly spans: Array<OtlpSpan>
  /** The headers of each export request. */
  readonly requests: Array<IncomingHttpHeaders>
  readonly close: () => Promise<void>
}

/** An attribute's value as a plain value (string, number or boolean). */
export const attr = (s: OtlpSpan, key: string): unknown => {
  const v = s.attributes.find((a) => a.key === key)?.value
  if (v === undefined) return undefined
  const x = v.stringValue ?? v.intValue ?? v.doubleValue ?? v.boolValue
  return typeof x === "string" && v.intValue !== undefined ? Number(x) : x
}

export const startOtlpReceiver = (): Promise<OtlpReceiver> =>
  new Promise((resolve) => {
    const spans: Array<OtlpSpan> = []
    const requests: Array<IncomingHttpHeaders> = []
    const server: Server = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        requests.push(req.headers)
        const doc = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<OtlpSpan> }> }>
        }
        for (const r of doc.resourceSpans) for (const s of r.scopeSpans) spans.push(...s.spans)
        res.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}/v1/traces`,
        spans,
        requests,
        close: () => new Promise((done) => server.close(() => done()))
      })
    })
  })

/** A loopback port with nothing listening: bound, read, closed. */
export const closedPort = (): Promise<number> =>
  new Promise((resolve) => {
    const s = createServer()
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as AddressInfo
      s.close(() => resolve(port))
    })
  })
