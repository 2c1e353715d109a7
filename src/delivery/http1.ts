/**
 * The sinks' HTTP/1.1 client (docs/delivery.md "Connections"): a pool of at
 * most `maxSockets` keep-alive connections to one origin, each carrying one
 * exchange at a time (no pipelining). A request is written as one buffer; the
 * answer is parsed as it arrives, framed as RFC 9112 §6 says, and its head
 * decides: a 2xx is told as soon as its head is read, a non-2xx once the first
 * `EXCERPT_BYTES` of its body are in (or the body ended). The body is then
 * drained, never buffered, within `MAX_DRAIN_BYTES` and `MAX_DRAIN_MS`; past
 * either the connection is closed. A connection goes back to the pool only
 * when its request was written whole, its answer framed and read to its end,
 * and neither side said `close`.
 *
 * Why not `node:http`: the same call through its Agent, ClientRequest and
 * IncomingMessage streams cost about four times the CPU of this one
 * (docs/testing.md "Issue 15: changes and their paired runs"), and a sink
 * call needs none of what those layers add. test/http1-differential.test.ts
 * holds its framing to Node's parser. TLS is `node:tls` (the system's CAs, the
 * host name checked, SNI for names), with one resumable session kept a pool.
 */
import * as net from "node:net"
import * as tls from "node:tls"

/**
 * What came back: an answer's status (with, for a non-2xx, the first `EXCERPT_BYTES` of its
 * body), or a transport failure (connect, reset, a malformed head).
 */
export type Exchange =
  | { readonly _tag: "Answer"; readonly status: number; readonly retryAfter: string | undefined; readonly body?: string | undefined }
  | { readonly _tag: "Failed"; readonly reason: string }

/** How an answer's body ended: read to its end, cut at a drain bound, or cut short or malformed. */
export type BodyEnd = "end" | "bound" | "failed"

export interface Origin {
  readonly secure: boolean
  /** Bare (an IPv6 address without brackets). */
  readonly hostname: string
  readonly port: number
  readonly maxSockets: number
  /** An idle connection is closed after this long (earlier when the server's `Keep-Alive: timeout` says so). */
  readonly idleMs: number
  /** CAs trusted instead of the system's (tests). */
  readonly ca?: string | Buffer | undefined
  /** Told how each final answer's body ended (tests). */
  readonly bodyEnd?: ((how: BodyEnd) => void) | undefined
}

export interface Pool {
  /**
   * Send `head` (the request line and headers, ending in an empty line) and `body` on a free
   * connection (or the next one freed), and call `done` once with what came back, never
   * synchronously. The returned function cuts the exchange: its connection is destroyed and
   * `done` is not called; it returns the answer when its head was read and not yet told (a
   * non-2xx still reading its excerpt).
   */
  readonly send: (head: string, body: Uint8Array, done: (e: Exchange) => void) => () => Exchange | undefined
  /** Connections open now (busy, draining or idle). */
  readonly open: () => number
  /** Close every connection; exchanges in flight are cut. */
  readonly close: () => void
}

/** The most bytes an answer's status line and headers (or its trailers) may take (Node's own default is 16 KiB). */
export const MAX_HEAD_BYTES = 64 * 1024
/** After its head, the most body bytes an answer is read for; past it its connection is closed. */
export const MAX_DRAIN_BYTES = 1024 * 1024
/** After its head, the longest an answer's body is read for; past it its connection is closed. */
export const MAX_DRAIN_MS = 1_000
/** The first bytes of a non-2xx answer's body kept for the retry log. */
export const EXCERPT_BYTES = 4 * 1024

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
  /** Its answer was told (the exchange may still drain its body). */
  told: boolean
  /** Already sent again on a new connection after a kept-alive one failed. */
  resent: boolean
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
  /** Answers it carried to their end and was kept for. */
  served: number
  /** The drain's timer, from a final head whose body did not end with its chunk. */
  drain: ReturnType<typeof setTimeout> | undefined
  /** Closed at a drain bound. */
  bound: boolean
}

type Phase = "head" | "none" | "length" | "chunk-size" | "chunk-data" | "chunk-end" | "trailers" | "close"

interface Parser {
  phase: Phase
  /** Head, chunk-size line or trailer bytes so far (latin1). */
  text: string
  /** Body or chunk bytes left to skip. */
  left: number
  /** The final answer's head was read. */
  final: boolean
  status: number
  retryAfter: string | undefined
  keepAlive: boolean
  /** Answer bytes received (interim answers included). */
  received: number
  /** Body bytes of the final answer read. */
  bodyBytes: number
  /** A non-2xx's first body bytes. */
  excerpt: Array<Buffer> | undefined
  excerptBytes: number
}

