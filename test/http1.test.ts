/**
 * The sinks' HTTP/1.1 client (src/delivery/http1.ts) against real servers on
 * 127.0.0.1: raw TCP servers that answer with exactly the bytes a case needs
 * (split into one-byte writes where the framing must survive any split), a
 * node:http server for keep-alive, and a TLS server with a certificate made
 * for the test.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as tls from "node:tls"
import * as Http1 from "../src/delivery/http1.js"

interface Raw {
  readonly port: number
  /** Connections accepted so far. */
  readonly connections: () => number
  /** Requests read to their end so far. */
  readonly requests: () => number
  readonly close: () => Promise<void>
}

/** A TCP server that reads each request (head and content-length body) and answers with `answer(n)` (n counts from 0), in `split` writes. */
const rawServer = (answer: (n: number) => string | Buffer | undefined, split = false): Promise<Raw> =>
  new Promise((resolve) => {
    let connections = 0
    let requests = 0
    const sockets = new Set<net.Socket>()
    const server = net.createServer((socket) => {
      connections++
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
      socket.on("error", () => {})
      let buf = Buffer.alloc(0)
      socket.on("data", async (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk])
        for (;;) {
          const end = buf.indexOf("\r\n\r\n")
          if (end < 0) return
          const length = Number(/\r\ncontent-length: (\d+)/i.exec(buf.toString("latin1", 0, end))?.[1] ?? 0)
          if (buf.length < end + 4 + length) return
          buf = buf.subarray(end + 4 + length)
          const a = answer(requests++)
          if (a === undefined) continue
          const bytes = typeof a === "string" ? Buffer.from(a, "latin1") : a
          if (!split) socket.write(bytes)
          else for (let i = 0; i < bytes.length; i++) {
            socket.write(bytes.subarray(i, i + 1))
            await new Promise((r) => setImmediate(r))
          }
        }
      })
    })
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as net.AddressInfo).port,
        connections: () => connections,
        requests: () => requests,
        close: () =>
          new Promise((r) => {
            for (const s of sockets) s.destroy()
            server.close(() => r())
          })
      }))
  })

const origin = (port: number, o: Partial<Http1.Origin> = {}): Http1.Origin => ({
  secure: false,
  hostname: "127.0.0.1",
  port,
  maxSockets: 4,
  idleMs: 4_000,
  ...o
})

const HEAD = "POST /sink HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\n"
const BODY = Buffer.from("hello")

const send = (pool: Http1.Pool, head = HEAD, body: Uint8Array = BODY) =>
  new Promise<Http1.Exchange>((resolve) => {
    pool.send(head, body, resolve)
  })

const withRaw = async (answer: (n: number) => string | Buffer | undefined, split: boolean, f: (server: Raw, pool: Http1.Pool) => Promise<void>, o: Partial<Http1.Origin> = {}) => {
  const server = await rawServer(answer, split)
  const pool = Http1.pool(origin(server.port, o))
  try {
    await f(server, pool)
  } finally {
    pool.close()
    await server.close()
  }
}

const CHUNKED = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nretry-after: 7\r\n\r\n5;ext=1\r\nhello\r\n0\r\nx-trailer: t\r\n\r\n"

