/**
 * The request limits docs/api.md "Request limits" states (Node's defaults,
 * before any route): the request line and headers share 16 KiB, past which
 * Node answers 431 and closes; a URL counts toward the same bound.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as net from "node:net"
import { configOf, startEdge } from "./edge-harness.js"

/** One raw request; the status line of the answer. */
const statusOf = (url: string, request: string) =>
  Effect.promise(
    () =>
      new Promise<string>((resolve, reject) => {
        const { hostname, port } = new URL(url)
        const socket = net.connect(Number(port), hostname, () => socket.end(request))
        let answer = ""
        socket.on("data", (c: Buffer) => (answer += c.toString("latin1")))
        socket.on("close", () => resolve(answer.split("\r\n")[0]!))
        socket.on("error", reject)
      })
  )

describe("request limits", () => {
  it.live("a request over Node's 16 KiB of headers answers 431", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const edge = yield* startEdge(configOf({}))
        const get = (target: string, headers = "") => `GET ${target} HTTP/1.1\r\nHost: x\r\n${headers}Connection: close\r\n\r\n`
        expect(yield* statusOf(edge.url, get("/healthz", `X-Pad: ${"a".repeat(15_000)}\r\n`))).toBe("HTTP/1.1 200 OK")
        expect(yield* statusOf(edge.url, get("/healthz", `X-Pad: ${"a".repeat(17 * 1024)}\r\n`))).toBe("HTTP/1.1 431 Request Header Fields Too Large")
        expect(yield* statusOf(edge.url, get(`/healthz?${"q".repeat(17 * 1024)}`))).toBe("HTTP/1.1 431 Request Header Fields Too Large")
        expect(yield* statusOf(edge.url, "NOT HTTP\r\n\r\n")).toBe("HTTP/1.1 400 Bad Request")
      })
    )
  )
})
