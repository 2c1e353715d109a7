/** Read statistics by family, so tests can prove what a code path did not read. */
import { Effect } from "effect"
import type { StoreStats } from "./store.js"

export const makeStats = () => {
  let scans: Record<string, number> = {}
  let pointReads: Record<string, number> = {}
  return {
    scan: (family: string) => {
      scans[family] = (scans[family] ?? 0) + 1
    },
    point: (family: string, n: number) => {
      pointReads[family] = (pointReads[family] ?? 0) + n
    },
    snapshot: Effect.sync((): StoreStats => ({ scans: { ...scans }, pointReads: { ...pointReads } })),
    reset: Effect.sync(() => {
      scans = {}
      pointReads = {}
    })
  }
}
