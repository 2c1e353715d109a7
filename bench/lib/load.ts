/**
 * A closed-loop HTTP/1.1 load generator on raw keep-alive sockets: each
 * connection sends one pre-built request, reads the whole answer, sends the
 * next (no pipelining), as autocannon does. Requests are built once as bytes,
 * so the generator spends its time on the sockets, not on building requests.
 * Latency is from the first byte written to the last byte of the answer.
 */
import { createHistogram } from "node:perf_hooks"
import { connect, type Socket } from "node:net"

export interface LoadOptions {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string
  readonly connections: number
  /** Measured time. */
  readonly seconds: number
  /** Time run first and not counted (JIT, first sight of tenants, connection setup). */
  readonly warmupSeconds: number
  /** Raw requests, sent round-robin across all connections. */
  readonly requests: ReadonlyArray<Buffer>
}

export interface LoadResult {
  readonly seconds: number
  /** Answers counted in the measured time, and per second. */
  readonly answered: number
  readonly rate: number
  readonly statuses: Readonly<Record<string, number>>
  readonly errors: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
}

/** A POST with a body, as raw bytes. */
export const rawPost = (path: string, host: string, headers: Readonly<Record<string, string>>, body: Buffer): Buffer =>
  Buffer.concat([
    Buffer.from(
      `POST ${path} HTTP/1.1\r\nhost: ${host}\r\nconnection: keep-alive\r\ncontent-length: ${body.length}\r\n` +
        Object.entries(headers)
          .map(([k, v]) => `${k}: ${v}\r\n`)
          .join("") +
        "\r\n"
    ),
    body
  ])

const HEADER_END = Buffer.from("\r\n\r\n")
const CHUNKED_END = Buffer.from("0\r\n\r\n")

/** Length of the first complete answer in `buf`, or -1 if it is not complete yet. */
const answerLength = (buf: Buffer): number => {
  const end = buf.indexOf(HEADER_END)
  if (end < 0) return -1
  const head = buf.toString("latin1", 0, end).toLowerCase()
  const cl = /\r\ncontent-length:\s*(\d+)/.exec(head)
  if (cl !== null) {
    const total = end + 4 + Number(cl[1])
    return buf.length >= total ? total : -1
  }
  if (head.includes("transfer-encoding: chunked")) {
    const last = buf.indexOf(CHUNKED_END, end + 4)
    return last < 0 ? -1 : last + CHUNKED_END.length
  }
  return end + 4
}

/** Reads the answers arriving on a keep-alive socket: `onAnswer` gets each complete one's status (three digits), in order. */
export const onAnswers = (socket: Socket, onAnswer: (status: string) => void): void => {
  let buf: Buffer = Buffer.alloc(0)
  socket.on("data", (d: Buffer) => {
    buf = buf.length === 0 ? d : Buffer.concat([buf, d])
    for (;;) {
      const n = answerLength(buf)
      if (n < 0) return
      const status = buf.toString("latin1", 9, 12)
      buf = buf.subarray(n)
      onAnswer(status)
    }
  })
}

export const runLoad = (o: LoadOptions): Promise<LoadResult> =>
  new Promise((resolve) => {
    const url = new URL(o.origin)
    const port = Number(url.port)
    const latency = createHistogram()
    const statuses: Record<string, number> = {}
    let answered = 0
    let errors = 0
    let next = 0
    let measuring = false
    let stopped = false
    let measureStart = 0
    const sockets = new Set<Socket>()

    const connection = () => {
      const socket = connect(port, url.hostname)
      sockets.add(socket)
      socket.setNoDelay(true)
      let sentAt = 0
      const send = () => {
        if (stopped) return
        sentAt = performance.now()
        socket.write(o.requests[next++ % o.requests.length]!)
      }
      socket.on("connect", send)
      onAnswers(socket, (status) => {
        if (measuring) {
          answered++
          statuses[status] = (statuses[status] ?? 0) + 1
          latency.record(Math.max(1, Math.round((performance.now() - sentAt) * 1000)))
        }
        send()
      })
      socket.on("error", () => {
        if (measuring) errors++
      })
      socket.on("close", () => {
        sockets.delete(socket)
        // The server closed a keep-alive connection (or failed): open another.
        if (!stopped) connection()
      })
    }

    const done = () => {
      const seconds = (performance.now() - measureStart) / 1000
      stopped = true
      measuring = false
      // Answers still in flight are not counted.
      for (const s of sockets) s.destroy()
      resolve({
        seconds,
        answered,
        rate: answered / seconds,
        statuses,
        errors,
        p50Ms: latency.count === 0 ? NaN : latency.percentile(50) / 1000,
        p99Ms: latency.count === 0 ? NaN : latency.percentile(99) / 1000,
        maxMs: latency.count === 0 ? NaN : latency.max / 1000
      })
    }

    for (let i = 0; i < o.connections; i++) connection()
    setTimeout(() => {
      measuring = true
      measureStart = performance.now()
      setTimeout(done, o.seconds * 1000)
    }, o.warmupSeconds * 1000)
  })
