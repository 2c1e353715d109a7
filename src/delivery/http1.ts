/**
 * The sinks' HTTP/1.1 client (docs/delivery.md "Connections"): a pool of at
 * most `maxSockets` keep-alive connections to one origin, each carrying one
 * exchange at a time (no pipelining). A request is written as one buffer; the
 * answer is parsed as it arrives (status line, headers, then a body framed by
 * `content-length`, `chunked`, or the connection's close) and its body is
 * discarded chunk by chunk, never buffered. Only the status and
 * `retry-after` are kept.
 *
 * Why not `node:http`: the same call through its Agent, ClientRequest and
 * IncomingMessage streams cost about four times the CPU of this one
 * (docs/testing.md "Issue 15: changes and their paired runs"), and a sink
 * call needs none of what those layers add. TLS is `node:tls` with its
 * defaults (the system's CAs, the host name checked).
 */
import * as net from "node:net"
import * as tls from "node:tls"

/** What came back: a complete answer's status, or a transport failure (connect, reset, a malformed answer). */
export type Exchange =
  | { readonly _tag: "Answer"; readonly status: number; readonly retryAfter: string | undefined }
  | { readonly _tag: "Failed"; readonly reason: string }

export interface Origin {
  readonly secure: boolean
  /** Bare (an IPv6 address without brackets). */
  readonly hostname: string
  readonly port: number
  readonly maxSockets: number
  /** An idle connection is closed after this long (earlier when the server's `Keep-Alive: timeout` says so). */
  readonly idleMs: number
}

export interface Pool {
  /**
   * Send `head` (the request line and headers, ending in an empty line) and `body` on a free
   * connection (or the next one freed), and call `done` once with what came back, never
   * synchronously. The returned function cuts the exchange: its connection is destroyed and
   * `done` is not called.
   */
  readonly send: (head: string, body: Uint8Array, done: (e: Exchange) => void) => () => void
  /** Connections open now (busy or idle). */
  readonly open: () => number
  /** Close every connection; exchanges in flight are cut. */
  readonly close: () => void
}

/** The most bytes an answer's status line and headers may take (Node's own default is 16 KiB). */
export const MAX_HEAD_BYTES = 64 * 1024

/** The most bytes of one chunk-size line (the size in hex and its extensions). */
const MAX_CHUNK_LINE_BYTES = 4 * 1024

/** Bodies above this are written after the head as a second write, not copied into one buffer. */
const COPY_BODY_BYTES = 64 * 1024

interface Pending {
  readonly head: string
  readonly body: Uint8Array
  readonly done: (e: Exchange) => void
  conn: Conn | undefined
  cut: boolean
}

interface Conn {
  readonly socket: net.Socket
  current: Pending | undefined
  /** The answer being read; undefined between exchanges. */
  parser: Parser | undefined
  /** The server's keep-alive hint for this connection's idle time, ms. */
  idleMs: number
  /** The socket's error, if it had one (the reason its exchange failed). */
  error: string | undefined
}

type Phase = "head" | "length" | "chunk-size" | "chunk-data" | "chunk-end" | "trailers" | "close"

interface Parser {
  phase: Phase
  /** Head, chunk-size line or trailer bytes so far (latin1). */
  text: string
  /** Body or chunk bytes left to skip. */
  left: number
  status: number
  retryAfter: string | undefined
  keepAlive: boolean
}

const newParser = (): Parser => ({ phase: "head", text: "", left: 0, status: 0, retryAfter: undefined, keepAlive: true })

/** The header names an answer's framing and our outcome read, by length (the only ones lower-cased). */
const WANTED = new Set(["content-length", "transfer-encoding", "connection", "keep-alive", "retry-after"])
const WANTED_LENGTHS = new Set([...WANTED].map((n) => n.length))

const isDigit = (c: number) => c >= 48 && c <= 57

