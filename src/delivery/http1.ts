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
import * as dns from "node:dns"
import * as net from "node:net"
import * as tls from "node:tls"
import { answerOf, type BodyEnd, type Exchange, EXCERPT_BYTES, feed, newParser, type Parser } from "./http1-answer.js"

export { type BodyEnd, EXCERPT_BYTES, type Exchange, MAX_HEAD_BYTES, validName, validValue } from "./http1-answer.js"

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
  /**
   * The SSRF guard (src/domain/ssrf.ts) of a tenant endpoint: each address a name resolves to is
   * checked before a connection is made (so a rebinding DNS answer is refused too), on every new
   * connection; the reason, or undefined to allow it.
   */
  readonly guard?: ((address: string) => string | undefined) | undefined
}

/** A `lookup` for `net.connect` that keeps only the addresses `guard` allows; none left: `EUNSAFE`. */
const guardedLookup =
  (guard: (address: string) => string | undefined): net.LookupFunction =>
  (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, found) => {
      if (err !== null) return callback(err, "", 4)
      const list = found as unknown as Array<dns.LookupAddress>
      const allowed = list.filter((a) => guard(a.address) === undefined)
      if (allowed.length === 0) {
        const first = list[0]
        const e = Object.assign(new Error(`unsafe address ${first?.address ?? "(none)"}: ${first === undefined ? "no address" : guard(first.address)}`), {
          code: "EUNSAFE"
        })
        return callback(e, "", 4)
      }
      if (options.all === true) (callback as unknown as (e: null, a: Array<dns.LookupAddress>) => void)(null, allowed)
      else callback(null, allowed[0]!.address, allowed[0]!.family)
    })
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

/** After its head, the most body bytes an answer is read for; past it its connection is closed. */
export const MAX_DRAIN_BYTES = 1024 * 1024
/** After its head, the longest an answer's body is read for; past it its connection is closed. */
export const MAX_DRAIN_MS = 1_000

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
    const options = { host: origin.hostname, port: origin.port, ...(origin.guard === undefined ? {} : { lookup: guardedLookup(origin.guard) }) }
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
      const r = feed(p, chunk)
      if (p.idleMs !== undefined) conn.idleMs = Math.min(origin.idleMs, p.idleMs)
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
      conn.error = e.code === "EUNSAFE" ? e.message : (e.code ?? e.message)
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

