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
  { path: "sinks", label: "Sinks" }
] as const

const Page = ({ route, principal }: { readonly route: Route; readonly principal: Principal }) => {
  const [first = "overview", second] = route.path
  switch (first) {
    case "tenants":
      return second === undefined ? <Tenants principal={principal} /> : <Tenant key={second} tenant={second} />
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
    const title = PAGES.find((p) => p.path === (route.path[0] ?? "overview"))?.label
    document.title = principal ? `${title ?? "Ankusa"} · Ankusa console` : "Ankusa console"
  }, [route, principal])

  if (principal === undefined) return <Loading />
  if (principal === null) return <SignIn onSignedIn={setPrincipal} />
  const current = route.path[0] ?? "overview"
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById("main")?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Ankusa</span>
        <nav aria-label="Pages">
          <ul>
            {PAGES.map((p) => (
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
