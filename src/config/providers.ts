/**
 * The sources of the configuration as `ConfigProvider`s: the parsed file, the
 * documented `ANKUSA_*` variables and the command-line flags, stacked by
 * precedence (a flag, else the environment, else the file; the Schema of
 * src/domain/config.ts holds the defaults). Every node a source answers is
 * labelled with it, so that an error can say where its value came from.
 */
import { ConfigProvider, Effect } from "effect"
import type { LogLevel } from "../domain/config.js"
import { formatPath } from "./issues.js"

type Kind = "string" | "number" | "boolean"

/** Environment overrides: variable → key path (docs/configuration.md). */
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
  { name: "ANKUSA_STORE_KIND", path: ["store", "kind"], kind: "string" },
  { name: "ANKUSA_STORE_POSTGRES_URL", path: ["store", "postgres", "url"], kind: "string" },
  { name: "ANKUSA_SHUTDOWN_GRACE_MS", path: ["pipeline", "graceMs"], kind: "number" },
  { name: "ANKUSA_OTLP_ENDPOINT", path: ["telemetry", "otlp", "endpoint"], kind: "string" },
  { name: "ANKUSA_OTLP_SAMPLING_RATIO", path: ["telemetry", "otlp", "samplingRatio"], kind: "number" }
]

/** A global admin token from the environment (named "env"), added to the file's tokens. */
export const ENV_ADMIN_TOKEN = "ANKUSA_ADMIN_TOKEN"
/** The config file path when `--config` is not given. */
export const ENV_CONFIG = "ANKUSA_CONFIG"

/** The command-line flags that set a key. */
export interface Flags {
  readonly dataDir?: string | undefined
  readonly port?: number | undefined
  readonly logLevel?: LogLevel | undefined
}

const FLAGS: ReadonlyArray<{ readonly flag: keyof Flags; readonly name: string; readonly path: ReadonlyArray<string> }> = [
  { flag: "dataDir", name: "--data-dir", path: ["dataDir"] },
  { flag: "port", name: "--port", path: ["http", "port"] },
  { flag: "logLevel", name: "--log-level", path: ["log", "level"] }
]

/** Where a value came from: `file ankusa.yaml`, `from ANKUSA_HTTP_PORT`, `from --port`. */
export interface Origin {
  readonly source: string
  /** The value as the source gave it; none for an array. */
  readonly value: string | undefined
}

/**
 * The source of every value read. Each source's nodes are remembered as they
 * pass (a node is a fresh object per lookup), and the stack as a whole records
 * the winning node of each path, so precedence needs no bookkeeping of its own.
 */
export class Provenance {
  private readonly sources = new WeakMap<ConfigProvider.Node, string>()
  private readonly origins = new Map<string, Origin>()

  /** `provider`, its nodes labelled with `source` (a name, or one per path). */
  readonly label = (
    source: string | ((path: ConfigProvider.Path) => string | undefined),
    provider: ConfigProvider.ConfigProvider
  ) =>
    ConfigProvider.make((path) =>
      Effect.map(provider.load(path), (node) => {
        const name = typeof source === "string" ? source : source(path)
        if (node !== undefined && name !== undefined) this.sources.set(node, name)
        return node
      })
    )

  /** `provider`, recording the source of each value and array it answers (a record is only a container). */
  readonly record = (provider: ConfigProvider.ConfigProvider) =>
    ConfigProvider.make((path) =>
      Effect.map(provider.load(path), (node) => {
        const source = node === undefined || node._tag === "Record" ? undefined : this.sources.get(node)
        if (node !== undefined && source !== undefined) this.origins.set(formatPath(path), { source, value: node.value })
        return node
      })
    )

  /** The origin of the value at `path`, if one was read there. */
  readonly at = (path: ReadonlyArray<PropertyKey>): Origin | undefined => this.origins.get(formatPath(path))

  /** The source of `path` or, for a key the sources left out, of the nearest array or value above it. */
  readonly sourceOf = (path: ReadonlyArray<PropertyKey>): string | undefined => {
    for (let n = path.length; n > 0; n--) {
      const origin = this.at(path.slice(0, n))
      if (origin !== undefined) return origin.source
    }
    return undefined
  }
}

type Tree = { [key: string]: string | Tree }

const setPath = (tree: Tree, path: ReadonlyArray<string>, value: string): void => {
  const [head, ...rest] = path
  if (head === undefined) return
  if (rest.length === 0) {
    tree[head] = value
    return
  }
  const child = tree[head]
  const next: Tree = typeof child === "object" ? child : {}
  tree[head] = next
  setPath(next, rest, value)
}

