/** What a page shows while it loads, when a read is refused, and after an action. */
import type { ComponentChildren } from "preact"
import { ApiError } from "../api.js"

export const Loading = () => (
  <p class="muted" role="status">
    Loading…
  </p>
)

/** A refusal in words: the API's code and message (403: out of the token's scope; 404: unknown). */
export const Problem = ({ error }: { readonly error: Error }) => (
  <div class="problem" role="alert">
    {error instanceof ApiError ? (
      <>
        <strong>{error.status === 403 ? "Not allowed" : error.status === 404 ? "Not found" : `Error ${error.status}`}</strong>{" "}
        <code>{error.code}</code>: {error.message}
      </>
    ) : (
      <>
        <strong>Could not reach the node</strong>: {error.message}
      </>
    )}
  </div>
)

/** A polite live region: screen readers announce what an action did. */
export const Note = ({ children, kind = "ok" }: { readonly children: ComponentChildren; readonly kind?: "ok" | "warn" }) => (
  <p class={`note ${kind}`} role="status" aria-live="polite">
    {children}
  </p>
)
