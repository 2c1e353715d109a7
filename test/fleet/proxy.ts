/**
 * Debian's nginx running deploy/nginx.conf on loopback ports, for the fleet
 * tests. The example file is used as it is, with only the addresses
 * templated (the listen port and the two upstream servers, optionally
 * swapped), inside a main configuration of the test's own: its prefix, pid,
 * error log, temp paths and access log in a temp directory, `daemon off`,
 * one worker. Reload is `nginx -s reload` on that pid file, done once the
 * workers of the old configuration have exited.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

export const EXAMPLE = path.resolve(import.meta.dirname, "..", "..", "deploy", "nginx.conf")

/** The example's placeholders, each of which must occur exactly once. */
const LISTEN = "listen 80;"
const NODE_A = "server 10.0.0.11:8080"
const NODE_B = "server 10.0.0.12:8080"

/** How long nginx may take to start, reload or stop. */
const NGINX_MS = 15_000

export interface Proxy {
  readonly url: string
  /** Rewrite the copy (optionally with the two server lines in the other order) and reload. */
  readonly reload: (o?: { readonly swap?: boolean }) => Promise<void>
  readonly accessLog: () => string
  readonly stop: () => Promise<void>
}

/** The nginx binary: ANKUSA_NGINX, Debian's /usr/sbin/nginx, or `nginx` on PATH. */
export const nginxBinary = (): string => {
  const candidates = [process.env["ANKUSA_NGINX"], "/usr/sbin/nginx"].filter((c): c is string => c !== undefined && c !== "")
  for (const c of candidates) if (fs.existsSync(c)) return c
  try {
    return execFileSync("sh", ["-c", "command -v nginx"], { encoding: "utf8" }).trim()
  } catch {
    throw new Error("nginx not found (run `npm run test:fleet`, which installs Debian's nginx as root, or set ANKUSA_NGINX)")
  }
}

/** `text` with `from`, which must occur exactly once in the example `file`, replaced by `to`. */
export const replaceOnce = (text: string, from: string, to: string, file = "deploy/nginx.conf"): string => {
  const at = text.indexOf(from)
  if (at < 0 || text.indexOf(from, at + 1) >= 0) throw new Error(`${file} must contain "${from}" exactly once`)
  return text.slice(0, at) + to + text.slice(at + from.length)
}

/**
 * The addresses nginx would listen on or connect to in `text` (`listen`, `server`, and a
 * `proxy_pass` that names no `upstream` of the text), each of which must be in 127.0.0.0/8; a
 * `resolver` is refused outright. A templated example with an address left over throws before
 * nginx runs.
 */
export const loopbackOnly = (text: string): string => {
  const loopback = (hostPort: string) => /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostPort.replace(/:\d+$/, ""))
  for (const m of text.matchAll(/^\s*(listen|server)\s+([^\s;{]+)/gm)) {
    if (!loopback(m[2]!)) throw new Error(`nginx would use ${m[2]} (${m[1]}), not a loopback address`)
  }
  const upstreams = new Set([...text.matchAll(/^\s*upstream\s+([^\s{]+)/gm)].map((m) => m[1]!))
  for (const m of text.matchAll(/^\s*proxy_pass\s+\w+:\/\/([^\s;/]+)/gm)) {
    if (!upstreams.has(m[1]!) && !loopback(m[1]!)) throw new Error(`nginx would proxy to ${m[1]}, neither an upstream of the file nor a loopback address`)
  }
  if (/^\s*resolver\s/m.test(text)) throw new Error("nginx would resolve names through a resolver")
  return text
}

/** deploy/nginx.conf with loopback addresses in place of the example's. */
export const templated = (port: number, nodes: readonly [number, number], swap: boolean): string => {
  const [a, b] = swap ? [nodes[1], nodes[0]] : nodes
  let text = fs.readFileSync(EXAMPLE, "utf8")
  text = replaceOnce(text, LISTEN, `listen 127.0.0.1:${port};`)
  text = replaceOnce(text, NODE_A, `server 127.0.0.1:${a}`)
  return loopbackOnly(replaceOnce(text, NODE_B, `server 127.0.0.1:${b}`))
}

const mainConfig = `# The test's own main configuration around deploy/nginx.conf (site.conf).
pid nginx.pid;
error_log error.log notice;
worker_processes 1;
events { worker_connections 1024; }
http {
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    log_format fleet '$request_method $uri tenant="$ankusa_tenant" status=$status node="$upstream_addr"';
    access_log access.log fleet;
    include site.conf;
}
`

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** The master's worker pids (Linux /proc). */
const workersOf = (pid: number): ReadonlyArray<number> => {
  try {
    return fs
      .readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter((s) => s !== "")
      .map(Number)
  } catch {
    return []
  }
}

const until = async (what: string, test: () => boolean | Promise<boolean>, log: () => string): Promise<void> => {
  const deadline = Date.now() + NGINX_MS
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`nginx: timed out waiting for ${what}; error.log:\n${log()}`)
    await sleep(50)
  }
}

