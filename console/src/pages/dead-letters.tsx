/**
 * Dead letters: newest first across the token's scope or filtered, paged, with replay of the
 * selected rows or of the whole filter. The API filters by tenant (`GET /v1/dlq`); source, sink
 * and time are applied here to the pages it returns, reading on (at most `SCAN_MAX` rows a
 * page) until a page of matches is found. Replay sends the API's own filter (`POST
 * /v1/dlq/replay`): tenant, source and time, or the selected rows' hook ids.
 */
import { useState } from "preact/hooks"
import { api, type DeadItem, type ReplayFilter } from "../api.js"
import { Confirm } from "../components/confirm.js"
import { DeadTable, rowKey } from "../components/dead-table.js"
import { Pager, usePaging } from "../components/pager.js"
import { Loading, Note, Problem } from "../components/status.js"
import * as F from "../format.js"
import { useLoad } from "../load.js"
import { href, navigate } from "../route.js"

const PAGE = 50
const SCAN_MAX = 2_000

interface Filter {
  readonly tenant: string
  readonly source: string
  readonly sink: string
  /** `datetime-local` values (the browser's time zone). */
  readonly from: string
  readonly to: string
}

const FIELDS = ["tenant", "source", "sink", "from", "to"] as const

const filterOf = (q: URLSearchParams): Filter => ({
  tenant: q.get("tenant") ?? "",
  source: q.get("source") ?? "",
  sink: q.get("sink") ?? "",
  from: q.get("from") ?? "",
  to: q.get("to") ?? ""
})

const matches = (d: DeadItem, f: Filter, from: number | undefined, to: number | undefined) => {
  const at = Date.parse(d.dead_at)
  return (
    (f.source === "" || d.source === f.source) &&
    (f.sink === "" || d.sink === f.sink) &&
    (from === undefined || at >= from) &&
    (to === undefined || at <= to)
  )
}

/** One page of matches from `cursor` on, and where the next one starts. */
const scan = async (f: Filter, cursor: string | null) => {
  const from = F.fromLocalInput(f.from)
  const to = F.fromLocalInput(f.to)
  const local = f.source !== "" || f.sink !== "" || from !== undefined || to !== undefined
  const items: Array<DeadItem> = []
  let next = cursor
  let scanned = 0
  do {
    const page = await api.dlq({ tenant: f.tenant || undefined, limit: PAGE, cursor: next })
    scanned += page.items.length
    next = page.next_cursor
    for (const d of page.items) if (matches(d, f, from, to)) items.push(d)
    // Newest first: past `from`, everything older is out of the filter too.
    const oldest = page.items[page.items.length - 1]
    if (from !== undefined && oldest !== undefined && Date.parse(oldest.dead_at) < from) next = null
  } while (local && next !== null && items.length < PAGE && scanned < SCAN_MAX)
  return { items, next, scanned }
}

/** The replay body of the whole filter, or why there is none. */
const replayFilterOf = (f: Filter): ReplayFilter | string => {
  if (f.sink !== "") return "The replay API has no sink filter: select the rows to replay instead."
  const body: { tenant?: string; source?: string; from?: number; to?: number } = {}
  if (f.tenant !== "") body.tenant = f.tenant
  if (f.source !== "") body.source = f.source
  const from = F.fromLocalInput(f.from)
  const to = F.fromLocalInput(f.to)
  if (from !== undefined) body.from = from
  if (to !== undefined) body.to = to
  return Object.keys(body).length === 0 ? "Set a tenant, source or time filter to replay the whole filter." : body
}

const describe = (f: Filter) =>
  FIELDS.filter((k) => f[k] !== "")
    .map((k) => `${k} ${k === "from" || k === "to" ? F.time(new Date(f[k]).toISOString()) : f[k]}`)
    .join(", ")

