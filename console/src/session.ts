/**
 * The signed-in token: kept in sessionStorage (this tab only, gone when it closes), never in a
 * cookie or a log. Listeners hear a sign-out (a 401 from the API, or the button). A portal URL
 * brings its token in the fragment (`#/tenants/acme/endpoints?portal=apt_…`, never sent to a
 * server): `takePortalToken` keeps it and removes it from the address at once.
 */
const KEY = "ankusa.console.token"

const listeners = new Set<() => void>()

export const token = (): string | undefined => sessionStorage.getItem(KEY) ?? undefined

export const signIn = (value: string): void => sessionStorage.setItem(KEY, value)

export const signOut = (): void => {
  sessionStorage.removeItem(KEY)
  for (const l of listeners) l()
}

export const onSignOut = (listener: () => void): (() => void) => {
  listeners.add(listener)
  return () => listeners.delete(listener)
}

/** A portal token in the fragment's query: kept (replacing any other token), and the address rewritten without it. */
export const takePortalToken = (): void => {
  const [path = "", q = ""] = location.hash.split("?", 2)
  const params = new URLSearchParams(q)
  const portal = params.get("portal")
  if (portal === null) return
  params.delete("portal")
  const rest = params.toString()
  history.replaceState(null, "", `${location.pathname}${location.search}${path}${rest === "" ? "" : `?${rest}`}`)
  if (portal.startsWith("apt_")) signIn(portal)
}
