/**
 * The live configuration (docs/configuration.md "Reloading"): the generation in force, and the
 * reload that replaces it. A reload re-reads the file and the environment through the same Schema
 * and providers as boot (`load`); on any error nothing changes. On success the keys that can change
 * live (`LIVE_KEYS`) take the new values and every other key keeps the running one, named in the
 * report as needing a restart. The swap is one assignment: a request or a tick reads `get()` once
 * and sees one generation whole.
 */
import { Context, Data, Effect, Layer, Metric, Semaphore } from "effect"
import { stat } from "node:fs/promises"
import type * as Cfg from "../domain/config.js"
import { type ConfigError, fileIssues, load, type LoadOptions } from "./config.js"
import { ENV_CONFIG } from "./providers.js"

/** Keys (and the subtrees under them) that change live; every other key needs a restart. */
export const LIVE_KEYS: ReadonlyArray<string> = [
  "sources",
  "sinks",
  "adminTokens",
  "tenants.limits",
  "tenants.maxEndpoints",
  "ingest.maxBodyBytes",
  "admin",
  "config.watch",
  "endpoints",
  "portal",
  "breaker",
  "operations",
  "store.minFreeBytes"
]

/** How often `config.watch` looks at the file's identity and mtime. */
export const WATCH_INTERVAL_MS = 1_000

export type Trigger = "boot" | "signal" | "api" | "watch"

export interface Generation {
  readonly config: Cfg.Config
  readonly generation: number
  /** Epoch ms. */
  readonly loadedAt: number
  readonly trigger: Trigger
}

export interface ReloadReport {
  readonly generation: number
  readonly loadedAt: number
  /** Live keys whose value changed and now applies. */
  readonly applied: ReadonlyArray<string>
  /** Keys whose value changed in the file but keep the running one: "<key> needs a restart". */
  readonly needsRestart: ReadonlyArray<string>
}

export class ReloadFailed extends Data.TaggedError("ReloadFailed")<{ readonly issues: ReadonlyArray<string> }> {
  override get message() {
    return this.issues.join("\n")
  }
}

export const generationGauge = Metric.gauge("ankusa_config_generation", {
  description: "The configuration generation in force: 1 at boot, +1 on every reload that applied"
})

export const reloadsTotal = Metric.counter("ankusa_config_reloads_total", {
  description: "Configuration reloads by result (ok, error)",
  incremental: true
})

const isPlain = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const sameValue = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b)

/**
 * The configuration that a reload puts in force: `next`'s live keys, `running`'s for every other
 * key, and the keys whose change was set aside (leaf paths under a restart key). Pure.
 */
export const merge = (
  running: Cfg.Config,
  next: Cfg.Config
): { readonly config: Cfg.Config; readonly applied: Array<string>; readonly needsRestart: Array<string> } => {
  const applied: Array<string> = []
  const needsRestart: Array<string> = []
  const walk = (a: unknown, b: unknown, path: string): unknown => {
    if (path !== "" && LIVE_KEYS.includes(path)) {
      if (!sameValue(a, b)) applied.push(path)
      return b
    }
    if (isPlain(a) && isPlain(b)) {
      const out: Record<string, unknown> = {}
      for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) out[k] = walk(a[k], b[k], path === "" ? k : `${path}.${k}`)
      return out
    }
    if (!sameValue(a, b)) needsRestart.push(path)
    return a
  }
  return { config: walk(running, next, "") as Cfg.Config, applied, needsRestart }
}

export interface LiveConfigShape {
  /** The generation in force (synchronous: hot paths read it once per request or tick). */
  readonly get: () => Generation
  /** Re-read and apply; on any error nothing changes. Reloads run one at a time. */
  readonly reload: (trigger: Exclude<Trigger, "boot">) => Effect.Effect<ReloadReport, ReloadFailed>
  /** Called after each applied reload with the new and the previous generation. */
  readonly onChange: (f: (next: Generation, prev: Generation) => void) => void
}

export class LiveConfig extends Context.Service<LiveConfig, LiveConfigShape>()("ankusa/LiveConfig") {}

