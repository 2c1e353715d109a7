/**
 * The signed-in token: kept in sessionStorage (this tab only, gone when it closes), never in a
 * URL, a cookie or a log. Listeners hear a sign-out (a 401 from the API, or the button).
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
