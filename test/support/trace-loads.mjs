/**
 * A preload for test/platform.test.ts: records every module URL the process resolves and
 * writes them, one a line, to the file named by ANKUSA_TRACE_LOADS when the process exits.
 * Usage: node --import ./test/support/trace-loads.mjs bin/ankusa.js --version
 */
import { registerHooks } from "node:module"
import { appendFileSync } from "node:fs"

const seen = new Set()
registerHooks({
  resolve(specifier, context, next) {
    const r = next(specifier, context)
    seen.add(r.url)
    return r
  }
})
process.on("exit", () => appendFileSync(process.env.ANKUSA_TRACE_LOADS, [...seen].join("\n") + "\n"))
