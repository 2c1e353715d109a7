/**
 * Newest-first paging over the API's cursors: a stack of the cursors that opened each page, so
 * "Newer" goes back and "Older" follows `next_cursor`.
 */
import { useState } from "preact/hooks"

export interface Paging {
  readonly cursor: string | null
  readonly page: number
  readonly older: (next: string) => void
  readonly newer: () => void
  readonly reset: () => void
}

export const usePaging = (): Paging => {
  const [stack, setStack] = useState<ReadonlyArray<string | null>>([null])
  return {
    cursor: stack[stack.length - 1] ?? null,
    page: stack.length,
    older: (next) => setStack((s) => [...s, next]),
    newer: () => setStack((s) => (s.length > 1 ? s.slice(0, -1) : s)),
    reset: () => setStack([null])
  }
}

export const Pager = ({ paging, next, label }: { readonly paging: Paging; readonly next: string | null; readonly label: string }) => (
  <nav class="pager" aria-label={label}>
    <button type="button" onClick={paging.newer} disabled={paging.page === 1}>
      ← Newer
    </button>
    <span class="muted">Page {paging.page}</span>
    <button type="button" onClick={() => next !== null && paging.older(next)} disabled={next === null}>
      Older →
    </button>
  </nav>
)
