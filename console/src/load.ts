/**
 * `useLoad`: one API read for a component, again when its inputs change and, with `everyMs`,
 * on a timer while the tab is visible. The last good answer stays shown while the next loads.
 */
import { useCallback, useEffect, useRef, useState } from "preact/hooks"
import type { ApiError } from "./api.js"

export interface Loaded<A> {
  readonly data: A | undefined
  readonly error: ApiError | Error | undefined
  readonly loading: boolean
  readonly reload: () => void
}

export const useLoad = <A>(read: () => Promise<A>, inputs: ReadonlyArray<unknown>, everyMs?: number): Loaded<A> => {
  const [state, setState] = useState<{ data: A | undefined; error: ApiError | Error | undefined; loading: boolean }>({
    data: undefined,
    error: undefined,
    loading: true
  })
  const generation = useRef(0)
  const run = useCallback(() => {
    const mine = ++generation.current
    setState((s) => ({ ...s, loading: true }))
    read().then(
      (data) => mine === generation.current && setState({ data, error: undefined, loading: false }),
      (error: Error) => mine === generation.current && setState({ data: undefined, error, loading: false })
    )
  }, inputs)
  useEffect(() => {
    run()
    if (everyMs === undefined) return
    const timer = setInterval(() => document.visibilityState === "visible" && run(), everyMs)
    return () => clearInterval(timer)
  }, [run, everyMs])
  // An answer that comes after the component left is dropped.
  useEffect(() => () => void generation.current++, [])
  return { ...state, reload: run }
}