const FilterForm = ({ filter }: { readonly filter: Filter }) => {
  const [draft, setDraft] = useState<Filter>(filter)
  const set = (k: keyof Filter) => (e: Event) => setDraft({ ...draft, [k]: (e.currentTarget as HTMLInputElement).value })
  const apply = (e: Event) => {
    e.preventDefault()
    navigate(href(["dead"], { ...draft }))
  }
  return (
    <form class="filters" onSubmit={apply} aria-label="Dead-letter filters">
      {(["tenant", "source", "sink"] as const).map((k) => (
        <div class="field" key={k}>
          <label for={`f-${k}`}>{k[0]!.toUpperCase() + k.slice(1)}</label>
          <input id={`f-${k}`} value={draft[k]} onInput={set(k)} autocomplete="off" />
        </div>
      ))}
      {(["from", "to"] as const).map((k) => (
        <div class="field" key={k}>
          <label for={`f-${k}`}>{k === "from" ? "Dead from" : "Dead to"}</label>
          <input id={`f-${k}`} type="datetime-local" step="1" value={draft[k]} onInput={set(k)} />
        </div>
      ))}
      <div class="field actions">
        <button type="submit">Apply</button>
        <a href={href(["dead"])}>Clear</a>
      </div>
    </form>
  )
}

type Asking = { readonly kind: "selected"; readonly ids: ReadonlyArray<string>; readonly rows: number } | { readonly kind: "filter"; readonly body: ReplayFilter }

const Results = ({ filter }: { readonly filter: Filter }) => {
  const paging = usePaging()
  const page = useLoad(() => scan(filter, paging.cursor), [paging.cursor])
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set())
  const [asking, setAsking] = useState<Asking | undefined>()
  const [result, setResult] = useState<string | undefined>()
  const [error, setError] = useState<Error | undefined>()
  const items = page.data?.items ?? []
  const select = (keys: ReadonlyArray<string>, on: boolean) =>
    setSelected((s) => {
      const n = new Set(s)
      for (const k of keys) on ? n.add(k) : n.delete(k)
      return n
    })
  const chosen = items.filter((d) => selected.has(rowKey(d)))
  const whole = replayFilterOf(filter)

  const replay = async (a: Asking) => {
    setAsking(undefined)
    setError(undefined)
    try {
      const body: ReplayFilter = a.kind === "filter" ? a.body : filter.tenant === "" ? { ids: a.ids } : { ids: a.ids, tenant: filter.tenant }
      const r = await api.replay(body)
      setResult(`Revived ${F.count(r.revived)} row${r.revived === 1 ? "" : "s"} (${F.count(r.scanned)} examined).` + (r.done ? "" : " More remain: replay again."))
      setSelected(new Set())
    } catch (e) {
      setError(e as Error)
    }
    page.reload()
  }

  return (
    <>
      <div class="row actions">
        <button
          type="button"
          disabled={chosen.length === 0}
          onClick={() => setAsking({ kind: "selected", ids: [...new Set(chosen.map((d) => d.id))], rows: chosen.length })}
        >
          Replay selected ({chosen.length})
        </button>
        <button type="button" disabled={typeof whole === "string"} onClick={() => typeof whole !== "string" && setAsking({ kind: "filter", body: whole })}>
          Replay the whole filter
        </button>
        {typeof whole === "string" && <span class="muted">{whole}</span>}
      </div>
      {result !== undefined && <Note>{result}</Note>}
      {error !== undefined && <Problem error={error} />}
      {page.error !== undefined && <Problem error={page.error} />}
      {page.data === undefined ? (
        page.error === undefined && <Loading />
      ) : (
        <>
          <DeadTable items={items} label="Dead rows, newest first" selected={selected} onSelect={select} />
          <p class="muted">
            {F.count(items.length)} row{items.length === 1 ? "" : "s"} shown; {F.count(page.data.scanned)} examined.
          </p>
          <Pager paging={paging} next={page.data.next} label="Dead-letter pages" />
        </>
      )}
      {asking !== undefined && (
        <Confirm title="Replay dead rows?" action="Replay" onConfirm={() => replay(asking)} onCancel={() => setAsking(undefined)}>
          {asking.kind === "selected" ? (
            <p>
              Revive the {asking.rows} selected row{asking.rows === 1 ? "" : "s"} ({asking.ids.length} hook
              {asking.ids.length === 1 ? "" : "s"}) as first attempts, due now. Replay is by hook: every dead row of these hooks is
              revived, whatever its sink.
            </p>
          ) : (
            <p>Revive every dead row matching {describe(filter)} as a first attempt, due now.</p>
          )}
        </Confirm>
      )}
    </>
  )
}

export const DeadLetters = ({ query }: { readonly query: URLSearchParams }) => {
  const filter = filterOf(query)
  const key = FIELDS.map((k) => filter[k]).join("\u0000")
  return (
    <>
      <h1>Dead letters</h1>
      <FilterForm key={key} filter={filter} />
      <Results key={key} filter={filter} />
    </>
  )
}
