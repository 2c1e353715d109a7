/**
 * The `ankusa` command line (@effect/cli). `serve` is added by the gateway
 * work (src/programs/serve.ts); `store` (migrate, fixture, check) is in
 * src/programs/store.ts. A handler that fails has already said why on
 * stderr; the process exits 1.
 */
import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { serveCommand } from "./serve.js"
import { storeCommand } from "./store.js"

export const VERSION = "0.1.0"

export const ankusa = Command.make("ankusa").pipe(
  Command.withDescription("Ankusa, a multi-tenant webhook gateway"),
  Command.withSubcommands([serveCommand, storeCommand])
)

export const cli = Command.run(ankusa, { name: "ankusa", version: VERSION })

cli(process.argv).pipe(Effect.provide(NodeContext.layer), NodeRuntime.runMain({ disableErrorReporting: true }))
