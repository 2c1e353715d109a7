/**
 * Loading the configuration: the embedded default, overlaid by a YAML or JSON
 * file, then by `ANKUSA_*` environment variables, then by CLI flags, and
 * validated once with the Schema of `src/domain/config.ts`. A bad value is
 * refused at start with a message naming the key (`config error at
 * sinks[0].url: ...`). docs/configuration.md lists every key and variable.
 */
import { Context, Data, Effect, Either, Layer, ParseResult } from "effect"
import { readFileSync } from "node:fs"
import { extname } from "node:path"
import YAML from "yaml"
import * as Cfg from "../domain/config.js"

export class ConfigError extends Data.TaggedError("ConfigError")<{ readonly message: string }> {}

/** The effective configuration of this process. */
export class Configuration extends Context.Tag("ankusa/Configuration")<Configuration, Cfg.Config>() {}

type Kind = "string" | "number" | "boolean"

/** Environment overrides: variable → key path. */
export const ENV: ReadonlyArray<{ readonly name: string; readonly path: ReadonlyArray<string>; readonly kind: Kind }> = [
  { name: "ANKUSA_HTTP_HOST", path: ["http", "host"], kind: "string" },
  { name: "ANKUSA_HTTP_PORT", path: ["http", "port"], kind: "number" },
  { name: "ANKUSA_DATA_DIR", path: ["dataDir"], kind: "string" },
  { name: "ANKUSA_LOG_LEVEL", path: ["log", "level"], kind: "string" },
  { name: "ANKUSA_INGEST_MAX_BODY_BYTES", path: ["ingest", "maxBodyBytes"], kind: "number" },
  { name: "ANKUSA_DEDUPE_WINDOW_MS", path: ["dedupe", "windowMs"], kind: "number" },
  { name: "ANKUSA_TENANTS_MAX", path: ["tenants", "max"], kind: "number" },
  { name: "ANKUSA_GAUGES_INTERVAL_MS", path: ["gauges", "intervalMs"], kind: "number" },
  { name: "ANKUSA_ARCHIVE_ENABLED", path: ["archive", "enabled"], kind: "boolean" },
  { name: "ANKUSA_SHUTDOWN_GRACE_MS", path: ["pipeline", "graceMs"], kind: "number" }
]

/** A global admin token from the environment (named "env"), added to the file's tokens. */
export const ENV_ADMIN_TOKEN = "ANKUSA_ADMIN_TOKEN"
/** The config file path when `--config` is not given. */
export const ENV_CONFIG = "ANKUSA_CONFIG"

export interface LoadOptions {
  /** `--config`; falls back to `ANKUSA_CONFIG`; none means the embedded default. */
  readonly file?: string | undefined
  readonly env?: Readonly<Record<string, string | undefined>>
  /** CLI flags, applied last. */
  readonly dataDir?: string | undefined
  readonly port?: number | undefined
}

// Environment strings are converted only when they look right; anything else is
// handed to the Schema as is, so the error names the key and the variable.
const fromEnv = (raw: string, kind: Kind): unknown => {
  const v = raw.trim()
  if (kind === "number") return /^-?\d+(\.\d+)?$/.test(v) ? Number(v) : raw
  if (kind === "boolean") return v === "true" || v === "1" ? true : v === "false" || v === "0" ? false : raw
  return raw
}

type Json = Record<string, unknown>
const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

const setPath = (obj: Json, path: ReadonlyArray<string>, value: unknown): Json => {
  const [head, ...rest] = path
  if (head === undefined) return obj
  if (rest.length === 0) return { ...obj, [head]: value }
  const child = obj[head]
  return { ...obj, [head]: setPath(isObject(child) ? child : {}, rest, value) }
}

export const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path
    .map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`))
    .join("")

const readFile = (file: string): Effect.Effect<unknown, ConfigError> =>
  Effect.try({
    try: () => {
      const text = readFileSync(file, "utf8")
      // YAML is a superset of JSON, but a .json file gets JSON's stricter errors.
      return extname(file).toLowerCase() === ".json" ? JSON.parse(text) : YAML.parse(text)
    },
    catch: (e) => new ConfigError({ message: `config error in ${file}: ${e instanceof Error ? e.message : String(e)}` })
  }).pipe(
    Effect.flatMap((doc) =>
      doc === null || doc === undefined
        ? Effect.succeed({})
        : isObject(doc)
          ? Effect.succeed(doc)
          : Effect.fail(new ConfigError({ message: `config error in ${file}: expected a mapping of keys at the top level` }))
    )
  )

/** Formats a decode failure: one line per issue, the key first, the variable that set it if any. */
const formatIssues = (error: ParseResult.ParseError, origin: ReadonlyMap<string, string>, file: string | undefined): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  // `optionalWith` unions with undefined; its "Expected undefined" twin of a real issue is noise.
  const real = issues.filter(
    (i) =>
      !(
        i.message.startsWith("Expected undefined") &&
        issues.some((o) => o !== i && o.path.length >= i.path.length && i.path.every((p, k) => o.path[k] === p) && !o.message.startsWith("Expected undefined"))
      )
  )
  const where = file === undefined ? "" : ` (file ${file})`
  return real
    .map((i) => {
      const key = formatPath(i.path)
      const from = origin.get(key)
      return `config error at ${key === "" ? "(top level)" : key}${from === undefined ? where : ` (from ${from})`}: ${i.message}`
    })
    .join("\n")
}

/** The effective configuration, or a `ConfigError` whose message names every bad key. */
export const load = (options: LoadOptions = {}): Effect.Effect<Cfg.Config, ConfigError> =>
  Effect.gen(function* () {
    const env = options.env ?? process.env
    const file = options.file ?? env[ENV_CONFIG]
    let doc: Json = file === undefined || file === "" ? {} : ((yield* readFile(file)) as Json)
    const origin = new Map<string, string>()
    for (const v of ENV) {
      const raw = env[v.name]
      if (raw === undefined || raw === "") continue
      doc = setPath(doc, v.path, fromEnv(raw, v.kind))
      origin.set(formatPath(v.path), v.name)
    }
    const envToken = env[ENV_ADMIN_TOKEN]
    if (envToken !== undefined && envToken !== "") {
      const tokens = Array.isArray(doc["adminTokens"]) ? (doc["adminTokens"] as Array<unknown>) : []
      doc = { ...doc, adminTokens: [...tokens, { name: "env", token: envToken, tenants: "*" }] }
      origin.set(`adminTokens[${tokens.length}].token`, ENV_ADMIN_TOKEN)
    }
    if (options.dataDir !== undefined) {
      doc = setPath(doc, ["dataDir"], options.dataDir)
      origin.set("dataDir", "--data-dir")
    }
    if (options.port !== undefined) {
      doc = setPath(doc, ["http", "port"], options.port)
      origin.set("http.port", "--port")
    }
    const decoded = Cfg.decode(doc)
    if (Either.isLeft(decoded)) {
      return yield* Effect.fail(new ConfigError({ message: formatIssues(decoded.left, origin, file) }))
    }
    return decoded.right
  })

export const layer = (options: LoadOptions = {}): Layer.Layer<Configuration, ConfigError> =>
  Layer.effect(Configuration, load(options))

/** A given configuration (tests). */
export const layerValue = (config: Cfg.Config): Layer.Layer<Configuration> => Layer.succeed(Configuration, config)
