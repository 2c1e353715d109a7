/**
 * The pace of the ingest bodies being read (issue 39; docs/api.md "Admission"): once a body is
 * `http.bodyGraceMs` old it must have arrived at `http.minBodyBytesPerSec` at least on average, and
 * no body may go that long without a byte. One sweep every quarter of the grace cuts those that do
 * not (408, the connection closed, their bytes of `ingest.maxBufferedBytes` freed). Admission counts
 * the bytes a body has sent, not what it declares, so a slow upload holds little, and what it holds
 * it holds for about a grace past its last progress.
 */

export interface PaceOptions {
  readonly minBytesPerSec: number
  readonly graceMs: number
}

/** A body being read: its bytes so far and when the last arrived (`performance.now()` ms). */
export interface Paced {
  started: number
  bytes: number
  lastAt: number
  /** Paused by admission at `ingest.maxBufferedBytes`: not its own slowness, so not cut meanwhile. */
  paused: boolean
  readonly cut: () => void
}

/** Whether `r` is too slow at `now`: past the grace, under the rate on average or silent for a grace. */
export const tooSlow = (r: Paced, now: number, o: PaceOptions): boolean => {
  if (r.paused) return false
  const age = now - r.started
  return age >= o.graceMs && (r.bytes < (o.minBytesPerSec * age) / 1000 || now - r.lastAt >= o.graceMs)
}

/** The sweep's period: a quarter of the grace, at least this. */
export const PACE_SWEEP_MIN_MS = 25

export const makeBodyPace = (o: PaceOptions) => {
  const reads = new Set<Paced>()
  const sweep = (now: number) => {
    for (const r of reads) {
      if (!tooSlow(r, now, o)) continue
      reads.delete(r)
      r.cut()
    }
  }
  const timer = o.minBytesPerSec > 0 ? setInterval(() => sweep(performance.now()), Math.max(PACE_SWEEP_MIN_MS, o.graceMs / 4)) : undefined
  timer?.unref()
  return {
    /** A body starts to be read at `started`; undefined when there is no rule. */
    track: (started: number, cut: () => void): Paced | undefined => {
      if (timer === undefined) return undefined
      const r: Paced = { started, bytes: 0, lastAt: started, paused: false, cut }
      reads.add(r)
      return r
    },
    done: (r: Paced | undefined): void => void (r !== undefined && reads.delete(r)),
    /** Resumed after a pause: its pace is measured from `now` again. */
    restart: (r: Paced, now: number): void => {
      r.paused = false
      r.started = now
      r.bytes = 0
      r.lastAt = now
    },
    close: (): void => clearInterval(timer)
  }
}
