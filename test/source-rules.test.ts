import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

// TEN-1 §3, §9: only src/domain/deliveries.ts builds a ?D, ?F, ?X or ?A key (and format 2's ?d/?f).
const CONSTRUCTORS = [
  "dueKey",
  "duePrefix",
  "dueUpTo",
  "dueFrom",
  "inflightKey",
  "inflightPrefix",
  "deadByTenantKey",
  "deadByTenantPrefix",
  "activeKey",
  "activeUpTo",
  "dueV2Key",
  "inflightV2Key"
] as const

const SRC = fileURLToPath(new URL("../src", import.meta.url))
const DELIVERIES = path.join(SRC, "domain/deliveries.ts")
const KEYS = path.join(SRC, "domain/keys.ts")
const KEY_CODEC = path.join(SRC, "domain/key-codec.ts")

const tsFiles = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name)
    return e.isDirectory() ? tsFiles(p) : /\.(m|c)?tsx?$/.test(e.name) ? [p] : []
  })

const stripComments = (src: string) => src.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1")

const KEYS_MODULE = String.raw`["'][^"']*\bkeys(?:\.js)?["']`

/** Uses of the constructors in a source text: named imports/re-exports from keys, and `<keys namespace>.<name>`. */
const constructorUses = (source: string, isKeysModule = false): Array<string> => {
  const src = stripComments(source)
  const uses: Array<string> = []
  const names = new Set<string>(CONSTRUCTORS)
  // import { dueKey, activeKey as a } from "./keys.js"  /  export { dueKey } from "./keys.js"
  for (const m of src.matchAll(new RegExp(String.raw`(?:import|export)\s*(?:type\s*)?\{([^}]*)\}\s*from\s*${KEYS_MODULE}`, "g"))) {
    for (const part of m[1]!.split(",")) {
      const name = part.trim().split(/\s+as\s+/)[0]!.replace(/^type\s+/, "")
      if (names.has(name)) uses.push(`import ${name}`)
    }
  }
  // export * from "./keys.js" would re-export every constructor.
  if (new RegExp(String.raw`export\s*\*\s*(?:as\s+\w+\s*)?from\s*${KEYS_MODULE}`).test(src)) uses.push("export *")
  // import * as K from "./keys.js" … K.dueKey(…) or K.dueKey passed along
  for (const m of src.matchAll(new RegExp(String.raw`import\s*\*\s*as\s+([\w$]+)\s+from\s*${KEYS_MODULE}`, "g"))) {
    const ns = m[1]!
    for (const u of src.matchAll(new RegExp(String.raw`(?<![\w$.])${ns.replace("$", "\\$")}\s*\.\s*([\w$]+)`, "g"))) {
      if (names.has(u[1]!)) uses.push(`${ns}.${u[1]}`)
    }
  }
  // Inside keys.ts itself: a call of a constructor (its definitions `name = (` are not calls).
  if (isKeysModule) {
    for (const u of src.matchAll(/(?<![\w$.])([\w$]+)\s*\(/g)) if (names.has(u[1]!)) uses.push(`${u[1]}(`)
  }
  return uses
}

/** Every module specifier a source imports or re-exports (static and dynamic). */
const importsOf = (source: string): Array<string> =>
  [...stripComments(source).matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["']([^"']+)["']/g)].map((m) => m[1]!)

/** Whether a specifier of `file` lands on the layout codecs (domain/key-codec.ts). */
const reachesCodec = (file: string, specifier: string): boolean =>
  specifier.startsWith(".") && path.resolve(path.dirname(file), specifier).replace(/\.js$/, ".ts") === KEY_CODEC

/** The wing (first folder under src/) a relative import of `file` lands in, if any. */
const wingOf = (file: string, specifier: string): string | undefined => {
  if (!specifier.startsWith(".")) return undefined
  const target = path.relative(SRC, path.resolve(path.dirname(file), specifier))
  return target.startsWith("..") ? "outside src" : target.split(path.sep)[0]
}