const newParser = (): Parser => ({
  phase: "head",
  text: "",
  left: 0,
  final: false,
  status: 0,
  retryAfter: undefined,
  keepAlive: true,
  received: 0,
  bodyBytes: 0,
  excerpt: undefined,
  excerptBytes: 0
})

// RFC 9110 §5.6.2: tchar.
const TCHAR = new Uint8Array(256)
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TCHAR[c.charCodeAt(0)] = 1

/**
 * Field lines (a head's after its status line, or trailers) hold only field bytes (RFC 9110 §5.5:
 * HTAB, SP, VCHAR, obs-text), CR only before LF and LF only after CR (RFC 9112 §2.2).
 */
const BAD_FIELD_BYTES = /[^\t\r\n\x20-\x7e\x80-\xff]|\r(?!\n)|(?<!\r)\n/g

const TOKEN = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+"
const QUOTED = '"(?:[\\t \\x21\\x23-\\x5b\\x5d-\\x7e\\x80-\\xff]|\\\\[\\t\\x20-\\x7e\\x80-\\xff])*"'
/** RFC 9112 §7.1.1: chunk-size [ chunk-ext ], chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ). */
const CHUNK_LINE = new RegExp(`^([0-9A-Fa-f]+)(?:[ \\t]*;[ \\t]*${TOKEN}(?:[ \\t]*=[ \\t]*(?:${TOKEN}|${QUOTED}))?)*\r\n$`)

/** The header names an answer's framing and our outcome read, by length (the only ones lower-cased). */
const WANTED = new Set(["content-length", "transfer-encoding", "connection", "keep-alive", "retry-after"])
const WANTED_LENGTHS = new Set([...WANTED].map((n) => n.length))

const isDigit = (c: number) => c >= 48 && c <= 57
const isWs = (c: number) => c === 32 || c === 9

/** A value without its leading and trailing OWS (SP and HTAB only; RFC 9110 §5.5). */
const trimOws = (s: string, from: number, to: number): string => {
  while (from < to && isWs(s.charCodeAt(from))) from++
  while (to > from && isWs(s.charCodeAt(to - 1))) to--
  return s.slice(from, to)
}

/** Digits (or hex digits) without leading zeros past `max` digits: a length past 2^64 - 1 (as llhttp). */
const overflows = (digits: string, max: number, top: string): boolean => {
  let i = 0
  while (i < digits.length - 1 && digits.charCodeAt(i) === 48) i++
  const n = digits.length - i
  return n > max || (n === max && digits.slice(i).toLowerCase() > top)
}

/**
 * The field lines of a head (from `at`) or trailer section: names are tokens with the colon right
 * after them (RFC 9112 §5.1), a line starting with whitespace continues the previous one
 * (obs-fold, joined with one space: §5.2) but cannot be the first (§2.2). `wanted` is told the
 * framing fields (lower-cased name, value without OWS); a reason when a line is malformed.
 */
const fields = (text: string, at: number, wanted: ((name: string, value: string) => string | undefined) | undefined): string | undefined => {
  const length = text.length
  while (at < length) {
    if (isWs(text.charCodeAt(at))) return "whitespace before the first field line"
    let i = at
    while (TCHAR[text.charCodeAt(i)] === 1) i++
    if (i === at || text.charCodeAt(i) !== 58) return "malformed header line"
    const colon = i
    let end = text.indexOf("\r\n", colon)
    if (end < 0) end = length
    let folded = false
    while (end < length && isWs(text.charCodeAt(end + 2))) {
      folded = true
      end = text.indexOf("\r\n", end + 2)
      if (end < 0) end = length
    }
    if (wanted !== undefined && WANTED_LENGTHS.has(colon - at)) {
      const name = text.slice(at, colon).toLowerCase()
      if (WANTED.has(name)) {
        const value = folded ? trimOws(text.slice(colon + 1, end).replace(/[ \t]*\r\n[ \t]+/g, " "), 0, Infinity) : trimOws(text, colon + 1, end)
        const why = wanted(name, value)
        if (why !== undefined) return why
      }
    }
    at = end + 2
  }
  return undefined
}

