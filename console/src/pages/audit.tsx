/** Audit: the admin actions (replay, purge, quarantine deletes, config reads), newest first. */
import { api } from "../api.js"
import { Pager, usePaging } from "../components/pager.js"
import { Loading, Problem } from "../components/status.js"
import * as F from "../format.js"
import { useLoad } from "../load.js"

export const Audit = () => {
  const paging = usePaging()
  const list = useLoad(() => api.audit({ cursor: paging.cursor }), [paging.cursor], 15_000)
  return (
    <>
      <h1>Audit</h1>
      {list.error !== undefined && <Problem error={list.error} />}
      {list.data === undefined ? (
        list.error === undefined && <Loading />
      ) : list.data.items.length === 0 ? (
        <p class="muted">No admin action recorded yet.</p>
      ) : (
        <>
          <div class="table-wrap">
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
                {list.data.items.map((a) => (
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
          </div>
          <Pager paging={paging} next={list.data.next_cursor} label="Audit pages" />
        </>
      )}
    </>
  )
}
