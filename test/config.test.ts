/**
 * Configuration loading: the embedded default, the documented examples, and
 * refusals that name the key (file, environment and flags).
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Result } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Cfg from "../src/domain/config.js"
import { ENV_POSTGRES_PASSWORD, postgresUrl } from "../src/domain/config-store.js"
import { load, read } from "../src/config/config.js"

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
    expect(c.http).toMatchObject({ host: "127.0.0.1", port: 8080, demoSink: "auto" })
    expect(Cfg.demoSinkServed(c)).toBe(true)
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

  it("a flag overrides the environment, which overrides the file, which overrides the default", async () => {
    const yaml = "http: {host: 0.0.0.0, port: 9000}\nlog: {level: error}\n"
    await withFile("ankusa.yaml", yaml, async (file) => {
      const env = { ANKUSA_HTTP_PORT: "9100", ANKUSA_LOG_LEVEL: "warning" }
      const flag = await Effect.runPromise(load({ file, env, port: 9200, logLevel: "debug" }))
      // Each key from its highest source; the host, set only in the file, still comes from it.
      expect([flag.http.host, flag.http.port, flag.log.level]).toEqual(["0.0.0.0", 9200, "debug"])
      const fromEnv = await Effect.runPromise(load({ file, env }))
      expect([fromEnv.http.host, fromEnv.http.port, fromEnv.log.level]).toEqual(["0.0.0.0", 9100, "warning"])
      const fromFile = await Effect.runPromise(load({ file, env: {} }))
      expect([fromFile.http.host, fromFile.http.port, fromFile.log.level]).toEqual(["0.0.0.0", 9000, "error"])
    })
    const none = await Effect.runPromise(load({ env: {} }))
    expect([none.http.host, none.http.port, none.log.level]).toEqual(["127.0.0.1", 8080, "info"])
  })

  it("the configuration reads from any ConfigProvider", async () => {
    const c = await Effect.runPromise(read(ConfigProvider.fromUnknown({ http: { port: 9300 }, archive: { enabled: true } })))
    expect([c.http.port, c.http.host, c.archive.enabled]).toEqual([9300, "127.0.0.1", true])
  })

  it("an unknown key in the file is refused, naming the keys it may be", async () => {
    const yaml = "http: {prot: 8080}\nlog: {levle: debug}\n"
    await withFile("ankusa.yaml", yaml, async (file) =>
      expect(await message({ file, env: {} })).toBe(
        `config error at http.prot (file ${file}): is unexpected, expected: "host" | "port" | "demoSink" | "maxConnections" | "headersTimeoutMs" | "requestTimeoutMs" | "minBodyBytesPerSec" | "bodyGraceMs" | "console"\n` +
          `config error at log.levle (file ${file}): is unexpected, expected: "level"`
      )
    )
  })

  it("a key given no value in the file is refused, not taken as left out", async () => {
    await withFile("ankusa.yaml", "sinks:\n", async (file) =>
      expect(await message({ file, env: {} })).toBe(`config error at sinks (file ${file}): Expected array, actual null`)
    )
  })

  it("a bad value under a key with a default is refused, not replaced by the default", async () => {
    await withFile("ankusa.yaml", "http: {port: 80a}\n", async (file) =>
      expect(await message({ file, env: {} })).toBe(`config error at http.port (file ${file}): Expected number, actual "80a"`)
    )
  })

  it("a bad environment value names its variable, over the file's good one", async () => {
    await withFile("ankusa.yaml", "http: {port: 9000}\n", async (file) =>
      expect(await message({ file, env: { ANKUSA_HTTP_PORT: "80a" } })).toBe(
        'config error at http.port (from ANKUSA_HTTP_PORT): Expected number, actual "80a"'
      )
    )
  })

  it("a route to a sink that is not configured names the file", async () => {
    const yaml = "sinks: [{name: orders, url: 'http://x/'}]\nsources:\n  - {id: a, routes: [orders]}\n  - {id: b, routes: [billing]}\n"
    await withFile("ankusa.yaml", yaml, async (file) =>
      expect(await message({ file, env: {} })).toBe(`config error at sources[1].routes[0] (file ${file}): no sink named "billing"`)
    )
  })

  it("a key that takes one of several words answers in one line", async () => {
    const words = "expected one of trace, debug, info, warning, error, fatal, none"
    await withFile("ankusa.yaml", "log: {level: warn}\n", async (file) =>
      expect(await message({ file, env: {} })).toBe(`config error at log.level (file ${file}): ${words}, actual "warn"`)
    )
    expect(await message({ env: { ANKUSA_LOG_LEVEL: "loud" } })).toBe(`config error at log.level (from ANKUSA_LOG_LEVEL): ${words}, actual "loud"`)
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

  it("store.kind postgres needs a URL, refuses the archive, and its password never shows", async () => {
    expect(await message({ env: { ANKUSA_STORE_KIND: "postgres" } })).toBe(
      "config error at store.postgres.url: is required when store.kind is postgres"
    )
    const yaml = "store: {kind: postgres, postgres: {url: 'postgres://ankusa:pw-in-file@127.0.0.1:5432/ankusa'}}\narchive: {enabled: true}\n"
    await withFile("ankusa.yaml", yaml, async (file) => {
      const m = await message({ file, env: {} })
      expect(m).toContain("config error at archive.enabled")
      expect(m).toContain("not available with store.kind postgres")
    })
    expect(await message({ env: { ANKUSA_STORE_KIND: "postgres", ANKUSA_STORE_POSTGRES_URL: "http://db/x" } })).toContain("expected a postgres:// URL")
    const c = await Effect.runPromise(
      load({ env: { ANKUSA_STORE_KIND: "postgres", ANKUSA_STORE_POSTGRES_URL: "postgres://ankusa:pw-in-url@127.0.0.1:5432/ankusa" } })
    )
    expect(c.store.kind).toBe("postgres")
    expect(JSON.stringify(Cfg.redact(c))).not.toContain("pw-in-url")
    // The password from the environment joins a URL that has none, and only such a URL.
    expect(postgresUrl({ ...c.store, postgres: { ...c.store.postgres, url: "postgres://ankusa@db:5432/a" } }, { [ENV_POSTGRES_PASSWORD]: "p@ss/w" })).toBe(
      "postgres://ankusa:p%40ss%2Fw@db:5432/a"
    )
    expect(postgresUrl(c.store, { [ENV_POSTGRES_PASSWORD]: "other" })).toBe("postgres://ankusa:pw-in-url@127.0.0.1:5432/ankusa")
  })
})
