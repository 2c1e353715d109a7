/**
 * Reading a request body as bytes under a size limit. A declared
 * Content-Length past the limit is refused before reading; a body that grows
 * past it is refused at that byte and the rest is drained unread, so the
 * client still reads its 413 on a connection that stays usable.
 */
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import type { IncomingMessage } from "node:http"
import { BadRequest, TooLarge } from "./errors.js"

/**
 * The body of `msg`, passed to `done` exactly once (the bytes, or the refusal).
 * Returns a function that detaches the listeners (an abandoned read). `onChunk`,
 * when given, is told each chunk's size as it arrives (admission, body-pace.ts).
 */
export const readIncoming = (
  msg: IncomingMessage,
  limit: number,
  done: (body: Uint8Array | TooLarge | BadRequest) => void,
  onChunk?: (bytes: number) => void
): (() => void) => {
  const declared = msg.headers["content-length"]
  if (declared !== undefined && /^\d+$/.test(declared) && Number(declared) > limit) {
    msg.resume()
    done(new TooLarge({ limit }))
    return () => {}
  }
  const chunks: Array<Buffer> = []
  let size = 0
  let settled = false
  const cleanup = () => {
    msg.off("data", onData)
    msg.off("end", onEnd)
    msg.off("error", onError)
  }
  const settle = (r: Uint8Array | TooLarge | BadRequest) => {
    if (settled) return
    settled = true
    cleanup()
    done(r)
  }
  function onData(chunk: Buffer) {
    size += chunk.length
    onChunk?.(chunk.length)
    if (size > limit) {
      chunks.length = 0
      settle(new TooLarge({ limit }))
      // Flowing with no data listener: the rest is read and discarded.
      msg.resume()
    } else chunks.push(chunk)
  }
  function onEnd() {
    settle(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
  }
  function onError(e: Error) {
    settle(new BadRequest({ code: "bad_body", message: `reading the body failed: ${e.message}` }))
  }
  msg.on("data", onData)
  msg.on("end", onEnd)
  msg.on("error", onError)
  return cleanup
}

/** `readIncoming` for a handler on the platform router. */
export const readBody = (limit: number): Effect.Effect<Uint8Array, TooLarge | BadRequest, HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    Effect.callback<Uint8Array, TooLarge | BadRequest>((resume) => {
      // The server is node:http's (server.ts), so the request is an HTTP/1 IncomingMessage.
      const msg = NodeHttpServerRequest.toIncomingMessage(request) as IncomingMessage
      const cleanup = readIncoming(msg, limit, (r) =>
        resume(r instanceof Uint8Array ? Effect.succeed(r) : Effect.fail(r))
      )
      return Effect.sync(cleanup)
    })
  )

/** The body parsed as JSON, under `limit` (413 past it); not JSON: 400 `bad_body` with `notJson` as the message. */
export const readJson = (limit: number, notJson: string): Effect.Effect<unknown, TooLarge | BadRequest, HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(readBody(limit), (bytes) => {
    try {
      return Effect.succeed(JSON.parse(Buffer.from(bytes).toString("utf8")) as unknown)
    } catch {
      return Effect.fail(new BadRequest({ code: "bad_body", message: notJson }))
    }
  })