// Booleans also take 1/0; numbers are trimmed. Anything else goes to the Schema as given, so the error names it.
const fromEnvString = (raw: string, kind: Kind): string => {
  const v = raw.trim()
  if (kind === "number") return v
  if (kind === "boolean") return v === "1" ? "true" : v === "0" ? "false" : v
  return raw
}

/** The parsed YAML or JSON document. An empty string is a value (and refused where a key needs one). */
export const fromFile = (doc: unknown): ConfigProvider.ConfigProvider =>
  ConfigProvider.fromUnknown(doc, { preserveEmptyStrings: true })

/**
 * The documented variables, each at its key; an empty one is unset. A plain
 * `ConfigProvider.fromEnv` would answer every key under `ANKUSA_` by its
 * constant-case name, which is neither the documented set nor its names
 * (`ANKUSA_SHUTDOWN_GRACE_MS` is `pipeline.graceMs`).
 */
export const fromEnvironment = (env: Readonly<Record<string, string | undefined>>): ConfigProvider.ConfigProvider => {
  const tree: Tree = {}
  for (const v of ENV) {
    const raw = env[v.name]
    if (raw !== undefined && raw !== "") setPath(tree, v.path, fromEnvString(raw, v.kind))
  }
  return ConfigProvider.fromUnknown(tree)
}

/** The flags given, each at its key. */
export const fromFlags = (flags: Flags): ConfigProvider.ConfigProvider => {
  const tree: Tree = {}
  for (const f of FLAGS) {
    const value = flags[f.flag]
    if (value !== undefined) setPath(tree, f.path, String(value))
  }
  return ConfigProvider.fromUnknown(tree, { preserveEmptyStrings: true })
}

const startsWith = (path: ConfigProvider.Path, prefix: ConfigProvider.Path) =>
  path.length >= prefix.length && prefix.every((p, i) => path[i] === p)

/**
 * `base` with one more element at the end of the array at `at`, read from
 * `item` (its paths relative to the element). A value that is not an array
 * is left as it is, for the Schema to refuse.
 */
export const append = (
  base: ConfigProvider.ConfigProvider,
  at: ConfigProvider.Path,
  item: ConfigProvider.ConfigProvider
): ConfigProvider.ConfigProvider =>
  ConfigProvider.make((path) =>
    !startsWith(path, at)
      ? base.load(path)
      : Effect.flatMap(base.load(at), (node) => {
          if (node !== undefined && node._tag !== "Array") return base.load(path)
          const length = node?._tag === "Array" ? node.length : 0
          if (path.length === at.length) return Effect.succeed(ConfigProvider.makeArray(length + 1))
          return path[at.length] === length ? item.load(path.slice(at.length + 1)) : base.load(path)
        })
  )

// The variable or flag that sets a key; the records above it are only containers.
const nameByPath = (entries: ReadonlyArray<{ readonly name: string; readonly path: ReadonlyArray<string> }>) => {
  const names = new Map(entries.map((e) => [formatPath(e.path), `from ${e.name}`]))
  return (path: ConfigProvider.Path) => names.get(formatPath(path))
}

/**
 * Every source stacked by precedence: flags over the environment over the
 * file, and `ANKUSA_ADMIN_TOKEN` appended to the file's `adminTokens`.
 * `fileLabel` names the file in messages (`file ankusa.yaml`).
 */
export const stack = (
  provenance: Provenance,
  sources: {
    readonly doc: unknown
    readonly fileLabel: string
    readonly env: Readonly<Record<string, string | undefined>>
    readonly flags: Flags
  }
): ConfigProvider.ConfigProvider => {
  const layered = provenance.label(nameByPath(FLAGS), fromFlags(sources.flags)).pipe(
    ConfigProvider.orElse(provenance.label(nameByPath(ENV), fromEnvironment(sources.env))),
    ConfigProvider.orElse(provenance.label(sources.fileLabel, fromFile(sources.doc)))
  )
  const token = sources.env[ENV_ADMIN_TOKEN]
  const withToken =
    token === undefined || token === ""
      ? layered
      : append(
          layered,
          ["adminTokens"],
          provenance.label(`from ${ENV_ADMIN_TOKEN}`, ConfigProvider.fromUnknown({ name: "env", token, tenants: "*" }))
        )
  return provenance.record(withToken)
}