/** Imports from the store wing, with whether they are type-only and the names they take. */
const storeImportsOf = (source: string): Array<{ readonly text: string; readonly typeOnly: boolean; readonly names: Array<string> }> =>
  [...stripComments(source).matchAll(/import\s+(type\s+)?(\{[^}]*\}|\*\s+as\s+\w+|\w+)\s*from\s*["']([^"']+)["']/g)]
    .filter((m) => /(^|\/)store\//.test(m[3]!))
    .map((m) => {
      const parts = m[2]!.startsWith("{") ? m[2]!.slice(1, -1).split(",").map((p) => p.trim()).filter((p) => p.length > 0) : [m[2]!]
      const typeOnly = m[1] !== undefined || parts.every((p) => p.startsWith("type "))
      return { text: m[0], typeOnly, names: parts.map((p) => p.replace(/^type\s+/, "").split(/\s+as\s+/)[0]!) }
    })

// Keys of the queue families (TEN-1 §3): the index's ?D, ?F, ?x, ?X, ?A (and ?a, ?c, ?k) and the deliveries family.
const QUEUE_KEY_CONSTRUCTORS = new Set<string>([
  ...CONSTRUCTORS,
  "deadKey",
  "deliveryKey",
  "deliveryPrefix",
  "archiveKey",
  "clearedKey",
  "claimKey"
])

/** Ways a file builds or writes queue state: a value import of domain/deliveries.ts, a queue-family key constructor, the deliveries family by name. */
const transitionUses = (file: string, source: string): Array<string> => {
  const src = stripComments(source)
  const uses: Array<string> = []
  for (const m of src.matchAll(/import\s+(type\s+)?(?:[^"';]*?)\s*from\s*["']([^"']+)["']/g)) {
    if (m[1] !== undefined || !m[2]!.startsWith(".")) continue
    if (path.resolve(path.dirname(file), m[2]!).replace(/\.js$/, ".ts") === DELIVERIES) uses.push(`imports domain/deliveries: ${m[2]}`)
  }
  for (const m of src.matchAll(new RegExp(String.raw`import\s*\*\s*as\s+([\w$]+)\s+from\s*${KEYS_MODULE}`, "g"))) {
    for (const u of src.matchAll(new RegExp(String.raw`(?<![\w$.])${m[1]!.replace("$", "\\$")}\s*\.\s*([\w$]+)`, "g"))) {
      if (QUEUE_KEY_CONSTRUCTORS.has(u[1]!)) uses.push(`${m[1]}.${u[1]}`)
    }
  }
  for (const m of src.matchAll(new RegExp(String.raw`import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*${KEYS_MODULE}`, "g"))) {
    for (const part of m[1]!.split(",")) {
      const name = part.trim().replace(/^type\s+/, "").split(/\s+as\s+/)[0]!
      if (QUEUE_KEY_CONSTRUCTORS.has(name)) uses.push(`import ${name}`)
    }
  }
  if (/["']deliveries["']/.test(src)) uses.push("names the deliveries family")
  return uses
}

const MAX_FILE_LINES = 400
const MAX_FUNCTION_LINES = 80

/**
 * Functions longer than MAX_FUNCTION_LINES of their own (the lines of nested functions of five
 * lines or more left out: a service's `make` is the sum of its parts), unless a comment just
 * before the function, or before the statement it is in, says "over 80 lines" and why.
 */
const longFunctions = (file: string, text: string): Array<{ readonly line: number; readonly lines: number }> => {
  const src = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const lineOf = (p: number) => src.getLineAndCharacterOfPosition(p).line
  const explained = (n: ts.Node): boolean => {
    for (let m: ts.Node | undefined = n; m !== undefined && !ts.isSourceFile(m); m = m.parent) {
      const comments = ts.getLeadingCommentRanges(text, m.getFullStart()) ?? []
      if (comments.some((c) => /over 80 lines/i.test(text.slice(c.pos, c.end)))) return true
      if (ts.isStatement(m)) break
    }
    return false
  }
  const out: Array<{ line: number; lines: number }> = []
  const visit = (n: ts.Node) => {
    if (ts.isFunctionLike(n) && (n as ts.FunctionLikeDeclarationBase).body !== undefined) {
      const own = new Set<number>()
      for (let l = lineOf(n.getStart()); l <= lineOf(n.end); l++) own.add(l)
      const strip = (m: ts.Node): void => {
        if (m !== n && ts.isFunctionLike(m) && lineOf(m.end) - lineOf(m.getStart()) >= 5) {
          for (let l = lineOf(m.getStart()) + 1; l <= lineOf(m.end); l++) own.delete(l)
          return
        }
        ts.forEachChild(m, strip)
      }
      ts.forEachChild(n, strip)
      if (own.size > MAX_FUNCTION_LINES && !explained(n)) out.push({ line: lineOf(n.getStart()) + 1, lines: own.size })
    }
    ts.forEachChild(n, visit)
  }
  visit(src)
  return out
}

const WINGS = ["domain", "store", "queue", "delivery", "lifecycle", "observability", "http", "config", "programs", "ha"]

describe("source rules", () => {
  it("src is wings a newcomer can name", () => {
    const folders = fs.readdirSync(SRC, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name)
    expect(folders.sort()).toEqual([...WINGS].sort())
    expect(fs.readdirSync(SRC).filter((f) => !folders.includes(f))).toEqual([])
  })

  it("domain imports no other wing", () => {
    const violations = tsFiles(path.join(SRC, "domain")).flatMap((f) =>
      importsOf(fs.readFileSync(f, "utf8"))
        // Pure: no other wing, and nothing that does I/O (hashing and CRCs from node:crypto and node:zlib are fine).
        .filter((s) => (wingOf(f, s) ?? "domain") !== "domain" || /^(node:(fs|net|http|https|child_process|worker_threads|dgram|os)|@nxtedition|@bokuweb)/.test(s))
        .map((s) => `${path.relative(SRC, f)}: ${s}`)
    )
    expect(violations).toEqual([])
    // The check sees a wing import and a platform import.
    const probe = path.join(SRC, "domain/probe.ts")
    expect(wingOf(probe, "../store/store.js")).toBe("store")
    expect(wingOf(probe, "./keys.js")).toBe("domain")
    expect(importsOf(`import { x } from "../queue/writer.js"\nconst m = await import("node:fs")`)).toEqual(["../queue/writer.js", "node:fs"])
  })

  it("only the store wing imports the RocksDB binding", () => {
    const importers = tsFiles(SRC)
      .concat(fs.readdirSync(SRC, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".mjs")).map((f) => path.join(SRC, f)))
      .filter((f) => importsOf(fs.readFileSync(f, "utf8")).some((s) => s.startsWith("@nxtedition/rocksdb")))
      .map((f) => path.relative(SRC, f).split(path.sep)[0])
    expect(importers.length).toBeGreaterThan(0)
    expect([...new Set(importers)]).toEqual(["store"])
  })

  it("due/inflight/?D/?F/?X/?A key constructors are called only from deliveries", () => {
    const files = tsFiles(SRC)
    expect(files).toContain(DELIVERIES)
    expect(files).toContain(KEYS)
    const violations = files
      .filter((f) => f !== DELIVERIES)
      .flatMap((f) => constructorUses(fs.readFileSync(f, "utf8"), f === KEYS).map((u) => `${path.relative(SRC, f)}: ${u}`))
    expect(violations).toEqual([])
    // The layout codecs build any family's keys, so only keys.ts may reach them (it names each family's constructors).
    expect(files).toContain(KEY_CODEC)
    const codecImporters = files.filter((f) => importsOf(fs.readFileSync(f, "utf8")).some((s) => reachesCodec(f, s)))
    expect(codecImporters.map((f) => path.relative(SRC, f))).toEqual([path.relative(SRC, KEYS)])
    expect(reachesCodec(path.join(SRC, "queue/probe.ts"), "../domain/key-codec.js")).toBe(true)

    // The check sees what it is looking for: deliveries.ts does call the constructors…
    const inDeliveries = new Set(constructorUses(fs.readFileSync(DELIVERIES, "utf8")).map((u) => u.split(".").pop()))
    for (const name of ["dueKey", "inflightKey", "deadByTenantKey", "activeKey", "activeUpTo", "duePrefix", "dueV2Key"]) {
      expect(inDeliveries).toContain(name)
    }
    // …and would catch each way another module could reach them.
    expect(constructorUses(`import * as K from "../domain/keys.js"\nconst k = K.dueKey(1, 2, 3, 4)`)).toEqual(["K.dueKey"])
    expect(constructorUses(`import * as Keys from "./keys.js"\nrows.map(Keys.activeKey)`)).toEqual(["Keys.activeKey"])
    expect(constructorUses(`import { decodeDueKey, inflightKey as f } from "../domain/keys.js"`)).toEqual(["import inflightKey"])
    expect(constructorUses(`export { deadByTenantPrefix } from "./keys.js"`)).toEqual(["import deadByTenantPrefix"])
    expect(constructorUses(`export * from "./keys.js"`)).toEqual(["export *"])
    expect(constructorUses(`export const helper = (o: number) => dueUpTo(o, 0)`, true)).toEqual(["dueUpTo("])
    // Decoders and comments are not uses.
    expect(constructorUses(`import * as K from "./keys.js"\n// K.dueKey(…) is for deliveries\nK.decodeDueKey(k)`)).toEqual([])
  })

  it("the edge never reads the store directly", () => {
    // src/http reads through Queue, Tenants and the lifecycle services: from the store wing it may
    // name only error types (to map them to statuses), never the Store service or a store file's value.
    const violations = tsFiles(path.join(SRC, "http")).flatMap((f) =>
      storeImportsOf(fs.readFileSync(f, "utf8"))
        .filter((i) => !(i.typeOnly && i.names.every((n) => /(Error|Corrupt)$/.test(n))))
        .map((i) => `${path.relative(SRC, f)}: ${i.text}`)
    )
    expect(violations).toEqual([])
    // The check sees a value import, a type import of the service, and allows error types.
    expect(storeImportsOf(`import { Store } from "../store/store.js"`)).toEqual([{ text: `import { Store } from "../store/store.js"`, typeOnly: false, names: ["Store"] }])
    expect(storeImportsOf(`import type { StoreError, StoreShape } from "../store/store.js"`)[0]!.names).toEqual(["StoreError", "StoreShape"])
    expect(storeImportsOf(`import { type StoreError } from "../store/store.js"`)[0]!.typeOnly).toBe(true)
  })

  it("wings import only what their rules allow", () => {
    const rules: ReadonlyArray<{ readonly from: ReadonlyArray<string>; readonly not: RegExp; readonly why: string }> = [
      { from: ["http", "observability", "lifecycle"], not: /^store\/rocksdb/, why: "the store's RocksDB files" },
      { from: ["delivery"], not: /^http\//, why: "the edge" },
      { from: ["ha"], not: /^(http|queue|delivery)\//, why: "a wing the lease serves (it steps down through a callback)" }
    ]
    const violations = rules.flatMap((r) =>
      r.from.flatMap((wing) =>
        tsFiles(path.join(SRC, wing)).flatMap((f) =>
          importsOf(fs.readFileSync(f, "utf8"))
            .filter((s) => s.startsWith(".") && r.not.test(path.relative(SRC, path.resolve(path.dirname(f), s))))
            .map((s) => `${path.relative(SRC, f)} imports ${r.why}: ${s}`)
        )
      )
    )
    expect(violations).toEqual([])
  })

  it("only the queue wing executes index transitions", () => {
    // No wing but queue (and domain, which builds them purely) builds a ?D, ?F, ?x, ?X or ?A key,
    // a deliveries-family key, or a transition (domain/deliveries.ts), or names the deliveries family.
    const outside = tsFiles(SRC).filter((f) => !["queue", "domain"].includes(path.relative(SRC, f).split(path.sep)[0]!))
    const violations = outside.flatMap((f) => transitionUses(f, fs.readFileSync(f, "utf8")).map((u) => `${path.relative(SRC, f)}: ${u}`))
    expect(violations).toEqual([])
    // The queue wing does execute them, so the check finds what it looks for there…
    const queueUses = tsFiles(path.join(SRC, "queue")).flatMap((f) => transitionUses(f, fs.readFileSync(f, "utf8")))
    expect(queueUses.some((u) => u.startsWith("imports domain/deliveries"))).toBe(true)
    expect(queueUses.some((u) => u.includes("deliveryKey"))).toBe(true)
    // …and each form another wing could use.
    const probe = path.join(SRC, "delivery/probe.ts")
    expect(transitionUses(probe, `import * as Deliveries from "../domain/deliveries.js"`)).toEqual(["imports domain/deliveries: ../domain/deliveries.js"])
    expect(transitionUses(probe, `import * as K from "../domain/keys.js"\nK.deadKey(1, 2, 3)`)).toEqual(["K.deadKey"])
    expect(transitionUses(probe, `store.get("deliveries", key)`)).toEqual(['names the deliveries family'])
    expect(transitionUses(probe, `import type { Transition } from "../domain/deliveries.js"`)).toEqual([])
  })

  it("no file over 400 lines, no function over 80 lines of its own without a comment saying why", () => {
    const files = tsFiles(SRC)
    const long = files.map((f) => [path.relative(SRC, f), fs.readFileSync(f, "utf8").split("\n").length - 1] as const).filter(([, n]) => n > MAX_FILE_LINES)
    expect(long).toEqual([])
    const functions = files.flatMap((f) => longFunctions(f, fs.readFileSync(f, "utf8")).map((l) => `${path.relative(SRC, f)}:${l.line} (${l.lines} lines)`))
    expect(functions).toEqual([])
    // The measure: a function's own lines, its nested functions of five lines or more left out.
    const body = Array.from({ length: 85 }, (_, i) => `  const v${i} = ${i}`).join("\n")
    expect(longFunctions("probe.ts", `export const f = () => {\n${body}\n}`)).toHaveLength(1)
    expect(longFunctions("probe.ts", `export const f = () => {\n  const g = () => {\n${body}\n  }\n  return g\n}`).map((l) => l.line)).toEqual([2])
    expect(longFunctions("probe.ts", `/** Over 80 lines because it is one table. */\nexport const f = () => {\n${body}\n}`)).toEqual([])
  })
})
