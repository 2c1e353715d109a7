/** How numbers, sizes, times and durations read on the page. */
const integer = new Intl.NumberFormat("en")

export const count = (n: number | null | undefined): string => (n === null || n === undefined ? "–" : integer.format(n))

export const rate = (n: number): string => (n >= 100 ? integer.format(Math.round(n)) : n.toFixed(n >= 10 ? 1 : 2))

export const bytes = (n: number): string => {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"]
  let v = n
  let u = 0
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  return u === 0 ? `${integer.format(v)} B` : `${v.toFixed(v >= 100 ? 0 : 1)} ${units[u]}`
}

/** A duration in seconds as "850 ms", "42 s", "3 min 5 s", "2 h 10 min". */
export const duration = (seconds: number | null): string => {
  if (seconds === null) return "–"
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`
  const s = Math.round(seconds)
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`
}

/** An ISO time as the browser's local date and time, to the second. */
export const time = (iso: string | null): string => {
  if (iso === null) return "–"
  const d = new Date(iso)
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString("en-GB", { dateStyle: "short", timeStyle: "medium" })
}

/** `<input type="datetime-local">` value to ms since the epoch (local time), undefined when empty. */
export const fromLocalInput = (value: string): number | undefined => {
  if (value === "") return undefined
  const ms = new Date(value).getTime()
  return Number.isNaN(ms) ? undefined : ms
}