/** A live configuration starting at `config`; `options` are the boot's (file, flags), read again on reload. */
export const make = (config: Cfg.Config, options: LoadOptions, now: () => number = Date.now) =>
  Effect.gen(function* () {
    let current: Generation = { config, generation: 1, loadedAt: now(), trigger: "boot" }
    const listeners: Array<(next: Generation, prev: Generation) => void> = []
    const lock = yield* Semaphore.make(1)
    yield* Metric.update(generationGauge, 1)
    // Both results present from boot, at 0.
    for (const result of ["ok", "error"]) yield* Metric.update(Metric.withAttributes(reloadsTotal, { result }), 0)

    const reload = (trigger: Exclude<Trigger, "boot">) =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          // Flags stay the boot's; the environment is read again.
          const env = options.env ?? process.env
          const next = yield* load({ ...options, env }).pipe(
            Effect.catch((e: ConfigError) =>
              Effect.flatMap(fileIssues({ ...options, env }), (more) =>
                Effect.fail(new ReloadFailed({ issues: [...new Set([...e.message.split("\n"), ...more])] }))
              )
            )
          )
          const merged = merge(current.config, next)
          const prev = current
          current = { config: merged.config, generation: prev.generation + 1, loadedAt: now(), trigger }
          for (const f of listeners) f(current, prev)
          yield* Metric.update(generationGauge, current.generation)
          return { generation: current.generation, loadedAt: current.loadedAt, applied: merged.applied, needsRestart: merged.needsRestart }
        })
      ).pipe(
        Effect.tap((r) =>
          Effect.andThen(
            Metric.update(Metric.withAttributes(reloadsTotal, { result: "ok" }), 1),
            Effect.logInfo("config reloaded").pipe(
              Effect.annotateLogs({ trigger, generation: r.generation, applied: r.applied, needsRestart: r.needsRestart.map((k) => `${k} needs a restart`) })
            )
          )
        ),
        Effect.tapError((e) =>
          Effect.andThen(
            Metric.update(Metric.withAttributes(reloadsTotal, { result: "error" }), 1),
            Effect.logError("config reload refused; the running configuration stays").pipe(Effect.annotateLogs({ trigger, issues: e.issues }))
          )
        )
      )

    return {
      get: () => current,
      reload,
      onChange: (f) => {
        listeners.push(f)
      }
    } satisfies LiveConfigShape
  })

/** The file a reload reads: `--config`, else `ANKUSA_CONFIG` at boot; none for the embedded default. */
const fileOf = (options: LoadOptions): string | undefined => {
  const f = options.file ?? (options.env ?? process.env)[ENV_CONFIG]
  return f === undefined || f === "" ? undefined : f
}

/**
 * SIGHUP reloads (it would otherwise end the process, Node's default); `config.watch` polls the
 * file's identity and mtime. Both run for the layer's scope.
 */
const triggers = (options: LoadOptions) =>
  Effect.gen(function* () {
    const live = yield* LiveConfig
    const runFork = Effect.runForkWith(yield* Effect.context<never>())
    const run = (trigger: Exclude<Trigger, "boot">) => runFork(Effect.ignore(live.reload(trigger)))
    const onHup = () => {
      run("signal")
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => process.on("SIGHUP", onHup)),
      () => Effect.sync(() => process.off("SIGHUP", onHup))
    )
    const file = fileOf(options)
    if (file === undefined) return
    let seen: string | undefined
    const identity = Effect.promise(() =>
      stat(file).then(
        (s) => `${s.dev}:${s.ino}:${s.mtimeMs}:${s.size}`,
        () => undefined
      )
    )
    seen = yield* identity
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.gen(function* () {
          yield* Effect.sleep(WATCH_INTERVAL_MS)
          if (live.get().config.config.watch !== true) return
          const id = yield* identity
          if (id === undefined || id === seen) return
          seen = id
          yield* Effect.ignore(live.reload("watch"))
        })
      )
    )
  })

export const layer = (config: Cfg.Config, options: LoadOptions): Layer.Layer<LiveConfig> =>
  Layer.effectDiscard(triggers(options)).pipe(Layer.provideMerge(Layer.effect(LiveConfig, make(config, options))))

/**
 * The generation in force for a part built with a configuration value: the node's `LiveConfig`
 * where there is one (serve), else that value, fixed (tests that build a part alone).
 */
export const currentOf = (config: Cfg.Config): Effect.Effect<() => Generation> =>
  Effect.map(Effect.serviceOption(LiveConfig), (o) => {
    if (o._tag === "Some") return o.value.get
    const fixed: Generation = { config, generation: 1, loadedAt: Date.now(), trigger: "boot" }
    return () => fixed
  })

/** A fixed configuration that never reloads (tests, and the programs that do not serve). */
export const layerFixed = (config: Cfg.Config): Layer.Layer<LiveConfig> => Layer.effect(LiveConfig, make(config, {}))
