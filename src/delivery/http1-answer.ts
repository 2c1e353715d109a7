/**
 * A sink's answer as it arrives (docs/delivery.md "Answers"): the status line
 * and headers, then a body framed as RFC 9112 §6 says, discarded as it is read
 * but for a non-2xx's first `EXCERPT_BYTES`. The pool (src/delivery/http1.ts)
 * feeds it each chunk a connection reads.
 */

/**
 * What came back: an answer's status (with, for a non-2xx, the first `EXCERPT_BYTES` of its
 * body), or a transport failure (connect, reset, a malformed head).
 */
export type Exchange =
  | { readonly _tag: "Answer"; readonly status: number; readonly retryAfter: string | undefined; readonly body?: string | undefined }
  | { readonly _tag: "Failed"; readonly reason: string }

/** How an answer's body ended: read to its end, cut at a drain bound, or cut short or malformed. */
export type BodyEnd = "end" | "bound" | "failed"

/** The most bytes an answer's status line and headers (or its trailers) may take (Node's own default is 16 KiB). */
export const MAX_HEAD_BYTES = 64 * 1024
/** The first bytes of a non-2xx answer's body kept for the retry log. */
export const EXCERPT_BYTES = 4 * 1024

/** The most bytes of one chunk-size line (the size in hex and its extensions). */
const MAX_CHUNK_LINE_BYTES = 4 * 1024

type Phase = "head" | "none" | "length" | "chunk-size" | "chunk-data" | "chunk-end" | "trailers" | "close"

export interface Parser {
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
  /** The server's `Keep-Alive: timeout` less a second, ms (the connection's idle time); undefined without one. */
  idleMs: number | undefined
  /** Answer bytes received (interim answers included). */
  received: number
  /** Body bytes of the final answer read. */
  bodyBytes: number
  /** A non-2xx's first body bytes. */
  excerpt: Array<Buffer> | undefined
  excerptBytes: number
}

export const newParser = (): Parser => ({
  phase: "head",
  text: "",
  left: 0,
  final: false,
  status: 0,
  retryAfter: undefined,
  keepAlive: true,
  idleMs: undefined,
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
const parseHead = (p: Parser, head: string): string | undefined => {
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
    else p.idleMs = ms
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
 * The head or the trailers, read across chunks to their empty line (trailers at once when there
 * are none) and parsed: the offset in `chunk` after them, -1 when more is needed, or why not.
 */
const section = (p: Parser, chunk: Buffer, at: number): number | string => {
  const prev = p.text.length
  p.text += chunk.toString("latin1", at, Math.min(chunk.length, at + MAX_HEAD_BYTES + 4 - prev))
  let stop = -1
  if (p.phase === "trailers" && p.text.startsWith("\r\n")) stop = 2
  else {
    const end = p.text.indexOf("\r\n\r\n", Math.max(0, prev - 3))
    if (end >= 0) stop = end + 4
  }
  if (stop < 0 ? p.text.length > MAX_HEAD_BYTES : stop > MAX_HEAD_BYTES) return "answer head too large"
  if (stop < 0) return -1
  const text = p.text.slice(0, Math.max(0, stop - 4))
  p.text = ""
  if (p.phase === "head") return parseHead(p, text) ?? at + stop - prev
  // RFC 9112 §7.1.2: field lines as in a head, none of them read.
  BAD_FIELD_BYTES.lastIndex = 0
  return (BAD_FIELD_BYTES.test(text) ? "malformed trailers" : fields(text, 0, undefined)) ?? at + stop - prev
}

/**
 * Feed `chunk` to the connection's parser: "done" when the answer is complete, "done-extra" when
 * bytes follow a complete answer (the connection is out of step and is not reused), a reason when
 * the bytes are not a readable answer, undefined when more are needed.
 */
export const feed = (p: Parser, chunk: Buffer): "done" | "done-extra" | string | undefined => {
  const complete = (at: number) => (at === chunk.length ? "done" : "done-extra")
  let at = 0
  while (at < chunk.length) {
    switch (p.phase) {
      case "head":
      case "trailers": {
        const trailers = p.phase === "trailers"
        const next = section(p, chunk, at)
        if (typeof next === "string") return next
        if (next < 0) return undefined
        at = next
        // Trailers end the answer; an interim answer (1xx) is followed by the final one.
        if (trailers || (p.final && (p.phase as Phase) === "none")) return complete(at)
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

export const answerOf = (p: Parser): Exchange => ({
  _tag: "Answer",
  status: p.status,
  retryAfter: p.retryAfter,
  body: p.excerptBytes > 0 ? Buffer.concat(p.excerpt!).toString("utf8") : undefined
})

// Header names are tokens; values have no control characters but tab (RFC 9110 §5.5): the rule the endpoint save asks too.
export { validName, validValue } from "../domain/http-headers.js"