/** One answer's head parsed: the framing of its body, or why it is not an answer we can read. */
const parseHead = (p: Parser, head: string, conn: Conn, origin: Origin): string | undefined => {
  // "HTTP/1.x SSS" then a space and a reason, or the line's end (RFC 9112 §4). The reason's bytes
  // are not read (§4: a client SHOULD ignore it), as llhttp does, but it has no bare CR or LF.
  let eol = head.indexOf("\r\n")
  if (eol < 0) eol = head.length
  const cr = head.indexOf("\r")
  const lf = head.indexOf("\n")
  if ((cr >= 0 && cr < eol) || (lf >= 0 && lf <= eol)) return "malformed status line"
  BAD_FIELD_BYTES.lastIndex = eol
  if (BAD_FIELD_BYTES.test(head)) return "malformed header line"
  if (
    !head.startsWith("HTTP/1.") || (head.charCodeAt(7) !== 48 && head.charCodeAt(7) !== 49) || head.charCodeAt(8) !== 32 ||
    !isDigit(head.charCodeAt(9)) || !isDigit(head.charCodeAt(10)) || !isDigit(head.charCodeAt(11)) || (eol > 12 && head.charCodeAt(12) !== 32)
  ) return "malformed status line"
  const minor = head.charCodeAt(7) - 48
  const status = Number(head.slice(9, 12))
  // RFC 9110 §15: a status code is 100 to 599 (600 and up are read as the server errors they stand for).
  if (status < 100) return "status code under 100"
  let length: string | undefined
  let codings: string | undefined
  let connection = ""
  let keepAliveHint: string | undefined
  let retryAfter: string | undefined
  const why = fields(head, eol + 2, (name, value) => {
    if (name === "content-length") {
      // RFC 9112 §6.3 ¶5: one length of digits; a repeated one is refused, as llhttp does.
      if (length !== undefined) return "repeated content-length"
      if (!/^\d+$/.test(value) || overflows(value, 20, "18446744073709551615")) return "bad content-length"
      length = value
    } else if (name === "transfer-encoding") {
      if (value === "") return "empty transfer-encoding"
      // §5.3: several lines are one list.
      codings = codings === undefined ? value : `${codings},${value}`
    } else if (name === "connection") connection += `${value.toLowerCase()},`
    else if (name === "keep-alive") keepAliveHint = value
    else retryAfter = value
    return undefined
  })
  if (why !== undefined) return why
  // §6.3 ¶3: a length beside a transfer coding may be smuggling; refused, the connection closed.
  if (length !== undefined && codings !== undefined) return "content-length with transfer-encoding"
  if (status >= 100 && status < 200 && status !== 101) return undefined
  p.final = true
  p.status = status
  p.retryAfter = retryAfter
  p.keepAlive = minor === 1 ? !/(?:^|,)\s*close\s*,/.test(connection) : /(?:^|,)\s*keep-alive\s*,/.test(connection)
  const hint = keepAliveHint === undefined ? undefined : /(?:^|,)\s*timeout=(\d+)/i.exec(keepAliveHint)
  if (hint !== null && hint !== undefined) {
    // As Node's Agent does: a second short of the server's own timeout, and none left means close.
    const ms = Number(hint[1]) * 1000 - 1000
    if (ms <= 0) p.keepAlive = false
    else conn.idleMs = Math.min(origin.idleMs, ms)
  }
  if (status < 200 || status >= 300) p.excerpt = []
  if (status === 101) {
    // A switch nobody asked for (RFC 9110 §7.8): the answer, and the connection is not used again.
    p.keepAlive = false
    p.phase = "none"
  } else if (status === 204 || status === 304) p.phase = "none"
  else if (codings !== undefined) {
    // §6.3 ¶4: chunked when it is the last coding; otherwise the body runs to the close. §6.1: a
    // transfer coding in an HTTP/1.0 answer is read, and the connection closed after it.
    const list = codings.split(",")
    let last = ""
    for (let i = list.length - 1; i >= 0 && last === ""; i--) last = trimOws(list[i]!, 0, list[i]!.length)
    if (minor === 0) p.keepAlive = false
    if (last.toLowerCase() === "chunked") p.phase = "chunk-size"
    else {
      p.keepAlive = false
      p.phase = "close"
    }
  } else if (length !== undefined) {
    p.left = Number(length)
    p.phase = p.left === 0 ? "none" : "length"
  } else {
    // No framing: the body runs to the connection's close, which then cannot be reused.
    p.keepAlive = false
    p.phase = "close"
  }
  return undefined
}

/** Body bytes read: counted, and a non-2xx's first ones kept. */
const bodyRead = (p: Parser, chunk: Buffer, at: number, n: number) => {
  p.bodyBytes += n
  if (p.excerpt !== undefined && p.excerptBytes < EXCERPT_BYTES) {
    const take = Math.min(n, EXCERPT_BYTES - p.excerptBytes)
    p.excerpt.push(Buffer.from(chunk.subarray(at, at + take)))
    p.excerptBytes += take
  }
}

