/**
 * Reading an ingest body as bytes under a size limit. A declared
 * Content-Length past the limit is refused before reading; a body that grows
 * past it is refused at that byte and the rest is drained unread, so the
 * client still reads its 413 on a connection that stays usable.
 */
import { HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect } from "effect"
import { BadRequest, TooLarge } from "./errors.js"

export const readBody = (limit: number): Effect.Effect<Uint8Array, TooLarge | BadRequest, HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const declared = request.headers["content-length"]
    if (declared !== undefined && /^\d+$/.test(declared) && Number(declared) > limit) return Effect.fail(new TooLarge({ limit }))
    const msg = NodeHttpServerRequest.toIncomingMessage(request)
    return Effect.async<Uint8Array, TooLarge | BadRequest>((resume) => {
      const chunks: Array<Buffer> = []
      let size = 0
      let settled = false
      const cleanup = () => {
        msg.off("data", onData)
        msg.off("end", onEnd)
        msg.off("error", onError)
      }
      const settle = (e: Effect.Effect<Uint8Array, TooLarge | BadRequest>) => {
        if (settled) return
        settled = true
        cleanup()
        resume(e)
      }
      function onData(chunk: Buffer) {
        size += chunk.length
        if (size > limit) {
          chunks.length = 0
          settle(Effect.fail(new TooLarge({ limit })))
          // Flowing with no data listener: the rest is read and discarded.
          msg.resume()
        } else chunks.push(chunk)
      }
      function onEnd() {
        settle(Effect.succeed(Buffer.concat(chunks, size)))
      }
      function onError(e: Error) {
        settle(Effect.fail(new BadRequest({ code: "bad_body", message: `reading the body failed: ${e.message}` })))
      }
      msg.on("data", onData)
      msg.on("end", onEnd)
      msg.on("error", onError)
      return Effect.sync(cleanup)
    })
  })
