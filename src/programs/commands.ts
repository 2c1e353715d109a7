/**
 * The `ankusa` commands' flags, arguments and descriptions. Each handler loads its
 * program (serve.ts, store.ts) only when it runs, so `--help`, `--version` and a refused
 * flag answer without loading the store, the HTTP stack or the configuration schema.
 */
import { Cause, Console, Effect, Option } from "effect"
import { Argument, Command, Flag, GlobalFlag } from "effect/cli"
import { fromLogLevel } from "../observability/logger.js"

const serveProgram = () => import("./serve.js")
const storeProgram = () => import("./store.js")

/** The most specific message an error carries (a ServeError's is in its cause). */
const describe = (e: unknown): string => {
  const own = typeof e === "object" && e !== null && "message" in e ? String(e.message) : ""
  if (own !== "") return own
  const cause = typeof e === "object" && e !== null && "cause" in e ? e.cause : undefined
  return cause instanceof Error ? cause.message : String(cause ?? e)
}

// main.ts runs with error reporting off: a failed boot says why here, on stderr.
const reportBootFailure = <A, E extends { readonly _tag: string }, R>(program: Effect.Effect<A, E, R>) =>
  Effect.tapCause(program, (cause) =>
    Cause.hasInterruptsOnly(cause)
      ? Effect.void
      : Effect.sync(() => {
          const message = Option.match(Cause.findErrorOption(cause), {
            onNone: () => Cause.pretty(cause),
            onSome: (e) => (e._tag === "ConfigError" ? describe(e) : `ankusa serve: ${e._tag}: ${describe(e)}`)
          })
          process.stderr.write(`${message}\n`)
        })
  )

export const serveCommand = Command.make(
  "serve",
  {
    config: Flag.String("config").pipe(
      Flag.withMetavar("file"),
      Flag.withDescription("Configuration file (YAML or JSON); default: ANKUSA_CONFIG, else the built-in default"),
      Flag.optional
    ),
    dataDir: Flag.String("data-dir").pipe(
      Flag.withMetavar("dir"),
      Flag.withDescription("Data directory (the store is <data-dir>/store); overrides dataDir and ANKUSA_DATA_DIR"),
      Flag.optional
    ),
    // Digits only, so that `--port abc` names the flag and says what it takes; the range is http.port's.
    port: Flag.String("port").pipe(
      Flag.filterMap((s) => (/^\d+$/.test(s) ? Option.some(Number(s)) : Option.none()), () => "an integer (0 picks a free port)"),
      Flag.withMetavar("integer"),
      Flag.withDescription("HTTP port (0: a free one, logged at start); overrides http.port and ANKUSA_HTTP_PORT"),
      Flag.optional
    )
  },
  (a) =>
    Effect.gen(function* () {
      // The built-in --log-level overrides log.level and ANKUSA_LOG_LEVEL (the serve logger filters by it).
      const logLevel = yield* GlobalFlag.LogLevel
      const { run } = yield* Effect.promise(serveProgram)
      return yield* run({
        config: Option.getOrUndefined(a.config),
        dataDir: Option.getOrUndefined(a.dataDir),
        port: Option.getOrUndefined(a.port),
        logLevel: Option.getOrUndefined(Option.map(logLevel, fromLogLevel))
      })
    }).pipe(reportBootFailure)
).pipe(Command.withDescription("Run the gateway: HTTP ingest and admin, dispatch to sinks, metrics"))

const configFile = Flag.String("config").pipe(
  Flag.withMetavar("file"),
  Flag.withDescription("Configuration file (YAML or JSON); default: ANKUSA_CONFIG or the built-in default"),
  Flag.optional
)
const dataDir = Flag.String("data-dir").pipe(
  Flag.withMetavar("dir"),
  Flag.withDescription("Data directory (the store is <data-dir>/store); default: the configuration's dataDir"),
  Flag.optional
)

/** Print the error's message on stderr and fail with it: the CLI exits 1. */
const reported = <A, E extends { readonly message: string }, R>(e: Effect.Effect<A, E, R>) =>
  Effect.tapError(e, (err) => Console.error(`error: ${err.message}`))

const withStore = <A, E extends { readonly message: string }, R>(
  f: (program: Awaited<ReturnType<typeof storeProgram>>) => Effect.Effect<A, E, R>
) => reported(Effect.flatMap(Effect.promise(storeProgram), f))

const migrateCommand = Command.make(
  "migrate",
  {
    dryRun: Flag.Boolean("dry-run").pipe(
      Flag.withDescription("List the pending migrations and change nothing"),
      Flag.withDefault(false)
    ),
    config: configFile,
    dataDir
  },
  (a) =>
    withStore((s) =>
      Effect.flatMap(s.resolve(a.config, a.dataDir), (c) => s.migrate(c.dir, { dryRun: a.dryRun, maxTenants: c.maxTenants }))
    )
).pipe(Command.withDescription("Run the pending store format migrations (boot runs them too)"))

const fixtureCommand = Command.make(
  "fixture",
  {
    path: Argument.String("PATH").pipe(Argument.withDescription("Archive to write (.tar.zst)")),
    // A refused value names the flag and the choices.
    format: Flag.ChoiceWithValue("format", [["2", 2], ["3", 3]] as const).pipe(
      Flag.withDefault(3 as const),
      Flag.withDescription("Store format of the fixture: 2 or 3 (default 3)")
    )
  },
  (a) => withStore((s) => s.fixture(a.path, a.format))
).pipe(Command.withDescription("Write the standard fixture store as a .tar.zst archive"))

const checkCommand = Command.make("check", { config: configFile, dataDir }, (a) =>
  withStore((s) => Effect.flatMap(s.resolve(a.config, a.dataDir), (c) => (c.postgres === undefined ? s.check(c.dir) : s.checkPostgres(c.postgres.url, c.postgres.schema))))
).pipe(Command.withDescription("Check every counter against a fold of the families, and the layout's invariants"))

const liftEraseCommand = Command.make(
  "lift-erase",
  { tenant: Argument.String("TENANT").pipe(Argument.withDescription("The erased tenant id")), config: configFile, dataDir },
  (a) => withStore((s) => Effect.flatMap(s.resolve(a.config, a.dataDir), (c) => s.liftErase(c.dir, a.tenant)))
).pipe(Command.withDescription("Lift the refusal of an erased tenant id on a stopped node (it then gets a new ordinal)"))

export const storeCommand = Command.make("store").pipe(
  Command.withDescription("Operate on the node's store"),
  Command.withSubcommands([migrateCommand, fixtureCommand, checkCommand, liftEraseCommand])
)