/** One answer's head parsed: the framing of its body, or why it is not an answer we can read. */
const parseHead = (p: Parser, head: string, conn: Conn, origin: Origin): string | undefined => {
  // "HTTP/1.x SSS" then a space or the line's end.
  let eol = head.indexOf("\r\n")
  if (eol < 0) eol = head.length
  if (
    !head.startsWith("HTTP/1.") || (head.charCodeAt(7) !== 48 && head.charCodeAt(7) !== 49) || head.charCodeAt(8) !== 32 ||
    !isDigit(head.charCodeAt(9)) || !isDigit(head.charCodeAt(10)) || !isDigit(head.charCodeAt(11)) || (eol > 12 && head.charCodeAt(12) !== 32)
  ) return "malformed status line"
  const minor = head.charCodeAt(7) - 48
  p.status = Number(head.slice(9, 12))
  let length: string | undefined
  let chunked = false
  let connection = ""
  let keepAliveHint: string | undefined
  let at = eol + 2
  while (at < head.length) {
    let end = head.indexOf("\r\n", at)
    if (end < 0) end = head.length
    const colon = head.indexOf(":", at)
    if (colon <= at || colon > end) return "malformed header line"
    let nameEnd = colon
    while (nameEnd > at && head.charCodeAt(nameEnd - 1) === 32) nameEnd--
    if (WANTED_LENGTHS.has(nameEnd - at)) {
      const name = head.slice(at, nameEnd).toLowerCase()
      if (WANTED.has(name)) {
        const value = head.slice(colon + 1, end).trim()
        if (name === "content-length") {
          if (!/^\d{1,15}$/.test(value) || (length !== undefined && length !== value)) return "bad content-length"
          length = value
        } else if (name === "transfer-encoding") chunked = /(?:^|,)\s*chunked\s*$/i.test(value)
        else if (name === "connection") connection += `${value.toLowerCase()},`
        else if (name === "keep-alive") keepAliveHint = value
        else p.retryAfter = value
      }
    }
    at = end + 2
  }
  p.keepAlive = minor === 1 ? !/(?:^|,)\s*close\s*,/.test(connection) : /(?:^|,)\s*keep-alive\s*,/.test(connection)
  const hint = keepAliveHint === undefined ? undefined : /(?:^|,)\s*timeout=(\d+)/i.exec(keepAliveHint)
  if (hint !== null && hint !== undefined) {
    // As Node's Agent does: a second short of the server's own timeout, and none left means close.
    const ms = Number(hint[1]) * 1000 - 1000
    if (ms <= 0) p.keepAlive = false
    else conn.idleMs = Math.min(origin.idleMs, ms)
  }
  if (p.status === 101) return "unexpected protocol switch"
  if ((p.status >= 100 && p.status < 200) || p.status === 204 || p.status === 304) p.phase = "head"
  else if (chunked) p.phase = "chunk-size"
  else if (length !== undefined) {
    p.left = Number(length)
    p.phase = "length"
  } else {
    // No framing: the body runs to the connection's close, which then cannot be reused.
    p.keepAlive = false
    p.phase = "close"
  }
  return undefined
}

/**
 * Feed `chunk` to the connection's parser: "done" when the answer is complete (its status in the
 * parser), "done-extra" when bytes follow a complete answer (the connection is out of step and is
 * not reused), a reason when the bytes are not a readable answer, undefined when more are needed.
 */
