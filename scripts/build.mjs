/**
 * `npm run build`: src/ to dist/, the JavaScript that `npm start`, bin/ankusa.js and the CLI
 * run. esbuild bundles src/programs/main.ts with effect into a few ESM files: a CLI front that
 * answers --help and --version, and chunks that `serve` and `store` load when they run
 * (docs/architecture.md "The build" says why a bundle rather than tsc's one file per module).
 * Packages with native code, WebAssembly or files of their own stay in node_modules. The
 * commit worker and its wire format are plain .mjs files, copied beside the chunks, which
 * load the worker by a URL relative to themselves. Type checking is `tsc --noEmit` (npm test).
 */
import { build } from "esbuild"
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { basename, join } from "node:path"

const root = join(import.meta.dirname, "..")
const out = join(root, "dist")

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

const files = new Map(result.outputFiles.map((f) => [f.path, f.contents]))
for (const f of readdirSync(join(root, "src"), { recursive: true, encoding: "utf8" })) {
  if (f.endsWith(".mjs")) files.set(join(out, basename(f)), readFileSync(join(root, "src", f)))
}
mkdirSync(out, { recursive: true })
for (const [path, contents] of files) {
  if (existsSync(path) && Buffer.compare(readFileSync(path), contents) === 0) continue
  writeFileSync(`${path}.tmp`, contents)
  renameSync(`${path}.tmp`, path)
}
for (const f of readdirSync(out)) if (!files.has(join(out, f))) rmSync(join(out, f), { recursive: true, force: true })
