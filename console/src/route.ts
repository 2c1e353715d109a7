/**
 * Pages are addressed by the URL's fragment (`#/tenants/acme`, `#/dead?tenant=acme`), so the
 * node serves one index.html and a reload or a shared link opens the same page.
 */
import { useEffect, useState } from "preact/hooks"

export interface Route {
  /** Decoded path segments: `#/tenants/a%2Fb` is ["tenants", "a/b"]. */
  readonly path: ReadonlyArray<string>
  readonly query: URLSearchParams
}

export const parse = (hash: string): Route => {
  const raw = hash.replace(/^#\/?/, "")
  const [p = "", q = ""] = raw.split("?", 2)
  const path = p.split("/").filter((s) => s !== "").map((s) => {
    try {
      return decodeURIComponent(s)
    } catch {
      return s
    }
  })
  return { path, query: new URLSearchParams(q) }
}

/** `#/a/b?x=1` from segments and query values (empty ones left out). */
export const href = (path: ReadonlyArray<string>, query: Readonly<Record<string, string | undefined>> = {}): string => {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== "") q.set(k, v)
  const s = q.toString()
  return `#/${path.map(encodeURIComponent).join("/")}${s === "" ? "" : `?${s}`}`
}

export const navigate = (to: string): void => {
  location.hash = to.replace(/^#/, "")
}

export const useRoute = (): Route => {
  const [route, setRoute] = useState(() => parse(location.hash))
  useEffect(() => {
    const on = () => setRoute(parse(location.hash))
    addEventListener("hashchange", on)
    return () => removeEventListener("hashchange", on)
  }, [])
  return route
}
