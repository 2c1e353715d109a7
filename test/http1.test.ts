/**
 * The sinks' HTTP/1.1 client (src/delivery/http1.ts) against real servers on
 * 127.0.0.1: raw TCP servers that answer with exactly the bytes a case needs
 * (split into one-byte writes where the framing must survive any split), a
 * node:http server for keep-alive, and a TLS server with a certificate made
 * for the test.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
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

/** Waits until `ok` holds, polling every 10 ms (a test's own timeout bounds it). */
const until = async (ok: () => boolean) => {
  while (!ok()) await new Promise((r) => setTimeout(r, 10))
}

/** The bodies' ends a pool reports (`Origin.bodyEnd`), awaited in order. */
const bodyEnds = () => {
  const seen: Array<Http1.BodyEnd> = []
  const waiters: Array<(e: Http1.BodyEnd) => void> = []
  return {
    push: (e: Http1.BodyEnd) => {
      const w = waiters.shift()
      if (w !== undefined) w(e)
      else seen.push(e)
    },
    next: () => new Promise<Http1.BodyEnd>((resolve) => {
      const e = seen.shift()
      if (e !== undefined) resolve(e)
      else waiters.push(resolve)
    })
  }
}

const CHUNKED = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nretry-after: 7\r\n\r\n5;ext=1\r\nhello\r\n0\r\nx-trailer: t\r\n\r\n"

