/**
 * Tenants: the top tenants by pending (a global token: the last gauge tick's top 100; a scoped
 * one: its own tenants) and a search by tenant id that opens the tenant's page.
 */
import { useState } from "preact/hooks"
import { api, type Principal } from "../api.js"
import { Loading, Problem } from "../components/status.js"
import * as F from "../format.js"
import { useLoad } from "../load.js"
import { href, navigate } from "../route.js"

export const Tenants = ({ principal }: { readonly principal: Principal }) => {
  const list = useLoad(api.tenants, [], 10_000)
  const [search, setSearch] = useState("")
  const open = (e: Event) => {
    e.preventDefault()
    const t = search.trim()
    if (t !== "") navigate(href(["tenants", t]))
  }
  const filter = search.trim().toLowerCase()
  const items = (list.data?.items ?? []).filter((t) => filter === "" || t.tenant.toLowerCase().includes(filter))
  return (
    <>
      <h1>Tenants</h1>
      <form class="row" role="search" onSubmit={open}>
        <label for="tenant-search">Tenant id</label>
        <input id="tenant-search" type="search" value={search} onInput={(e) => setSearch(e.currentTarget.value)} autocomplete="off" />
        <button type="submit">Open tenant</button>
      </form>
      <h2>{principal.tenants === null ? "Top tenants by pending" : "This token's tenants"}</h2>
      {list.error !== undefined && <Problem error={list.error} />}
      {list.data === undefined ? (
        list.error === undefined && <Loading />
      ) : items.length === 0 ? (
        <p class="muted">
          {principal.tenants === null
            ? "No tenant has pending rows as of the last gauge tick. Open any tenant by its id above."
            : "None of this token's tenants has been seen on this node."}
        </p>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">Tenants by pending rows</caption>
            <thead>
              <tr>
                <th scope="col">Tenant</th>
                <th scope="col" class="num">
                  Pending
                </th>
              </tr>
            </thead>
            <tbody>
              {items.map((t) => (
                <tr key={t.tenant}>
                  <td>
                    <a href={href(["tenants", t.tenant])}>{t.tenant}</a>
                  </td>
                  <td class="num">{F.count(t.pending)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {principal.tenants === null && (
        <p class="muted">The top 100 by pending among the first 10,000 active tenants, as of the node's last gauge tick.</p>
      )}
    </>
  )
}
