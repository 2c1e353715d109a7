/**
 * Configuration loading: the embedded default, the documented examples, and
 * refusals that name the key (file, environment and flags).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Cfg from "../src/domain/config.js"
import { load } from "../src/layers/config.js"

const withFile = <A>(name: string, text: string, f: (file: string) => Promise<A>): Promise<A> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ankusa-config-"))
  const file = path.join(dir, name)
  fs.writeFileSync(file, text)
  return f(file).finally(() => fs.rmSync(dir, { recursive: true, force: true }))
}

const message = (options: Parameters<typeof load>[0]) =>
  Effect.runPromise(Effect.flip(load(options))).then((e) => e.message)

describe("config", () => {
  it("the default configuration is the documented one: demo source to the built-in demo sink", async () => {
    const c = await Effect.runPromise(load({ env: {} }))
    expect(c).toEqual(Cfg.defaults)
    expect(c.http).toMatchObject({ host: "127.0.0.1", port: 8080, demoSink: true })
    expect(c.dataDir).toBe("./data")
    expect(c.sources).toEqual([{ id: "demo", tenant: "default", verification: "none", routes: ["demo"] }])
    expect(c.sinks.map((s) => [s.name, s.url])).toEqual([["demo", "{self}/_demo/sink"]])
    expect(Cfg.resolveUrl(c.sinks[0]!.url, "http://127.0.0.1:8080")).toBe("http://127.0.0.1:8080/_demo/sink")
    expect(c.ingest.maxBodyBytes).toBe(1024 * 1024)
    expect(c.dedupe.windowMs).toBe(24 * 3_600_000)
    expect(c.tenants.max).toBe(1_000_000)
    expect(c.gauges.intervalMs).toBe(15_000)
  })

  it("every YAML example of docs/configuration.md loads", async () => {
    const doc = fs.readFileSync(path.resolve(import.meta.dirname, "../docs/configuration.md"), "utf8")
    const blocks = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!)
    expect(blocks.length).toBeGreaterThan(0)
    for (const block of blocks) {
      await withFile("ankusa.yaml", block, (file) => Effect.runPromise(load({ file, env: {} })))
    }
  })

  it("a bad file is refused with a message naming the key", async () => {
    const yaml = "sinks:\n  - name: a\n    url: ftp://example.com\n"
    expect(await withFile("a.yaml", yaml, (file) => message({ file, env: {} }))).toMatch(
      /^config error at sinks\[0\]\.url \(file .*a\.yaml\): expected an http/
    )
    const routes = "sinks: [{name: a, url: 'http://x/'}]\nsources: [{id: s, routes: [a, b]}]\n"
    expect(await withFile("b.yaml", routes, (file) => message({ file, env: {} }))).toMatch(
      /^config error at sources\[0\]\.routes\[1\] .*no sink named "b"/
    )
    expect(await withFile("c.json", '{"tenants": {"max": 0}}', (file) => message({ file, env: {} }))).toMatch(
      /^config error at tenants\.max .*between 1 and 4294967294/
    )
    expect(await withFile("d.yaml", "htp: {port: 1}\n", (file) => message({ file, env: {} }))).toMatch(/^config error at htp .*unexpected/)
    expect(await withFile("e.json", "{not json", (file) => message({ file, env: {} }))).toMatch(/^config error in .*e\.json: /)
  })

  it("environment variables and flags override the file, and a bad one names its source", async () => {
    const yaml = "http: {port: 9000}\ndataDir: /from/file\n"
    const c = await withFile("a.yaml", yaml, (file) =>
      Effect.runPromise(load({ file, env: { ANKUSA_HTTP_PORT: "9100", ANKUSA_LOG_LEVEL: "debug", ANKUSA_ARCHIVE_ENABLED: "true" }, dataDir: "/from/flag" }))
    )
    expect([c.http.port, c.dataDir, c.log.level, c.archive.enabled]).toEqual([9100, "/from/flag", "debug", true])
    const flag = await Effect.runPromise(load({ env: { ANKUSA_HTTP_PORT: "9100" }, port: 0 }))
    expect(flag.http.port).toBe(0)
    expect(await message({ env: { ANKUSA_HTTP_PORT: "80a" } })).toBe(
      'config error at http.port (from ANKUSA_HTTP_PORT): Expected number, actual "80a"'
    )
    expect(await message({ env: {}, port: 70_000 })).toMatch(/^config error at http\.port \(from --port\)/)
    const token = await Effect.runPromise(load({ env: { ANKUSA_ADMIN_TOKEN: "a-token-of-sixteen+" } }))
    expect(token.adminTokens).toEqual([{ name: "env", token: "a-token-of-sixteen+", tenants: "*" }])
  })

  it("GET /v1/config's view redacts secrets, tokens and sink header values", () => {
    const secret = `whsec_${Buffer.alloc(24, 7).toString("base64")}`
    const c = Cfg.decode({
      sinks: [{ name: "a", url: "http://x/", secret, headers: { Authorization: "Bearer hunter2" } }],
      sources: [{ id: "s", routes: ["a"], verification: { type: "standard-webhooks", secret } }],
      adminTokens: [{ name: "ops", token: "super-secret-token-1", tenants: "*" }]
    })
    if (Result.isFailure(c)) throw new Error(String(c.failure))
    const text = JSON.stringify(Cfg.redact(c.success))
    for (const s of [secret, "hunter2", "super-secret-token-1"]) expect(text).not.toContain(s)
    expect(text).toContain('"Authorization":"[redacted]"')
  })
})
