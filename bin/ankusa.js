#!/usr/bin/env node
// The `ankusa` command: the compiled build (dist/, made by `npm run build`, which `npm ci` runs),
// in this process, so a service manager's signals reach the gateway itself.
const [major, minor] = process.versions.node.split(".").map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(
    `ankusa needs Node.js 22.19 or later (this is ${process.version}); ` +
      "run it through npm (`npm run ankusa -- ARGS`), which uses the Node 24 pinned in node_modules\n"
  )
  process.exit(1)
}
await import("../dist/main.js")