describe("sink HTTP/1.1 client", () => {
  it("a chunked answer split into one-byte reads is read to its end, and its connection reused", async () => {
    await withRaw(() => CHUNKED, true, async (server, pool) => {
      for (let i = 0; i < 3; i++) expect(await send(pool)).toEqual({ _tag: "Answer", status: 200, retryAfter: "7" })
      expect(server.connections()).toBe(1)
    })
  })

  it("a content-length answer split into one-byte reads is read to its end, and its connection reused", async () => {
    await withRaw(() => "HTTP/1.1 503 Busy\r\nContent-Length: 11\r\nRetry-After: 120\r\n\r\nhello world", true, async (server, pool) => {
      for (let i = 0; i < 3; i++) expect(await send(pool)).toEqual({ _tag: "Answer", status: 503, retryAfter: "120" })
      expect(server.connections()).toBe(1)
    })
  })

  it("interim 1xx answers are skipped for the final one", async () => {
    await withRaw(() => "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 204\r\n\r\n", true, async (_, pool) => {
      expect(await send(pool)).toEqual({ _tag: "Answer", status: 204, retryAfter: undefined })
    })
  })

  it("an answer that says connection: close is taken, and its connection not reused", async () => {
    await withRaw(() => "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", false, async (server, pool) => {
      expect(await send(pool)).toEqual({ _tag: "Answer", status: 204, retryAfter: undefined })
      expect(await send(pool)).toEqual({ _tag: "Answer", status: 204, retryAfter: undefined })
      expect(server.connections()).toBe(2)
    })
  })

  it("an answer with no framing runs to the connection's close", async () => {
    const server = await new Promise<net.Server>((resolve) => {
      const s = net.createServer((socket) => {
        socket.once("data", () => socket.end("HTTP/1.0 200 OK\r\n\r\nthe body until close"))
      })
      s.listen(0, "127.0.0.1", () => resolve(s))
    })
    const pool = Http1.pool(origin((server.address() as net.AddressInfo).port))
    try {
      expect(await send(pool)).toEqual({ _tag: "Answer", status: 200, retryAfter: undefined })
    } finally {
      pool.close()
      await new Promise((r) => server.close(r))
    }
  })

  it("a malformed answer, or one cut before its end, fails as a transport error", async () => {
    for (const bad of ["HTTP/2 200\r\n\r\n", "HTTP/1.1 200 OK\r\ncontent-length: 1x\r\n\r\n", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"]) {
      await withRaw(() => bad, false, async (_, pool) => {
        expect((await send(pool))._tag, bad).toBe("Failed")
      })
    }
    // The head says 100 bytes; the server closes after 5.
    const server = await new Promise<net.Server>((resolve) => {
      const s = net.createServer((socket) => socket.once("data", () => socket.end("HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort")))
      s.listen(0, "127.0.0.1", () => resolve(s))
    })
    const pool = Http1.pool(origin((server.address() as net.AddressInfo).port))
    try {
      expect((await send(pool))._tag).toBe("Failed")
    } finally {
      pool.close()
      await new Promise((r) => server.close(r))
    }
  })

  it("an answer head past MAX_HEAD_BYTES fails as a transport error", async () => {
    const big = `HTTP/1.1 200 OK\r\nx-big: ${"a".repeat(Http1.MAX_HEAD_BYTES)}\r\n\r\n`
    await withRaw(() => big, false, async (_, pool) => {
      expect(await send(pool)).toMatchObject({ _tag: "Failed", reason: "answer head too large" })
    })
  })

  it("a refused connection fails as a transport error", async () => {
    const server = await rawServer(() => undefined)
    const port = server.port
    await server.close()
    const pool = Http1.pool(origin(port))
    try {
      expect(await send(pool)).toMatchObject({ _tag: "Failed", reason: "ECONNREFUSED" })
    } finally {
      pool.close()
    }
  })

  it("at most maxSockets connections, however many calls wait", async () => {
    let open = 0
    let maxOpen = 0
    const server = http.createServer((req, res) => {
      req.resume()
      req.on("end", () => setTimeout(() => res.writeHead(204).end(), 20))
    })
    server.on("connection", (s) => {
      open++
      maxOpen = Math.max(maxOpen, open)
      s.on("close", () => open--)
    })
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    const pool = Http1.pool(origin((server.address() as net.AddressInfo).port, { maxSockets: 3 }))
    try {
      const out = await Promise.all(Array.from({ length: 20 }, () => send(pool)))
      expect(out.every((e) => e._tag === "Answer" && e.status === 204)).toBe(true)
      expect(maxOpen).toBe(3)
      expect(pool.open()).toBe(3)
    } finally {
      pool.close()
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
    }
  })

  it("calls re-sent from the callbacks of calls the sink cut stay within maxSockets", async () => {
    let seen = 0
    // Every other request is cut by the sink (no answer); the rest answer 204 and close.
    const server = net.createServer((socket) => {
      socket.on("error", () => {})
      socket.once("data", () => (seen++ % 2 === 0 ? socket.destroy() : socket.end("HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")))
    })
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    const pool = Http1.pool(origin((server.address() as net.AddressInfo).port, { maxSockets: 2 }))
    try {
      // The client's own count (the server sees a closed connection go a little later): sampled
      // as each call is sent and once the event that sent it has run to its end.
      let maxClient = 0
      const sample = () => (maxClient = Math.max(maxClient, pool.open()))
      // Six chains of four calls each, every next call sent from inside the previous one's callback
      // (as the pipeline does), so it runs while the pool is still handling that call's end.
      const chain = (left: number, done: () => void): void => {
        pool.send(HEAD, BODY, () => {
          if (left > 1) chain(left - 1, done)
          else done()
        })
        sample()
        setImmediate(sample)
      }
      await Promise.all(Array.from({ length: 6 }, () => new Promise<void>((resolve) => chain(4, resolve))))
      expect(seen).toBe(24)
      expect(maxClient).toBe(2)
    } finally {
      pool.close()
      await new Promise((r) => server.close(r))
    }
  })

  it("a connection the sink closed while idle is not used again; the next call opens one", async () => {
    const server = http.createServer((req, res) => {
      req.resume()
      req.on("end", () => res.writeHead(204).end())
    })
    server.keepAliveTimeout = 100
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    const pool = Http1.pool(origin((server.address() as net.AddressInfo).port))
    try {
      expect(await send(pool)).toMatchObject({ _tag: "Answer", status: 204 })
      await new Promise((r) => setTimeout(r, 400))
      expect(pool.open()).toBe(0)
      expect(await send(pool)).toMatchObject({ _tag: "Answer", status: 204 })
    } finally {
      pool.close()
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
    }
  })

  it("a Keep-Alive timeout hint closes an idle connection a second before the sink would", async () => {
    await withRaw(() => "HTTP/1.1 204 No Content\r\nKeep-Alive: timeout=1\r\n\r\n", false, async (server, pool) => {
      expect(await send(pool)).toMatchObject({ _tag: "Answer", status: 204 })
      // timeout=1 leaves no time at all: the connection is closed at once, as Node's Agent does.
      await new Promise((r) => setTimeout(r, 50))
      expect(pool.open()).toBe(0)
      expect(await send(pool)).toMatchObject({ _tag: "Answer", status: 204 })
      expect(server.connections()).toBe(2)
    })
  })

  it("a cut exchange never calls back, and its connection is closed", async () => {
    await withRaw(() => undefined, false, async (server, pool) => {
      let called = false
      const cut = pool.send(HEAD, BODY, () => (called = true))
      for (let i = 0; i < 100 && server.requests() === 0; i++) await new Promise((r) => setTimeout(r, 10))
      cut()
      await new Promise((r) => setTimeout(r, 100))
      expect(called).toBe(false)
      expect(pool.open()).toBe(0)
    })
  })

  it("closing the pool ends every call: the waiting ones and the ones on a connection", async () => {
    await withRaw(() => undefined, false, async (server, pool) => {
      const ends = Array.from({ length: 3 }, () => send(pool))
      for (let i = 0; i < 100 && server.requests() === 0; i++) await new Promise((r) => setTimeout(r, 10))
      pool.close()
      const out = await Promise.all(ends)
      expect(out.map((e) => e._tag)).toEqual(["Failed", "Failed", "Failed"])
      // One was on the only connection; the two waiting for it end as calls sent after a close.
      expect(out.filter((e) => e._tag === "Failed" && e.reason === "client closed")).toHaveLength(2)
      expect(server.connections()).toBe(1)
      expect(await send(pool)).toEqual({ _tag: "Failed", reason: "client closed" })
    }, { maxSockets: 1 })
  })

  it("header names must be tokens and values free of control characters but tab", () => {
    for (const bad of ["bad name", "", "x:y", "caf\u00e9"]) expect(Http1.validName(bad), bad).toBe(false)
    expect(Http1.validName("X-Signature_2")).toBe(true)
    for (const bad of ["one\r\ntwo", "a\u0000b", "del\u007f", "\u0100"]) expect(Http1.validValue(bad), JSON.stringify(bad)).toBe(false)
    for (const ok of ["caf\u00e9", "a\tb", ""]) expect(Http1.validValue(ok), JSON.stringify(ok)).toBe(true)
  })

  describe("TLS", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-tls-"))
    const key = path.join(dir, "key.pem")
    const cert = path.join(dir, "cert.pem")
    const made = spawnSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], { encoding: "utf8" })

    const tlsServer = () =>
      new Promise<tls.Server>((resolve) => {
        const s = tls.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) }, (socket) => {
          socket.on("error", () => {})
          socket.on("data", () => socket.write("HTTP/1.1 204 No Content\r\n\r\n"))
        })
        s.listen(0, "127.0.0.1", () => resolve(s))
      })

    it("an https sink whose certificate nobody trusts fails as a transport error", async () => {
      expect(made.status, made.stderr).toBe(0)
      const server = await tlsServer()
      const pool = Http1.pool(origin((server.address() as net.AddressInfo).port, { secure: true }))
      try {
        const e = await send(pool)
        expect(e).toMatchObject({ _tag: "Failed" })
        expect(e._tag === "Failed" && e.reason).toMatch(/CERT|SELF_SIGNED/)
      } finally {
        pool.close()
        await new Promise((r) => server.close(r))
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
  })
})
