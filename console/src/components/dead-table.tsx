/** Dead rows as a table, newest first, each linking to its hook's detail; rows can be selected for replay. */
import type { DeadItem } from "../api.js"
import * as F from "../format.js"
import { href } from "../route.js"

export const rowKey = (d: DeadItem) => `${d.id}/${d.sink_index}`

export interface DeadTableProps {
  readonly items: ReadonlyArray<DeadItem>
  readonly label: string
  /** With a selection: a checkbox a row and one for the whole page. */
  readonly selected?: ReadonlySet<string>
  readonly onSelect?: (keys: ReadonlyArray<string>, on: boolean) => void
}

export const DeadTable = ({ items, label, selected, onSelect }: DeadTableProps) => {
  if (items.length === 0) return <p class="muted">No dead rows.</p>
  const selectable = selected !== undefined && onSelect !== undefined
  const all = selectable && items.every((d) => selected.has(rowKey(d)))
  return (
    <div class="table-wrap">
      <table class="dead">
        <caption class="visually-hidden">{label}</caption>
        <thead>
          <tr>
            {selectable && (
              <th scope="col">
                <input
                  type="checkbox"
                  aria-label="Select every row of this page"
                  checked={all}
                  onChange={(e) => onSelect(items.map(rowKey), e.currentTarget.checked)}
                />
              </th>
            )}
            <th scope="col">Dead at</th>
            <th scope="col">Tenant</th>
            <th scope="col">Source</th>
            <th scope="col">Sink</th>
            <th scope="col" class="num">
              Attempts
            </th>
            <th scope="col" class="num">
              Last status
            </th>
            <th scope="col">Hook</th>
          </tr>
        </thead>
        <tbody>
          {items.map((d) => (
            <tr key={rowKey(d)} data-id={d.id}>
              {selectable && (
                <td>
                  <input
                    type="checkbox"
                    aria-label={`Select ${d.id} to ${d.sink ?? `sink ${d.sink_index}`}`}
                    checked={selected.has(rowKey(d))}
                    onChange={(e) => onSelect([rowKey(d)], e.currentTarget.checked)}
                  />
                </td>
              )}
              <td>{F.time(d.dead_at)}</td>
              <td>{d.tenant ?? "–"}</td>
              <td>{d.source}</td>
              <td>{d.sink ?? `#${d.sink_index}`}</td>
              <td class="num">{F.count(d.attempts)}</td>
              <td class="num">{d.last_status === null ? "–" : d.last_status === 0 ? "no answer" : d.last_status}</td>
              <td>
                <a class="mono" href={href(["dead", d.id])}>
                  {d.id}
                </a>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}
