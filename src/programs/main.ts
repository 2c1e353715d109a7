/**
 * The `ankusa` command line (effect/cli). The commands are in src/programs/commands.ts,
 * which loads `serve` (serve.ts) and `store` (store.ts) only when one runs. A handler
 * that fails has already said why on stderr; the process exits 1.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Cause, Console, Effect, Exit, Layer, Runtime } from "effect"
import { CliConfig, CliOutput, Command, GlobalFlag } from "effect/cli"
import pkg from "../../package.json" with { type: "json" }
import { serveCommand, storeCommand } from "./commands.js"

// The release is package.json's version (inlined by the build).
export const VERSION: string = pkg.version

export const ankusa = Command.make("ankusa").pipe(
  Command.withDescription("Ankusa, a multi-tenant webhook gateway"),
  Command.withSubcommands([serveCommand, storeCommand])
)

/** The command line on the process's arguments. */
export const cli = Command.run(ankusa, { version: VERSION })

// A refused invocation answers on stderr, one line per problem naming the flag, not with the whole help.
const presenter = CliOutput.layerPresenter({
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Console.error(event.errors.map((e) => `${event.commandPath.join(" ")}: ${e.message}`).join("\n"))
      : CliOutput.defaultPresenter.present(event)
})

// No --wizard: its prompts draw on the terminal even when stdout is not one, and `serve` has three flags.
const builtIns = CliConfig.layer({
  builtIns: [GlobalFlag.Help, GlobalFlag.Version, GlobalFlag.Completions, GlobalFlag.LogLevel]
})

// SIGTERM/SIGINT interrupt the main fiber; a shutdown that drained cleanly exits 0, not 130.
const teardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)

cli.pipe(Effect.provide(Layer.mergeAll(NodeServices.layer, presenter, builtIns)), NodeRuntime.runMain({ disableErrorReporting: true, teardown }))