const feed = (conn: Conn, chunk: Buffer, origin: Origin): "done" | "done-extra" | string | undefined => {
  const p = conn.parser!
  const complete = (at: number) => (at === chunk.length ? "done" : "done-extra")
  let at = 0
  while (at < chunk.length) {
    switch (p.phase) {
      case "head":
      case "trailers": {
        // Both end at an empty line (trailers at once when there are none); look across chunks.
        const prev = p.text.length
        p.text += chunk.toString("latin1", at, chunk.length)
        let stop = -1
        if (p.phase === "trailers" && p.text.startsWith("\r\n")) stop = 2
        else {
          const end = p.text.indexOf("\r\n\r\n", Math.max(0, prev - 3))
          if (end >= 0) stop = end + 4
        }
        if (stop < 0 ? p.text.length > MAX_HEAD_BYTES : stop > MAX_HEAD_BYTES) return "answer head too large"
        if (stop < 0) return undefined
        at += stop - prev
        const head = p.text.slice(0, Math.max(0, stop - 4))
        p.text = ""
        if (p.phase === "trailers") return complete(at)
        const why = parseHead(p, head, conn, origin)
        if (why !== undefined) return why
        // An interim answer (1xx): the real one follows.
        if (p.status < 200) continue
        if (p.phase === "head" || (p.phase === "length" && p.left === 0)) return complete(at)
        break
      }
      case "length": {
        const n = Math.min(p.left, chunk.length - at)
        p.left -= n
        at += n
        if (p.left === 0) return complete(at)
        break
      }
      case "chunk-size": {
        const nl = chunk.indexOf(10, at)
        p.text += chunk.toString("latin1", at, nl < 0 ? chunk.length : nl + 1)
        if (p.text.length > MAX_CHUNK_LINE_BYTES) return "chunk size line too long"
        if (nl < 0) return undefined
        at = nl + 1
        const m = /^([0-9a-fA-F]{1,12})(?:;[^\r\n]*)?\r\n$/.exec(p.text)
        p.text = ""
        if (m === null) return "malformed chunk size"
        p.left = parseInt(m[1]!, 16)
        // The last chunk is followed by trailers (usually none), ending at an empty line.
        p.phase = p.left === 0 ? "trailers" : "chunk-data"
        break
      }
      case "chunk-data": {
        const n = Math.min(p.left, chunk.length - at)
        p.left -= n
        at += n
        if (p.left === 0) {
          p.phase = "chunk-end"
          p.left = 2
        }
        break
      }
      case "chunk-end": {
        // The CRLF after a chunk's data, one byte at a time (it may straddle two reads).
        if (chunk[at] !== (p.left === 2 ? 13 : 10)) return "malformed chunk end"
        at += 1
        p.left -= 1
        if (p.left === 0) p.phase = "chunk-size"
        break
      }
      case "close":
        // The body runs to the connection's close.
        return undefined
    }
  }
  return undefined
}

