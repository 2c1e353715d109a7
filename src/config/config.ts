/**
 * Loading the configuration: `Config.schema` of the Schema in
 * src/domain/config.ts (every key, default and range), read from the
 * ConfigProviders of src/config/providers.ts (flags over `ANKUSA_*`
 * variables over the YAML or JSON file). A bad value is refused at start with
 * a message naming the key and its source (`config error at sinks[0].url
 * (file ankusa.yaml): ...`). docs/configuration.md lists every key and variable.
 */
import { Config, ConfigProvider, Context, Data, Effect, Layer, Result } from "effect"
import { readFile as readText } from "node:fs/promises"
import { extname } from "node:path"
import YAML from "yaml"
import * as Cfg from "../domain/config.js"
import { formatProblem, problems } from "./issues.js"
import { ENV_CONFIG, type Flags, Provenance, stack } from "./providers.js"

export class ConfigError extends Data.TaggedError("ConfigError")<{ readonly message: string }> {}

/** The effective configuration of this process. */
export class Configuration extends Context.Service<Configuration, Cfg.Config>()("ankusa/Configuration") {}

/** The whole configuration, read from the current (or a given) `ConfigProvider`. */
export const config: Config.Config<Cfg.Config> = Config.schema(Cfg.Config)

export interface LoadOptions extends Flags {
  /** `--config`; falls back to `ANKUSA_CONFIG`; none means the embedded default. */
  readonly file?: string | undefined
  readonly env?: Readonly<Record<string, string | undefined>>
}

type Json = Record<string, unknown>
const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** How long reading the file may take: a file on a mount that never answers is refused, not waited on. */
export const CONFIG_READ_TIMEOUT_MS = 2_000

const readFile = (file: string): Effect.Effect<Json, ConfigError> =>
  Effect.tryPromise({
    try: async () => {
      const text = await readText(file, "utf8")
      // YAML is a superset of JSON, but a .json file gets JSON's stricter errors.
      return extname(file).toLowerCase() === ".json" ? JSON.parse(text) : YAML.parse(text)
    },
    catch: (e) => new ConfigError({ message: `config error in ${file}: ${e instanceof Error ? e.message : String(e)}` })
  }).pipe(
    Effect.timeoutOrElse({
      duration: CONFIG_READ_TIMEOUT_MS,
      orElse: () => Effect.fail(new ConfigError({ message: `config error in ${file}: not read within ${CONFIG_READ_TIMEOUT_MS} ms` }))
    }),
    Effect.flatMap((doc) =>
      doc === null || doc === undefined
        ? Effect.succeed({})
        : isObject(doc)
          ? Effect.succeed(doc)
          : Effect.fail(new ConfigError({ message: `config error in ${file}: expected a mapping of keys at the top level` }))
    )
  )

/**
 * `Config.schema` reads only the keys the Schema names, and a provider answers
 * a `null` as a key left out, so the file's own shape is checked first: every
 * unknown key and every empty (`null`) value, refused as in a JSON decode.
 */
const checkFile = (doc: Json, label: string | undefined): Effect.Effect<void, ConfigError> => {
  const decoded = Cfg.decode(doc)
  if (Result.isSuccess(decoded)) return Effect.void
  const refused = problems(decoded.failure.issue).filter((p) => p.unexpected || (p.input !== undefined && p.input.value === null))
  return refused.length === 0
    ? Effect.void
    : Effect.fail(new ConfigError({ message: refused.map((p) => formatProblem(p, label, undefined)).join("\n") }))
}

/**
 * The configuration `provider` answers, or a `ConfigError` naming the bad key
 * and, from `provenance`, where its value came from (`fallback` for a key no
 * source gave, which took its default).
 */
export const read = (
  provider: ConfigProvider.ConfigProvider,
  provenance: Provenance = new Provenance(),
  fallback?: string
): Effect.Effect<Cfg.Config, ConfigError> =>
  config.parse(provider).pipe(
    Effect.mapError((e) => {
      if (e.cause._tag === "SourceError") return new ConfigError({ message: `config error: ${e.cause.message}` })
      const lines = problems(e.cause.issue).map((p) =>
        formatProblem(p, provenance.sourceOf(p.path) ?? fallback, provenance.at(p.path)?.value)
      )
      return new ConfigError({ message: lines.join("\n") })
    })
  )

/** The effective configuration, or a `ConfigError` whose message names the bad key and its source. */
export const load = (options: LoadOptions = {}): Effect.Effect<Cfg.Config, ConfigError> =>
  Effect.gen(function* () {
    const env = options.env ?? process.env
    const file = options.file ?? env[ENV_CONFIG]
    const given = file !== undefined && file !== ""
    const doc = given ? yield* readFile(file) : {}
    const label = given ? `file ${file}` : undefined
    yield* checkFile(doc, label)
    const provenance = new Provenance()
    const provider = stack(provenance, { doc, fileLabel: label ?? "default", env, flags: options })
    return yield* read(provider, provenance, label)
  })

/**
 * Every issue of the file's own document, decoded with all errors (the providers' read stops at
 * the first): what a refused reload reports beside the load's own message. Empty without a file.
 */
export const fileIssues = (options: LoadOptions = {}): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function* () {
    const file = options.file ?? (options.env ?? process.env)[ENV_CONFIG]
    if (file === undefined || file === "") return []
    const doc = yield* readFile(file)
    const decoded = Cfg.decode(doc)
    if (Result.isSuccess(decoded)) return []
    return problems(decoded.failure.issue).map((p) => formatProblem(p, `file ${file}`, undefined))
  }).pipe(Effect.catch((e: ConfigError) => Effect.succeed([e.message])))

export const layer = (options: LoadOptions = {}): Layer.Layer<Configuration, ConfigError> =>
  Layer.effect(Configuration, load(options))

/** A given configuration (tests). */
export const layerValue = (config: Cfg.Config): Layer.Layer<Configuration> => Layer.succeed(Configuration, config)
