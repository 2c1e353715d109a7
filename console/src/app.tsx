/**
 * The console's frame: sign-in until a token is accepted, then the navigation and the page the
 * URL's fragment names. Signing out (or a 401) forgets the token and everything shown.
 */
import { useEffect, useState } from "preact/hooks"
import { api, type Principal } from "./api.js"
import { Loading } from "./components/status.js"
import { Audit } from "./pages/audit.js"
import { DeadHook } from "./pages/dead-hook.js"
import { DeadLetters } from "./pages/dead-letters.js"
import { Endpoints, EndpointsIndex } from "./pages/endpoints.js"
import { Overview } from "./pages/overview.js"
import { Quarantine } from "./pages/quarantine.js"
import { SignIn } from "./pages/sign-in.js"
import { Sinks } from "./pages/sinks.js"
import { Tenant } from "./pages/tenant.js"
import { Tenants } from "./pages/tenants.js"
import { href, type Route, useRoute } from "./route.js"
import * as Session from "./session.js"

const PAGES = [
  { path: "overview", label: "Overview" },
  { path: "tenants", label: "Tenants" },
  { path: "dead", label: "Dead letters" },
  { path: "quarantine", label: "Quarantine" },
  { path: "audit", label: "Audit" },
  { path: "sinks", label: "Sinks" },
  { path: "endpoints", label: "Endpoints" }
] as const

/** What a portal token opens (docs/api.md "Portal tokens"): the rest would answer 401 and sign it out. */
const PORTAL_PAGES = ["endpoints", "dead"]

const isPortal = (p: Principal) => p.expires_at !== undefined

/** The first page of a principal: a portal token's is its tenant's endpoints. */
const home = (p: Principal) => (isPortal(p) ? "endpoints" : "overview")

const Page = ({ route, principal }: { readonly route: Route; readonly principal: Principal }) => {
  const [first = home(principal), second, third] = route.path
  if (isPortal(principal) && !PORTAL_PAGES.includes(first) && !(first === "tenants" && third === "endpoints")) {
    return <EndpointsIndex principal={principal} />
  }
  switch (first) {
    case "tenants":
      if (second !== undefined && third === "endpoints") return <Endpoints key={second} tenant={second} />
      return second === undefined ? <Tenants principal={principal} /> : <Tenant key={second} tenant={second} />
    case "endpoints":
      return <EndpointsIndex principal={principal} />
    case "dead":
      return second === undefined ? <DeadLetters query={route.query} /> : <DeadHook key={second} id={second} />
    case "quarantine":
      return <Quarantine />
    case "audit":
      return <Audit />
    case "sinks":
      return <Sinks principal={principal} />
    case "overview":
      return <Overview principal={principal} />
    default:
      return (
        <>
          <h1>Not found</h1>
          <p>
            No page <code>{route.path.join("/")}</code>. <a href={href(["overview"])}>Overview</a>
          </p>
        </>
      )
  }
}

export const App = () => {
  // A portal URL carries its token in the fragment: kept for this tab, then taken out of the address.
  Session.takePortalToken()
  const route = useRoute()
  // undefined: checking a kept token; null: signed out.
  const [principal, setPrincipal] = useState<Principal | null | undefined>(Session.token() === undefined ? null : undefined)

  useEffect(() => Session.onSignOut(() => setPrincipal(null)), [])
  useEffect(() => {
    if (principal !== undefined) return
    api.whoami().then(setPrincipal, () => {
      Session.signOut()
      setPrincipal(null)
    })
  }, [principal])
  useEffect(() => {
    const title = PAGES.find((p) => p.path === (route.path[2] === "endpoints" ? "endpoints" : (route.path[0] ?? "overview")))?.label
    document.title = principal ? `${title ?? "Ankusa"} · Ankusa console` : "Ankusa console"
  }, [route, principal])

  if (principal === undefined) return <Loading />
  if (principal === null) return <SignIn onSignedIn={setPrincipal} />
  const current = route.path[2] === "endpoints" ? "endpoints" : (route.path[0] ?? home(principal))
  const pages = isPortal(principal) ? PAGES.filter((p) => PORTAL_PAGES.includes(p.path)) : PAGES
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById("main")?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Ankusa</span>
        <nav aria-label="Pages">
          <ul>
            {pages.map((p) => (
              <li key={p.path}>
                <a href={href([p.path])} aria-current={current === p.path ? "page" : undefined}>
                  {p.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span class="who" title={principal.tenants === null ? "Global token" : `Scoped to ${principal.tenants.join(", ")}`}>
          {principal.name}
          {principal.tenants === null ? " (global)" : ` (${principal.tenants.length} tenant${principal.tenants.length === 1 ? "" : "s"})`}
        </span>
        <button type="button" onClick={() => Session.signOut()}>
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        <Page route={route} principal={principal} />
      </main>
    </>
  )
}
