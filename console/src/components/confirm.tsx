/**
 * A confirmation before anything is deleted or revived: a modal <dialog> (focus stays in it,
 * Escape cancels) that says exactly what will happen, with Cancel focused first.
 */
import type { ComponentChildren } from "preact"
import { useEffect, useRef } from "preact/hooks"

export interface ConfirmProps {
  readonly title: string
  readonly children: ComponentChildren
  readonly action: string
  readonly onConfirm: () => void
  readonly onCancel: () => void
}

export const Confirm = ({ title, children, action, onConfirm, onCancel }: ConfirmProps) => {
  const ref = useRef<HTMLDialogElement>(null)
  useEffect(() => {
    const d = ref.current
    if (d !== null && !d.open) d.showModal()
    return () => d?.close()
  }, [])
  return (
    <dialog ref={ref} class="confirm" aria-labelledby="confirm-title" onCancel={(e) => (e.preventDefault(), onCancel())}>
      <h2 id="confirm-title">{title}</h2>
      <div class="confirm-body">{children}</div>
      <div class="actions">
        <button type="button" autofocus onClick={onCancel}>
          Cancel
        </button>
        <button type="button" class="danger" onClick={onConfirm}>
          {action}
        </button>
      </div>
    </dialog>
  )
}
