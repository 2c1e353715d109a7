/**
 * The fleet tests' guard on the templated nginx examples (test/fleet/proxy.ts `loopbackOnly`), as a
 * pure function over a table: the addresses in it are data, never connected to.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { loopbackOnly, templated } from "./fleet/proxy.js"

const cases: ReadonlyArray<readonly [string, boolean]> = [
  ["listen 127.0.0.1:8080;", true],
  ["    server 127.0.0.1:9001 max_fails=0;", true],
  ["server 127.255.0.9:1;", true],
  ["listen 80;", false],
  ["    server 10.0.1.11:8080 max_fails=0;", false],
  ["server 192.168.1.5:8080;", false],
  ["server node-a.internal:8080;", false],
  ["server 128.0.0.1:8080;", false],
  ["server 0.0.0.0:8080;", false],
  ["listen [::]:80;", false],
  // An access rule, not an address nginx connects to.
  ["        allow 10.0.0.0/8;", true],
  ["server {", true],
  ["upstream ankusa {\n    server 127.0.0.1:9001;\n}\nproxy_pass http://ankusa;", true],
  ["proxy_pass http://127.0.0.1:9001/v1;", true],
  ["proxy_pass http://10.0.3.7:8080;", false],
  ["proxy_pass https://elsewhere.example;", false],
  ["resolver 127.0.0.53;", false]
]

describe("nginx examples on loopback", () => {
  it("only loopback listen and server addresses pass", () => {
    for (const [line, ok] of cases) expect(() => loopbackOnly(`${line}\n`), line).toSatisfy((f: () => string) => {
      try {
        f()
        return ok
      } catch {
        return !ok
      }
    })
  })

  it("the examples as shipped do not pass untemplated; templated, they do", () => {
    for (const f of ["nginx.conf", "nginx-shards.conf"]) {
      expect(() => loopbackOnly(fs.readFileSync(path.resolve(import.meta.dirname, "..", "deploy", f), "utf8")), f).toThrow()
    }
    expect(templated(8080, [9001, 9002], false)).toContain("server 127.0.0.1:9001")
  })
})