describe("sink HTTP/1.1 client", () => {
  it("a chunked answer split into one-byte reads is read to its end, and its connection reused", async () => {
    const ends = bodyEnds()
    await withRaw(() => CHUNKED, true, async (server, pool) => {
      for (let i = 0; i < 3; i++) {
        // A 2xx is told at its head; the next call waits for the body's end to find the connection idle.
        expect(await send(pool)).toEqual({ _tag: "Answer", status: 200, retryAfter: "7" })
        expect(await ends.next()).toBe("end")
      }
      expect(server.connections()).toBe(1)
    }, { bodyEnd: ends.push })
  })

  it("a content-length answer split into one-byte reads is read to its end, and its connection reused", async () => {
    await withRaw(() => "HTTP/1.1 503 Busy\r\nContent-Length: 11\r\nRetry-After: 120\r\n\r\nhello world", true, async (server, pool) => {
      for (let i = 0; i < 3; i++) expect(await send(pool)).toEqual({ _tag: "Answer", status: 503, retryAfter: "120", body: "hello world" })
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

  it("a malformed head fails as a transport error; a body malformed or cut short after its head still has the head's status", async () => {
    for (const bad of ["HTTP/2 200\r\n\r\n", "HTTP/1.1 200 OK\r\ncontent-length: 1x\r\n\r\n", "HTTP/1.1 099 Low\r\ncontent-length: 0\r\n\r\n", "HTTP/1.1 200 OK\r\nx-a : 1\r\n\r\n"]) {
      await withRaw(() => bad, false, async (_, pool) => {
        expect((await send(pool))._tag, bad).toBe("Failed")
      })
    }
    const ends = bodyEnds()
    await withRaw(() => "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", false, async (_, pool) => {
      expect(await send(pool)).toMatchObject({ _tag: "Answer", status: 200 })
      expect(await ends.next()).toBe("failed")
      await until(() => pool.open() === 0)
    }, { bodyEnd: ends.push })
    // The head says 100 bytes; the server closes after 5.
    const server = await new Promise<net.Server>((resolve) => {
      const s = net.createServer((socket) => socket.once("data", () => socket.end("HTTP/1.1 500 Oops\r\ncontent-length: 100\r\n\r\nshort")))
      s.listen(0, "127.0.0.1", () => resolve(s))
    })
    const pool = Http1.pool(origin((server.address() as net.AddressInfo).port, { bodyEnd: ends.push }))
    try {
      expect(await send(pool)).toEqual({ _tag: "Answer", status: 500, retryAfter: undefined, body: "short" })
      expect(await ends.next()).toBe("failed")
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

  describe("RFC 9112 framing and reuse", () => {
    it("a 2xx with an endless body is delivered and its connection closed", async () => {
      // Two endless bodies: one trickled (a byte every 100 ms: the time bound closes it), one
      // flooded (64 KiB writes: the byte bound closes it).
      for (const mode of ["trickle", "flood"] as const) {
        let serverClosed = 0
        const server = net.createServer((socket) => {
          socket.on("error", () => {})
          socket.on("close", () => serverClosed++)
          socket.once("data", () => {
            socket.write("HTTP/1.1 200 OK\r\ncontent-length: 10000000000\r\n\r\n")
            const more = () => {
              if (socket.destroyed) return
              if (mode === "trickle") {
                socket.write("x")
                setTimeout(more, 100)
              } else socket.write(Buffer.alloc(64 * 1024, 120), () => setImmediate(more))
            }
            more()
          })
        })
        await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
        const ends = bodyEnds()
        const pool = Http1.pool(origin((server.address() as net.AddressInfo).port, { bodyEnd: ends.push }))
        try {
          const t0 = performance.now()
          expect(await send(pool)).toEqual({ _tag: "Answer", status: 200, retryAfter: undefined })
          // Told at its head: before the drain's bound closed the connection.
          expect(serverClosed, mode).toBe(0)
          expect(await ends.next()).toBe("bound")
          const drained = performance.now() - t0
          if (mode === "trickle") expect(drained).toBeGreaterThanOrEqual(Http1.MAX_DRAIN_MS - 1)
          await until(() => serverClosed === 1 && pool.open() === 0)
          // Not reused: the next call opens a new connection (and is told at its head as well).
          expect(await send(pool)).toMatchObject({ _tag: "Answer", status: 200 })
        } finally {
          pool.close()
          await new Promise((r) => server.close(r))
        }
      }
    })

    it("content-length with transfer-encoding is refused and the connection closed", async () => {
      for (const framing of ["content-length: 5\r\ntransfer-encoding: chunked", "Transfer-Encoding: chunked\r\nContent-Length: 5"]) {
        let closedByClient = 0
        await withRaw(() => `HTTP/1.1 200 OK\r\n${framing}\r\n\r\n5\r\nhello\r\n0\r\n\r\n`, false, async (server, pool) => {
          expect(await send(pool)).toEqual({ _tag: "Failed", reason: "content-length with transfer-encoding" })
          await until(() => pool.open() === 0)
          closedByClient++
          expect((await send(pool))._tag).toBe("Failed")
          expect(server.connections()).toBe(2)
        })
        expect(closedByClient).toBe(1)
      }
    })

    it("a transfer-encoding not ending in chunked reads to the close", async () => {
      // Bytes that would end a chunked body at once, sent as a body framed by the close: a 500
      // keeps them (its excerpt), so what was read is what was sent, up to the close.
      const body = "0\r\n\r\nthe rest, to the close"
      for (const framing of ["transfer-encoding: gzip", "transfer-encoding: chunked\r\ntransfer-encoding: gzip", "transfer-encoding: chunked, gzip"]) {
        const server = await new Promise<net.Server>((resolve) => {
          const s = net.createServer((socket) => {
            socket.on("error", () => {})
            socket.once("data", () => {
              socket.write(`HTTP/1.1 500 Oops\r\n${framing}\r\n\r\n0\r\n\r\n`)
              setTimeout(() => socket.end("the rest, to the close"), 50)
            })
          })
          s.listen(0, "127.0.0.1", () => resolve(s))
        })
        const ends = bodyEnds()
        const pool = Http1.pool(origin((server.address() as net.AddressInfo).port, { bodyEnd: ends.push }))
        try {
          expect(await send(pool), framing).toEqual({ _tag: "Answer", status: 500, retryAfter: undefined, body })
          expect(await ends.next()).toBe("end")
        } finally {
          pool.close()
          await new Promise((r) => server.close(r))
        }
      }
    })

    it("an obs-fold header is joined, not refused", async () => {
      const answer = "HTTP/1.1 503 Busy\r\nx-note: one\r\n\ttwo\r\nRetry-After:\r\n 120\r\nContent-Length:\r\n  2\r\n\r\nok"
      await withRaw(() => answer, true, async (server, pool) => {
        for (let i = 0; i < 2; i++) expect(await send(pool)).toEqual({ _tag: "Answer", status: 503, retryAfter: "120", body: "ok" })
        // The folded content-length framed the body: the connection stayed in step and was reused.
        expect(server.connections()).toBe(1)
      })
    })

    it("an answer before the request is fully written is not reused", async () => {
      // The server answers as soon as it has the request's head and reads no more: a body far
      // past what the sockets buffer is still being written when the answer ends.
      const sockets: Array<net.Socket> = []
      const server = net.createServer((socket) => {
        sockets.push(socket)
        socket.on("error", () => {})
        let head = ""
        const onData = (chunk: Buffer) => {
          head += chunk.toString("latin1")
          if (!head.includes("\r\n\r\n")) return
          socket.off("data", onData)
          socket.pause()
          socket.write("HTTP/1.1 413 Too Large\r\ncontent-length: 0\r\n\r\n")
        }
        socket.on("data", onData)
      })
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
      const pool = Http1.pool(origin((server.address() as net.AddressInfo).port))
      const big = Buffer.alloc(64 * 1024 * 1024, 97)
      const head = `POST /sink HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: ${big.length}\r\n\r\n`
      try {
        expect(await send(pool, head, big)).toEqual({ _tag: "Answer", status: 413, retryAfter: undefined })
        // Framed, read to its end, no `close` said: destroyed all the same.
        await until(() => pool.open() === 0)
        expect(await send(pool)).toMatchObject({ _tag: "Answer", status: 413 })
        expect(sockets).toHaveLength(2)
      } finally {
        pool.close()
        for (const s of sockets) s.destroy()
        await new Promise((r) => server.close(r))
      }
    })

    it("a stale idle connection is retried once on a new one without using an attempt", async () => {
      // Each connection answers its first request; a kept-alive connection's next request finds
      // it gone (the sink dropped it while idle, as seen by the client: closed with no answer).
      // `killAll` drops every request past a connection's first, new connections' too.
      let killAll = false
      let requests = 0
      let connections = 0
      const server = net.createServer((socket) => {
        connections++
        let served = 0
        socket.on("error", () => {})
        socket.on("data", () => {
          requests++
          if (served++ === 0 && !(killAll && connections > 1)) socket.write("HTTP/1.1 204 No Content\r\n\r\n")
          else socket.destroy()
        })
      })
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
      const pool = Http1.pool(origin((server.address() as net.AddressInfo).port, { maxSockets: 1 }))
      try {
        const calls: Array<Http1.Exchange> = []
        const one = () => new Promise<Http1.Exchange>((resolve) => pool.send(HEAD, BODY, (e) => {
          calls.push(e)
          resolve(e)
        }))
        expect(await one()).toMatchObject({ _tag: "Answer", status: 204 })
        // The idle connection fails before any answer byte: re-sent on a new one, one answer.
        expect(await one()).toMatchObject({ _tag: "Answer", status: 204 })
        expect(connections).toBe(2)
        expect(requests).toBe(3)
        expect(calls).toHaveLength(2)
        // Once only: when the new connection fails as well, the call fails.
        killAll = true
        expect(await one()).toMatchObject({ _tag: "Failed" })
        expect(connections).toBe(3)
        expect(requests).toBe(5)
        // A new connection that fails is not re-sent.
        expect(await one()).toMatchObject({ _tag: "Failed" })
        expect(connections).toBe(4)
        expect(requests).toBe(6)
        expect(calls).toHaveLength(4)
      } finally {
        pool.close()
        await new Promise((r) => server.close(r))
      }
    })
  })

  describe("TLS", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-tls-"))
    const file = (name: string) => path.join(dir, name)
    const openssl = (...args: Array<string>) => {
      const r = spawnSync("openssl", args, { encoding: "utf8" })
      if (r.status !== 0) throw new Error(`openssl ${args[0]}: ${r.stderr}`)
    }
    // A self-signed certificate, and a CA with two certificates it signed: one for 127.0.0.1,
    // one for another host name only.
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", file("self.key"), "-out", file("self.pem"), "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", file("ca.key"), "-out", file("ca.pem"), "-days", "1", "-subj", "/CN=ankusa test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    for (const [name, san] of [["ip", "IP:127.0.0.1"], ["other", "DNS:other.example"]]) {
      openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", file(`${name}.key`), "-out", file(`${name}.csr`), "-subj", `/CN=${name}`)
      fs.writeFileSync(file(`${name}.ext`), `subjectAltName=${san}\n`)
      openssl("x509", "-req", "-in", file(`${name}.csr`), "-CA", file("ca.pem"), "-CAkey", file("ca.key"), "-CAcreateserial", "-out", file(`${name}.pem`), "-days", "1", "-extfile", file(`${name}.ext`))
    }
    const ca = fs.readFileSync(file("ca.pem"), "latin1")
    afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

    interface Seen {
      readonly reused: boolean
      readonly servername: string | false | null
    }

    /** A TLS server with the named certificate; every answer closes its connection when `close`. */
    const tlsServer = async (name: string, close = false) => {
      const seen: Array<Seen> = []
      const s = tls.createServer({ key: fs.readFileSync(file(`${name}.key`)), cert: fs.readFileSync(file(`${name}.pem`)) }, (socket) => {
        seen.push({ reused: socket.isSessionReused(), servername: socket.servername })
        socket.on("error", () => {})
        socket.on("data", () => socket.write(`HTTP/1.1 204 No Content\r\n${close ? "connection: close\r\n" : ""}\r\n`))
      })
      await new Promise<void>((r) => s.listen(0, "127.0.0.1", r))
      return { server: s, seen, port: (s.address() as net.AddressInfo).port }
    }

    it("an https sink whose certificate nobody trusts fails as a transport error", async () => {
      const { server, port } = await tlsServer("self")
      const pool = Http1.pool(origin(port, { secure: true }))
      try {
        const e = await send(pool)
        expect(e).toMatchObject({ _tag: "Failed" })
        expect(e._tag === "Failed" && e.reason).toMatch(/CERT|SELF_SIGNED/)
      } finally {
        pool.close()
        await new Promise((r) => server.close(r))
      }
    })

    it("a trusted certificate for another host name fails as a transport error", async () => {
      for (const [name, expected] of [["ip", "Answer"], ["other", "Failed"]] as const) {
        const { server, port, seen } = await tlsServer(name)
        const pool = Http1.pool(origin(port, { secure: true, ca }))
        try {
          const e = await send(pool)
          // The CA is trusted (its certificate for 127.0.0.1 passes, and its connection is kept
          // alive); the other's name does not match.
          expect(e._tag, name).toBe(expected)
          if (e._tag === "Failed") expect(e.reason).toBe("ERR_TLS_CERT_ALTNAME_INVALID")
          else {
            expect(await send(pool)).toMatchObject({ _tag: "Answer", status: 204 })
            expect(seen).toHaveLength(1)
          }
        } finally {
          pool.close()
          await new Promise((r) => server.close(r))
        }
      }
    })

    it("tls sessions are resumed on new connections to the same sink", async () => {
      // Every answer closes its connection, so each call opens a new one.
      const { server, seen, port } = await tlsServer("ip", true)
      const pool = Http1.pool(origin(port, { secure: true, ca }))
      const other = Http1.pool(origin(port, { secure: true, ca }))
      try {
        for (let i = 0; i < 3; i++) expect(await send(pool)).toMatchObject({ _tag: "Answer", status: 204 })
        expect(seen.map((s) => s.reused)).toEqual([false, true, true])
        // Another sink's pool (here: to the same server) has sessions of its own.
        expect(await send(other)).toMatchObject({ _tag: "Answer", status: 204 })
        expect(seen[3]!.reused).toBe(false)
        // No SNI for an IP address (RFC 6066 §3).
        expect(seen.every((s) => s.servername === false || s.servername === null)).toBe(true)
      } finally {
        pool.close()
        other.close()
        await new Promise((r) => server.close(r))
      }
    })
  })
})
