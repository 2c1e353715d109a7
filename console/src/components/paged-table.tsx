/**
 * A page of a cursor-paged list (`useLoad` of an API page) as a table: a refusal, Loading, the
 * empty message, or the table `children` draws for the page's items with the pager under it.
 */
import type { ComponentChildren } from "preact"
import type { Page } from "../api.js"
import type { Loaded } from "../load.js"
import { Pager, type Paging } from "./pager.js"
import { Loading, Problem } from "./status.js"

export interface PagedTableProps<A> {
  readonly list: Loaded<Page<A>>
  readonly paging: Paging
  /** What shows when the list has no item. */
  readonly empty: string
  /** The pager's name for screen readers. */
  readonly label: string
  readonly children: (items: ReadonlyArray<A>) => ComponentChildren
}

export const PagedTable = <A,>({ list, paging, empty, label, children }: PagedTableProps<A>) => (
  <>
    {list.error !== undefined && <Problem error={list.error} />}
    {list.data === undefined ? (
      list.error === undefined && <Loading />
    ) : list.data.items.length === 0 ? (
      <p class="muted">{empty}</p>
    ) : (
      <>
        <div class="table-wrap">{children(list.data.items)}</div>
        <Pager paging={paging} next={list.data.next_cursor} label={label} />
      </>
    )}
  </>
)
