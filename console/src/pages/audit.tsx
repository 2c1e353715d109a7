/** Audit: the admin actions (replay, purge, quarantine deletes, config reads), newest first. */
import { api } from "../api.js"
import { PagedTable } from "../components/paged-table.js"
import { usePaging } from "../components/pager.js"
import * as F from "../format.js"
import { useLoad } from "../load.js"

export const Audit = () => {
  const paging = usePaging()
  const list = useLoad(() => api.audit({ cursor: paging.cursor }), [paging.cursor], 15_000)
  return (
    <>
      <h1>Audit</h1>
      <PagedTable list={list} paging={paging} empty="No admin action recorded yet." label="Audit pages">
        {(items) => (
          <table>
            <thead>
              <tr>
                <th scope="col">At</th>
                <th scope="col">Token</th>
                <th scope="col">Action</th>
                <th scope="col">Tenants</th>
                <th scope="col">Parameters</th>
              </tr>
            </thead>
            <tbody>
              {items.map((a) => (
                <tr key={a.seq}>
                  <td>{F.time(a.at)}</td>
                  <td>{a.actor}</td>
                  <td>{a.action}</td>
                  <td>{a.tenants === null ? "all" : a.tenants.join(", ")}</td>
                  <td class="mono">{JSON.stringify(a.params)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </PagedTable>
    </>
  )
}
