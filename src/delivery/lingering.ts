/**
 * Lingering markers (docs/delivery.md "The tick", step 5): TEN-1 §5 never deletes a marker of the
 * current second, so a visit that claims a tenant's rows of this second leaves their marker. The
 * tenants whose visits did so are kept here, at most `max` a second (LINGERING_MAX), and handed
 * back once that second has passed: each joins the round with the marker as a cleanup candidate,
 * so a tenant that kept up with its hooks leaves no marker for the discovery slice to find seconds
 * later. Past the bound the slice finds the rest, as it finds every marker. Memory only.
 */
export const makeLingering = (max: number) => {
  let bucket = -1
  const ords = new Set<number>()
  return {
    /** The tenants a tick visited in second `now`, each with its cleanup candidates. */
    left: (now: number, visited: ReadonlyArray<{ readonly ord: number; readonly markers: ReadonlyArray<number> }>): void => {
      if (now !== bucket) ords.clear()
      bucket = now
      for (const v of visited) {
        if (ords.size >= max) return
        if (v.markers.includes(now)) ords.add(v.ord)
      }
    },
    /** Once second `bucket` has passed (`now` is later): its tenants, each once. */
    due: (now: number): ReadonlyArray<readonly [ord: number, bucket: number]> => {
      if (ords.size === 0 || bucket >= now) return []
      const out = [...ords].map((ord) => [ord, bucket] as const)
      ords.clear()
      return out
    },
    size: (): number => ords.size
  }
}
