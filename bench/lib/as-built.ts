/**
 * A bench that hosts the gateway's code in its own process runs it as the build makes it
 * (scripts/build.mjs: esbuild's bundle, names not kept), not as tsx serves it: tsx's transform
 * keeps every function's name by wrapping each closure it creates in a `__name` call (an
 * `Object.defineProperty`), which the built gateway does not do, and which cost delivery-bench's
 * drain 3 to 5 µs of CPU a delivery in paired runs (docs/testing.md "delivery-bench").
 *
 * `reexecAsBuilt(import.meta.url)`, at the top of a bench run under tsx: bundles the bench with
 * the build's options into node_modules/.cache/ankusa-bench/ (where the bundle still resolves the
 * packages left out of it), copies src/'s .mjs files beside it (the commit worker is loaded by a
 * URL relative to the bundle, as in dist/), runs it with the same arguments, and resolves true once
 * it exits, its exit code taken as this process's; false when this process is already the bundle.
 * Bench modules keep their own source's `import.meta.url`, so the servers they spawn
 * (bench/lib/server-process.ts) run from source as before.
 */
import { spawn } from "node:child_process"
import { copyFileSync, mkdirSync, readdirSync, readFileSync } from "node:fs"
import { basename, dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { build } from "esbuild"

const BUILT = "ANKUSA_BENCH_AS_BUILT"
/** Spelled in two parts so that this file's own source is left as it is when bundled. */
const META = ["import", "meta"].join(".")
const root = join(import.meta.dirname, "..", "..")

/** This process's node flags (a profile, a trace) for the bundle, less tsx's loader. */
const nodeFlags = (): Array<string> => {
  const out: Array<string> = []
  const a = process.execArgv
  for (let i = 0; i < a.length; i++) {
    if ((a[i] === "--import" || a[i] === "--require") && /tsx/.test(a[i + 1] ?? "")) i++
    else if (!/^--(import|require)=.*tsx/.test(a[i]!)) out.push(a[i]!)
  }
  return out
}

/**
 * Bundle the bench module `entry` with the build's options into node_modules/.cache/ankusa-bench/`name`/
 * (src/'s .mjs files copied beside it); the bundle's path.
 */
export const bundled = async (entry: string, name: string): Promise<string> => {
  const out = join(root, "node_modules", ".cache", "ankusa-bench", name)
  mkdirSync(out, { recursive: true })
  const outfile = join(out, "bench.mjs")
  await build({
    absWorkingDir: root,
    entryPoints: [entry],
    outfile,
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node22",
    sourcemap: "inline",
    // As scripts/build.mjs: the packages with native code or files of their own stay outside.
    external: ["@nxtedition/rocksdb", "@bokuweb/zstd-wasm", "yaml", "esbuild"],
    banner: { js: 'import { createRequire as __ankusaRequire } from "node:module"; const require = __ankusaRequire(import.meta.url);' },
    logLevel: "warning",
    plugins: [
      {
        name: "bench-sources-keep-their-url",
        setup(b) {
          b.onLoad({ filter: /[\\/]bench[\\/].*\.ts$/ }, (args) => ({
            contents: readFileSync(args.path, "utf8")
              .replaceAll(`${META}.url`, JSON.stringify(pathToFileURL(args.path).href))
              .replaceAll(`${META}.dirname`, JSON.stringify(dirname(args.path)))
              .replaceAll(`${META}.filename`, JSON.stringify(args.path)),
            loader: "ts"
          }))
        }
      }
    ]
  })
  for (const f of readdirSync(join(root, "src"), { recursive: true, encoding: "utf8" })) {
    if (f.endsWith(".mjs")) copyFileSync(join(root, "src", f), join(out, basename(f)))
  }
  return outfile
}

export const reexecAsBuilt = async (benchUrl: string): Promise<boolean> => {
  if (process.env[BUILT] === "1") {
    // The bundle ends with the bench process that ran it, even one killed by SIGKILL (the gate's time limit).
    process.once("disconnect", () => process.exit(1))
    return false
  }
  const entry = fileURLToPath(benchUrl)
  const outfile = await bundled(entry, basename(entry, ".ts"))
  const child = spawn(process.execPath, [...nodeFlags(), outfile, ...process.argv.slice(2)], { stdio: ["inherit", "inherit", "inherit", "ipc"], env: { ...process.env, [BUILT]: "1" } })
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => child.kill(signal))
  const code = await new Promise<number>((done) => child.once("exit", (c, s) => done(c ?? (s === null ? 1 : 128))))
  process.exitCode = code
  return true
}
