/**
 * Loading the configuration: the embedded default, overlaid by a YAML or JSON
 * file, then by `ANKUSA_*` environment variables, then by CLI flags, and
 * validated once with the Schema of `src/domain/config.ts`. A bad value is
 * refused at start with a message naming the key (`config error at
 * sinks[0].url: ...`). docs/configuration.md lists every key and variable.
 */
import { Context, Data, Effect, Layer, Result, SchemaAST, SchemaIssue } from "effect"
import { readFileSync } from "node:fs"
import { extname } from "node:path"
import YAML from "yaml"
import * as Cfg from "../domain/config.js"

export class ConfigError extends Data.TaggedError("ConfigError")<{ readonly message: string }> {}

/** The effective configuration of this process. */
export class Configuration extends Context.Service<Configuration, Cfg.Config>()("ankusa/Configuration") {}

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
  readonly logLevel?: Cfg.LogLevel | undefined
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

interface Problem {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

// The rejected value, as the decode kept it (`reportInput`); never shown for an unknown key.
const actual = (issue: SchemaIssue.Issue): string =>
  SchemaIssue.hasInput(issue) ? `, actual ${formatValue(issue.input)}` : ""

const formatValue = (u: unknown): string => {
  try {
    return JSON.stringify(u) ?? String(u)
  } catch {
    return String(u)
  }
}

// The members a value may take, without the `undefined` that an optional key adds.
const members = (ast: SchemaAST.AST): ReadonlyArray<SchemaAST.AST> =>
  SchemaAST.isUnion(ast) ? ast.types.flatMap(members) : SchemaAST.isUndefined(ast) ? [] : [ast]

/** What a type expects, without the value (`Expected number`). */
const expected = (ast: SchemaAST.AST): string => SchemaIssue.defaultLeafHook(new SchemaIssue.InvalidType(ast))

/** A value no member of a union took, in one line: `expected one of a, b, c` for words, else `Expected string | object`. */
const unionMessage = (union: SchemaAST.Union): string => {
  const all = members(union)
  if (all.length > 0 && all.every(SchemaAST.isLiteral)) return `expected one of ${all.map((m) => String(m.literal)).join(", ")}`
  return `Expected ${all.map((m) => expected(m).replace(/^Expected /, "")).join(" | ")}`
}

/** The issue tree as one problem per bad key. */
const problems = (issue: SchemaIssue.Issue, path: ReadonlyArray<PropertyKey>): ReadonlyArray<Problem> => {
  switch (issue._tag) {
    case "Pointer":
      return problems(issue.issue, [...path, ...issue.path])
    case "Encoding":
      return problems(issue.issue, path)
    case "Composite":
      return issue.issues.flatMap((i) => problems(i, path))
    case "AnyOf": {
      if (issue.issues.length > 0) return issue.issues.flatMap((i) => problems(i, path))
      return [{ path, message: `${unionMessage(issue.ast)}${actual(issue)}` }]
    }
    case "Filter": {
      // A filter of ours says what it wants; a built-in one (a range, a length) is `Expected <range>`.
      const own = issue.filter.annotations?.message ?? (issue.issue._tag === "InvalidValue" ? issue.issue.annotations?.message : undefined)
      if (typeof own === "string") return [{ path, message: own }]
      if (issue.issue._tag !== "InvalidValue") return problems(issue.issue, path)
      return [{ path, message: `Expected ${issue.filter.annotations?.expected ?? "a valid value"}${actual(issue)}` }]
    }
    case "InvalidValue": {
      const own = issue.annotations?.message
      return [{ path, message: typeof own === "string" ? own : `Invalid value${actual(issue)}` }]
    }
    case "InvalidType":
      return [{ path, message: `${expected(issue.ast)}${actual(issue)}` }]
    case "MissingKey":
      return [{ path, message: "is missing" }]
    case "UnexpectedKey": {
      const keys = SchemaAST.isObjects(issue.ast) ? issue.ast.propertySignatures.map((p) => JSON.stringify(String(p.name))) : []
      return [{ path, message: keys.length === 0 ? "is unexpected" : `is unexpected, expected: ${keys.join(" | ")}` }]
    }
    case "OneOf":
    case "Forbidden":
      return [{ path, message: SchemaIssue.defaultLeafHook(issue) }]
  }
}

/** Formats a decode failure: one line per issue, the key first, the variable that set it if any. */
const formatIssues = (issue: SchemaIssue.Issue, origin: ReadonlyMap<string, string>, file: string | undefined): string => {
  const where = file === undefined ? "" : ` (file ${file})`
  return problems(issue, [])
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
    if (options.logLevel !== undefined) {
      doc = setPath(doc, ["log", "level"], options.logLevel)
      origin.set("log.level", "--log-level")
    }
    const decoded = Cfg.decode(doc)
    if (Result.isFailure(decoded)) {
      return yield* Effect.fail(new ConfigError({ message: formatIssues(decoded.failure.issue, origin, file) }))
    }
    return decoded.success
  })

export const layer = (options: LoadOptions = {}): Layer.Layer<Configuration, ConfigError> =>
  Layer.effect(Configuration, load(options))

/** A given configuration (tests). */
export const layerValue = (config: Cfg.Config): Layer.Layer<Configuration> => Layer.succeed(Configuration, config)