export const pool = (origin: Origin): Pool => {
  const idle: Array<Conn> = []
  const waiting: Array<Pending> = []
  const all = new Set<Conn>()
  let closed = false

  /** The connection's exchange ends: it is taken off the connection (tell its caller after `release`). */
  const take = (conn: Conn): Pending | undefined => {
    const ex = conn.current
    conn.current = undefined
    conn.parser = undefined
    return ex
  }
  const tell = (ex: Pending | undefined, e: Exchange) => {
    if (ex !== undefined && !ex.cut) ex.done(e)
  }

  const release = (conn: Conn, reusable: boolean) => {
    if (!reusable || closed || conn.socket.destroyed) {
      conn.socket.destroy()
      return
    }
    const next = waiting.shift()
    if (next !== undefined) return assign(conn, next)
    conn.socket.setTimeout(conn.idleMs)
    // An idle connection does not keep the process alive (as Node's Agent).
    conn.socket.unref()
    idle.push(conn)
  }

  const write = (conn: Conn, ex: Pending) => {
    // The head is latin1 (validated: one byte a character), so its length is its size in bytes.
    if (ex.body.byteLength <= COPY_BODY_BYTES) {
      const out = Buffer.allocUnsafe(ex.head.length + ex.body.byteLength)
      out.write(ex.head, 0, "latin1")
      out.set(ex.body, ex.head.length)
      conn.socket.write(out)
    } else {
      conn.socket.cork()
      conn.socket.write(ex.head, "latin1")
      conn.socket.write(ex.body)
      conn.socket.uncork()
    }
  }

  const assign = (conn: Conn, ex: Pending) => {
    conn.current = ex
    conn.parser = newParser()
    ex.conn = conn
    conn.socket.ref()
    conn.socket.setTimeout(0)
    write(conn, ex)
  }

  const connect = (ex: Pending) => {
    const options = { host: origin.hostname, port: origin.port }
    const socket = origin.secure
      ? tls.connect({ ...options, servername: net.isIP(origin.hostname) === 0 ? origin.hostname : undefined, ALPNProtocols: ["http/1.1"] })
      : net.connect(options)
    socket.setNoDelay(true)
    socket.setKeepAlive(true, 1_000)
    const conn: Conn = { socket, current: undefined, parser: undefined, idleMs: origin.idleMs, error: undefined }
    all.add(conn)
    socket.on("data", (chunk: Buffer) => {
      if (conn.parser === undefined) {
        // Bytes nobody asked for: the connection is out of step.
        socket.destroy()
        return
      }
      const r = feed(conn, chunk, origin)
      if (r === undefined) return
      if (r === "done" || r === "done-extra") {
        const p = conn.parser
        const ex = take(conn)
        // Back in the pool first, so the call the caller starts next can have this connection.
        release(conn, r === "done" && p.keepAlive)
        tell(ex, { _tag: "Answer", status: p.status, retryAfter: p.retryAfter })
      } else {
        const ex = take(conn)
        socket.destroy()
        tell(ex, { _tag: "Failed", reason: r })
      }
    })
    socket.on("timeout", () => socket.destroy())
    socket.on("error", (e: Error & { code?: string }) => {
      // 'close' follows: the exchange (if any) fails there, with this reason.
      conn.error = e.code ?? e.message
    })
    socket.on("close", () => {
      all.delete(conn)
      const i = idle.indexOf(conn)
      if (i >= 0) idle.splice(i, 1)
      const p = conn.parser
      const ex = take(conn)
      // A slot freed: a waiting exchange gets a new connection (before the caller below may ask for one).
      const next = closed ? undefined : waiting.shift()
      if (next !== undefined) connect(next)
      if (ex !== undefined) {
        // A body framed by the close ends here; anything else was cut short.
        if (p !== undefined && p.phase === "close") tell(ex, { _tag: "Answer", status: p.status, retryAfter: p.retryAfter })
        else tell(ex, { _tag: "Failed", reason: conn.error ?? "connection closed before the answer's end" })
      }
    })
    assign(conn, ex)
  }

  const send = (head: string, body: Uint8Array, done: (e: Exchange) => void): (() => void) => {
    const ex: Pending = { head, body, done, conn: undefined, cut: false }
    if (closed) {
      process.nextTick(() => ex.cut || done({ _tag: "Failed", reason: "client closed" }))
    } else {
      let conn = idle.pop()
      while (conn !== undefined && (conn.socket.destroyed || !conn.socket.writable)) conn = idle.pop()
      if (conn !== undefined) assign(conn, ex)
      else if (all.size < origin.maxSockets) connect(ex)
      else waiting.push(ex)
    }
    return () => {
      if (ex.cut) return
      ex.cut = true
      if (ex.conn !== undefined && ex.conn.current === ex) ex.conn.socket.destroy()
      else {
        const i = waiting.indexOf(ex)
        if (i >= 0) waiting.splice(i, 1)
      }
    }
  }

  return {
    send,
    open: () => all.size,
    close: () => {
      closed = true
      // Every call still hears of its end: the waiting ones here (on the next turn, as a call sent
      // after the close), the ones on a connection from its 'close'.
      const left = waiting.splice(0)
      if (left.length > 0) process.nextTick(() => left.forEach((ex) => tell(ex, { _tag: "Failed", reason: "client closed" })))
      for (const conn of all) conn.socket.destroy()
    }
  }
}

// Header names are tokens; values have no control characters but tab (RFC 9110 §5.5), as Node checks.
const TOKEN = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/

/** A header name HTTP allows (a token). */
export const validName = (name: string): boolean => TOKEN.test(name)
/** A header value HTTP allows (no control character but tab; latin1: one byte a character on the wire). */
export const validValue = (value: string): boolean => !INVALID_VALUE.test(value)