const answers = async (url: string): Promise<boolean> => {
  try {
    const r = await fetch(`${url}/`)
    await r.arrayBuffer()
    return r.status === 404
  } catch {
    return false
  }
}

/** `site`: the http-level file to run instead of deploy/nginx.conf templated with `nodes` (the shards' example). */
export const startProxy = async (dir: string, port: number, nodes: readonly [number, number], site?: string): Promise<Proxy> => {
  const bin = nginxBinary()
  fs.mkdirSync(path.join(dir, "tmp"), { recursive: true })
  // Workers run as an unprivileged user when nginx runs as root: they must reach the temp paths.
  fs.chmodSync(dir, 0o755)
  const conf = path.join(dir, "nginx.conf")
  fs.writeFileSync(conf, mainConfig)
  fs.writeFileSync(path.join(dir, "site.conf"), site ?? templated(port, nodes, false))
  const prefix = dir.endsWith("/") ? dir : `${dir}/`
  const errorLog = () => (fs.existsSync(path.join(dir, "error.log")) ? fs.readFileSync(path.join(dir, "error.log"), "utf8") : "")
  execFileSync(bin, ["-t", "-q", "-p", prefix, "-c", conf], { stdio: ["ignore", "ignore", "pipe"] })
  const child: ChildProcess = spawn(bin, ["-p", prefix, "-c", conf, "-g", "daemon off;"], { stdio: ["ignore", "ignore", "pipe"] })
  let stderr = ""
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString("utf8")))
  const exited = new Promise<void>((done) => child.once("exit", () => done()))
  const url = `http://127.0.0.1:${port}`
  await until("the listener", async () => {
    if (child.exitCode !== null) throw new Error(`nginx exited (${child.exitCode}): ${stderr}${errorLog()}`)
    return answers(url)
  }, errorLog)
  return {
    url,
    reload: async (o) => {
      const before = workersOf(child.pid!)
      fs.writeFileSync(path.join(dir, "site.conf"), templated(port, nodes, o?.swap === true))
      execFileSync(bin, ["-q", "-p", prefix, "-c", conf, "-s", "reload"], { stdio: ["ignore", "ignore", "pipe"] })
      await until(
        "the reload (old workers gone, new ones up)",
        () => {
          const now = workersOf(child.pid!)
          return now.length > 0 && now.every((w) => !before.includes(w))
        },
        errorLog
      )
    },
    accessLog: () => fs.readFileSync(path.join(dir, "access.log"), "utf8"),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill("SIGTERM")
      const stopped = await Promise.race([exited.then(() => true), sleep(NGINX_MS).then(() => false)])
      if (!stopped) {
        for (const w of workersOf(child.pid!)) process.kill(w, "SIGKILL")
        child.kill("SIGKILL")
        await exited
      }
    }
  }
}
