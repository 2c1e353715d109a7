/**
 * A sink's waiting calls, round-robin by tenant (TEN-3 "fair sink slots"; docs/delivery.md "Fair
 * dispatch"): each tenant's claimed rows wait in claim order, and when a slot frees the next call
 * comes from the next tenant in turn, so a flood of one tenant delays another's call by at most one
 * slot turn. Bounded by construction: every job is a claimed row (at most `maxInflight`).
 */
export interface TenantQueue<A> {
  readonly push: (ord: number, job: A) => void
  /** The next job in turn, or undefined when none waits. */
  readonly shift: () => A | undefined
  readonly size: () => number
  readonly clear: () => void
}

export const makeTenantQueue = <A>(): TenantQueue<A> => {
  const byTenant = new Map<number, Array<A>>()
  // Tenants with jobs waiting, in turn order; `next` is the one whose turn comes first.
  let turn: Array<number> = []
  let next = 0
  let size = 0
  return {
    push: (ord, job) => {
      let q = byTenant.get(ord)
      if (q === undefined) {
        byTenant.set(ord, (q = []))
        // A tenant with nothing waiting joins at the end of the current turn.
        turn.splice(next, 0, ord)
        next = turn.length === 1 ? 0 : next + 1
      }
      q.push(job)
      size++
    },
    shift: () => {
      if (turn.length === 0) return undefined
      if (next >= turn.length) next = 0
      const ord = turn[next]!
      const q = byTenant.get(ord)!
      const job = q.shift()!
      size--
      if (q.length === 0) {
        byTenant.delete(ord)
        turn.splice(next, 1)
      } else next++
      return job
    },
    size: () => size,
    clear: () => {
      byTenant.clear()
      turn = []
      next = 0
      size = 0
    }
  }
}
