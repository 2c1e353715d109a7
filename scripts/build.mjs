/**
 * `npm run build`: src/ to dist/, the JavaScript that `npm start`, bin/ankusa.js and the CLI
 * run. esbuild bundles src/programs/main.ts with effect into a few ESM files: a CLI front that
 * answers --help and --version, and chunks that `serve` and `store` load when they run
 * (docs/architecture.md "The build" says why a bundle rather than tsc's one file per module).
 * Packages with native code, WebAssembly or files of their own stay in node_modules. The
 * commit worker and its wire format are plain .mjs files, copied beside the chunks, which
 * load the worker by a URL relative to themselves. The operator console (console/, Preact and
 * uPlot) is bundled for the browser into dist/console/: one JS and one CSS file with content
 * hashes in their names, and index.html naming them (src/http/console.ts serves them).
 * Type checking is `tsc --noEmit` and `tsc --noEmit -p console` (npm test).
 */
import { build } from "esbuild"
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { basename, dirname, join, relative } from "node:path"

const root = join(import.meta.dirname, "..")
const out = join(root, "dist")
const consoleOut = join(out, "console")

// dist/ may be running (a gateway, a test's child) while `npm start` rebuilds it: each file is
// replaced by a rename, unchanged files are left alone, and stale ones removed only at the end.
const result = await build({
  absWorkingDir: root,
  entryPoints: ["src/programs/main.ts"],
  outdir: out,
  entryNames: "[name]",
  chunkNames: "[name]-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node22",
  sourcemap: true,
  external: ["@nxtedition/rocksdb", "@bokuweb/zstd-wasm", "yaml"],
  // CommonJS dependencies (ws, undici) call require(); give the ESM bundle one.
  banner: { js: 'import { createRequire as __ankusaRequire } from "node:module"; const require = __ankusaRequire(import.meta.url);' },
  logLevel: "warning",
  write: false
})

// The console: JSX for Preact, its CSS (uPlot's and its own) pulled out into one file.
const ui = await build({
  absWorkingDir: root,
  entryPoints: ["console/src/main.tsx"],
  outdir: consoleOut,
  entryNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["chrome111", "firefox115", "safari16.4"],
  jsx: "automatic",
  jsxImportSource: "preact",
  minify: true,
  sourcemap: true,
  legalComments: "eof",
  logLevel: "warning",
  write: false
})
const named = (ext) => {
  const f = ui.outputFiles.find((o) => o.path.endsWith(ext))
  if (f === undefined) throw new Error(`the console build made no ${ext} file`)
  return basename(f.path)
}
const html = readFileSync(join(root, "console/index.html"), "utf8").replace("{{js}}", named(".js")).replace("{{css}}", named(".css"))

const files = new Map(result.outputFiles.map((f) => [f.path, f.contents]))
for (const f of ui.outputFiles) files.set(f.path, f.contents)
files.set(join(consoleOut, "index.html"), Buffer.from(html))
for (const f of readdirSync(join(root, "src"), { recursive: true, encoding: "utf8" })) {
  if (f.endsWith(".mjs")) files.set(join(out, basename(f)), readFileSync(join(root, "src", f)))
}
for (const [path, contents] of files) {
  mkdirSync(dirname(path), { recursive: true })
  if (existsSync(path) && Buffer.compare(readFileSync(path), contents) === 0) continue
  writeFileSync(`${path}.tmp`, contents)
  renameSync(`${path}.tmp`, path)
}
// Stale files go last, in dist/ and dist/console/ (a served console keeps its old assets until then).
const kept = new Set([...files.keys()].flatMap((p) => [p, ...parents(p)]))
function parents(p) {
  const up = []
  for (let d = dirname(p); relative(out, d) !== "" && !relative(out, d).startsWith(".."); d = dirname(d)) up.push(d)
  return up
}
for (const dir of [out, consoleOut]) {
  for (const f of readdirSync(dir)) if (!kept.has(join(dir, f))) rmSync(join(dir, f), { recursive: true, force: true })
}
