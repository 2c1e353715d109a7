/** Quarantine: requests that failed verification, newest first, and the purge of one tenant's. */
import { useState } from "preact/hooks"
import { api } from "../api.js"
import { Confirm } from "../components/confirm.js"
import { PagedTable } from "../components/paged-table.js"
import { usePaging } from "../components/pager.js"
import { Note, Problem } from "../components/status.js"
import * as F from "../format.js"
import { useLoad } from "../load.js"

const bodyBytes = (b64: string) => Math.floor((b64.length * 3) / 4) - (b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0)

export const Quarantine = () => {
  const paging = usePaging()
  const list = useLoad(() => api.quarantine({ cursor: paging.cursor }), [paging.cursor])
  const [tenant, setTenant] = useState("")
  const [asking, setAsking] = useState(false)
  const [result, setResult] = useState<string | undefined>()
  const [error, setError] = useState<Error | undefined>()
  const purge = async () => {
    setAsking(false)
    setError(undefined)
    try {
      const r = await api.quarantineDelete(tenant.trim())
      setResult(`Deleted ${F.count(r.deleted)} quarantined request${r.deleted === 1 ? "" : "s"} of ${tenant.trim()}.`)
      paging.reset()
    } catch (e) {
      setError(e as Error)
    }
    list.reload()
  }
  return (
    <>
      <h1>Quarantine</h1>
      <p class="muted">Requests whose signature failed verification: kept for inspection, never delivered.</p>
      <PagedTable list={list} paging={paging} empty="Nothing is quarantined." label="Quarantine pages">
        {(items) => (
          <table>
            <thead>
              <tr>
                <th scope="col">At</th>
                <th scope="col">Tenant</th>
                <th scope="col">Source</th>
                <th scope="col">Reason</th>
                <th scope="col" class="num">
                  Body
                </th>
              </tr>
            </thead>
            <tbody>
              {items.map((q, i) => (
                <tr key={`${q.at}/${i}`}>
                  <td>{F.time(q.at)}</td>
                  <td>{q.tenant}</td>
                  <td>{q.source}</td>
                  <td>{q.reason}</td>
                  <td class="num">{F.bytes(bodyBytes(q.body_base64))}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </PagedTable>
      <section class="panel" aria-labelledby="q-purge-title">
        <h2 id="q-purge-title">Purge a tenant's quarantine</h2>
        <form class="row" onSubmit={(e) => (e.preventDefault(), tenant.trim() !== "" && (setResult(undefined), setAsking(true)))}>
          <label for="q-tenant">Tenant id</label>
          <input id="q-tenant" value={tenant} onInput={(e) => setTenant(e.currentTarget.value)} autocomplete="off" required />
          <button type="submit" class="danger">
            Purge…
          </button>
        </form>
        {result !== undefined && <Note>{result}</Note>}
        {error !== undefined && <Problem error={error} />}
      </section>
      {asking && (
        <Confirm title={`Purge the quarantine of ${tenant.trim()}?`} action="Delete" onConfirm={purge} onCancel={() => setAsking(false)}>
          <p>
            This deletes every quarantined request of tenant <strong>{tenant.trim()}</strong>. It cannot be undone.
          </p>
        </Confirm>
      )}
    </>
  )
}
