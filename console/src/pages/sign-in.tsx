/**
 * Sign-in: an admin token of `adminTokens`, checked with `GET /v1/whoami` before it is kept (in
 * sessionStorage). A refused token is not kept and nothing of the node is shown.
 */
import { useState } from "preact/hooks"
import { api, ApiError, type Principal } from "../api.js"
import * as Session from "../session.js"

export const SignIn = ({ onSignedIn }: { readonly onSignedIn: (p: Principal) => void }) => {
  const [token, setToken] = useState("")
  const [error, setError] = useState<string | undefined>()
  const [busy, setBusy] = useState(false)

  const submit = async (e: Event) => {
    e.preventDefault()
    const t = token.trim()
    if (t === "") return setError("Enter an admin token.")
    setBusy(true)
    setError(undefined)
    try {
      const p = await api.whoami(t)
      Session.signIn(t)
      setToken("")
      onSignedIn(p)
    } catch (err) {
      setError(
        err instanceof ApiError && err.status === 401
          ? "The node refused this token."
          : `Could not sign in: ${err instanceof Error ? err.message : String(err)}`
      )
    } finally {
      setBusy(false)
    }
  }

  return (
    <main id="main" class="sign-in">
      <h1>Ankusa console</h1>
      <form onSubmit={submit} aria-describedby="sign-in-help">
        <label for="token">Admin token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="off"
          spellcheck={false}
          value={token}
          onInput={(e) => setToken(e.currentTarget.value)}
          aria-invalid={error !== undefined}
          aria-describedby={error === undefined ? undefined : "sign-in-error"}
          required
        />
        <button type="submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        {error !== undefined && (
          <p id="sign-in-error" class="problem" role="alert">
            {error}
          </p>
        )}
      </form>
      <p id="sign-in-help" class="muted">
        A token of the node's <code>adminTokens</code>. It is kept for this tab only (sessionStorage) and sent to this node as a
        bearer header; a scoped token sees only its tenants.
      </p>
    </main>
  )
}