/**
 * Feed `chunk` to the connection's parser: "done" when the answer is complete, "done-extra" when
 * bytes follow a complete answer (the connection is out of step and is not reused), a reason when
 * the bytes are not a readable answer, undefined when more are needed.
 */
const feed = (p: Parser, chunk: Buffer, conn: Conn, origin: Origin): "done" | "done-extra" | string | undefined => {
  const complete = (at: number) => (at === chunk.length ? "done" : "done-extra")
  let at = 0
  while (at < chunk.length) {
    switch (p.phase) {
      case "head":
      case "trailers": {
        // Both end at an empty line (trailers at once when there are none); look across chunks.
        const prev = p.text.length
        p.text += chunk.toString("latin1", at, Math.min(chunk.length, at + MAX_HEAD_BYTES + 4 - prev))
        let stop = -1
        if (p.phase === "trailers" && p.text.startsWith("\r\n")) stop = 2
        else {
          const end = p.text.indexOf("\r\n\r\n", Math.max(0, prev - 3))
          if (end >= 0) stop = end + 4
        }
        if (stop < 0 ? p.text.length > MAX_HEAD_BYTES : stop > MAX_HEAD_BYTES) return "answer head too large"
        if (stop < 0) return undefined
        at += stop - prev
        const text = p.text.slice(0, Math.max(0, stop - 4))
        p.text = ""
        if (p.phase === "trailers") {
          // RFC 9112 §7.1.2: field lines as in a head, none of them read.
          BAD_FIELD_BYTES.lastIndex = 0
          const why = BAD_FIELD_BYTES.test(text) ? "malformed trailers" : fields(text, 0, undefined)
          if (why !== undefined) return why
          return complete(at)
        }
        const why = parseHead(p, text, conn, origin)
        if (why !== undefined) return why
        // An interim answer (1xx): the final one follows.
        if (!p.final) continue
        if ((p.phase as Phase) === "none") return complete(at)
        break
      }
      case "length": {
        const n = Math.min(p.left, chunk.length - at)
        bodyRead(p, chunk, at, n)
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
        const m = CHUNK_LINE.exec(p.text)
        p.text = ""
        if (m === null) return "malformed chunk size"
        if (overflows(m[1]!, 16, "ffffffffffffffff")) return "chunk size overflow"
        p.left = parseInt(m[1]!, 16)
        // The last chunk is followed by trailers (usually none), ending at an empty line.
        p.phase = p.left === 0 ? "trailers" : "chunk-data"
        break
      }
      case "chunk-data": {
        const n = Math.min(p.left, chunk.length - at)
        bodyRead(p, chunk, at, n)
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
        bodyRead(p, chunk, at, chunk.length - at)
        return undefined
      case "none":
        return complete(at)
    }
  }
  return undefined
}

const answerOf = (p: Parser): Exchange => ({
  _tag: "Answer",
  status: p.status,
  retryAfter: p.retryAfter,
  body: p.excerptBytes > 0 ? Buffer.concat(p.excerpt!).toString("utf8") : undefined
})

export const pool = (origin: Origin): Pool => {
  const idle: Array<Conn> = []
  const waiting: Array<Pending> = []
  const all = new Set<Conn>()
  let closed = false
  /** The last TLS session a connection of this pool was given, offered to the next one. */
  let session: Buffer | undefined

  /** The connection's exchange ends: it is taken off the connection (tell its caller after `release`). */
  const take = (conn: Conn): Pending | undefined => {
    const ex = conn.current
    conn.current = undefined
    conn.parser = undefined
    if (conn.drain !== undefined) {
      clearTimeout(conn.drain)
      conn.drain = undefined
    }
    return ex
  }
  const tell = (ex: Pending | undefined, e: Exchange) => {
    if (ex === undefined || ex.told) return
    ex.told = true
    if (!ex.cut) ex.done(e)
  }

  const release = (conn: Conn, reusable: boolean) => {
    if (!reusable || closed || conn.socket.destroyed) {
      conn.socket.destroy()
      return
    }
    conn.served += 1
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

  /** The answer's final head is read and its body goes on: tell a 2xx now, bound the drain. */
  const draining = (conn: Conn, ex: Pending, p: Parser) => {
    if (p.bodyBytes > MAX_DRAIN_BYTES) {
      conn.bound = true
      conn.socket.destroy()
      return
    }
    if (!ex.told && ((p.status >= 200 && p.status < 300) || p.excerptBytes >= EXCERPT_BYTES)) tell(ex, answerOf(p))
    if (conn.drain === undefined && conn.current === ex) {
      conn.drain = setTimeout(() => {
        conn.bound = true
        conn.socket.destroy()
      }, MAX_DRAIN_MS)
    }
  }

  const connect = (ex: Pending) => {
    const options = { host: origin.hostname, port: origin.port }
    const socket = origin.secure
      ? tls.connect({
          ...options,
          servername: net.isIP(origin.hostname) === 0 ? origin.hostname : undefined,
          ALPNProtocols: ["http/1.1"],
          session,
          ca: origin.ca
        })
      : net.connect(options)
    socket.setNoDelay(true)
    socket.setKeepAlive(true, 1_000)
    const conn: Conn = { socket, current: undefined, parser: undefined, idleMs: origin.idleMs, error: undefined, served: 0, drain: undefined, bound: false }
    all.add(conn)
    if (origin.secure) socket.on("session", (s: Buffer) => (session = s))
    socket.on("data", (chunk: Buffer) => {
      const p = conn.parser
      const ex = conn.current
      if (p === undefined || ex === undefined) {
        // Bytes nobody asked for: the connection is out of step.
        socket.destroy()
        return
      }
      p.received += chunk.length
      const r = feed(p, chunk, conn, origin)
      if (r === undefined) {
        if (p.final) draining(conn, ex, p)
        return
      }
      if (r === "done" || r === "done-extra") {
        take(conn)
        origin.bodyEnd?.("end")
        // Back in the pool first, so the call the caller starts next can have this connection.
        // Reused only when the request went out whole (no answer before its end: undici's rule too).
        release(conn, r === "done" && p.keepAlive && socket.writableLength === 0)
        tell(ex, answerOf(p))
      } else {
        take(conn)
        socket.destroy()
        if (p.final) {
          // The head decided; the body is cut short.
          origin.bodyEnd?.("failed")
          tell(ex, answerOf(p))
        } else tell(ex, { _tag: "Failed", reason: r })
      }
    })
    socket.on("timeout", () => socket.destroy())
    socket.on("error", (e: Error & { code?: string }) => {
      // 'close' follows: the exchange (if any) fails there, with this reason.
      conn.error = e.code ?? e.message
      if (origin.secure) session = undefined
    })
    socket.on("close", () => {
      all.delete(conn)
      const i = idle.indexOf(conn)
      if (i >= 0) idle.splice(i, 1)
      const p = conn.parser
      const ex = take(conn)
      // A kept-alive connection that failed before any byte of the answer (the sink closed it
      // while idle): the call is sent once more on a new one, in this slot. No attempt is used.
      if (ex !== undefined && !ex.cut && !ex.resent && !closed && conn.served > 0 && p !== undefined && p.received === 0) {
        ex.resent = true
        return connect(ex)
      }
      // A slot freed: a waiting exchange gets a new connection (before the caller below may ask for one).
      const next = closed ? undefined : waiting.shift()
      if (next !== undefined) connect(next)
      if (ex === undefined) return
      if (p !== undefined && p.final) {
        // A body framed by the close ends here; one cut at a bound or short was still decided by its head.
        origin.bodyEnd?.(conn.bound ? "bound" : p.phase === "close" && conn.error === undefined ? "end" : "failed")
        tell(ex, answerOf(p))
      } else tell(ex, { _tag: "Failed", reason: conn.error ?? "connection closed before the answer's end" })
    })
    assign(conn, ex)
  }

  const send = (head: string, body: Uint8Array, done: (e: Exchange) => void): (() => Exchange | undefined) => {
    const ex: Pending = { head, body, done, conn: undefined, cut: false, told: false, resent: false }
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
      if (ex.cut) return undefined
      ex.cut = true
      const conn = ex.conn
      if (conn !== undefined && conn.current === ex) {
        const p = conn.parser
        const partial = p !== undefined && p.final && !ex.told ? answerOf(p) : undefined
        conn.socket.destroy()
        return partial
      }
      const i = waiting.indexOf(ex)
      if (i >= 0) waiting.splice(i, 1)
      return undefined
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
const NAME = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/

/** A header name HTTP allows (a token). */
export const validName = (name: string): boolean => NAME.test(name)
/** A header value HTTP allows (no control character but tab; latin1: one byte a character on the wire). */
export const validValue = (value: string): boolean => !INVALID_VALUE.test(value)
