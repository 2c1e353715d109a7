/**
 * A dead hook's detail (`GET /v1/dlq/:id`): where it came from, its event type, each sink's row
 * (attempts, last status, last attempt, size), the body's size and a capped preview, and replay
 * of the hook.
 */
import { useState } from "preact/hooks"
import { api } from "../api.js"
import { Confirm } from "../components/confirm.js"
import { Loading, Note, Problem } from "../components/status.js"
import * as F from "../format.js"
import { useLoad } from "../load.js"
import { href } from "../route.js"

export const DeadHook = ({ id }: { readonly id: string }) => {
  const hook = useLoad(() => api.hook(id), [id])
  const [asking, setAsking] = useState(false)
  const [result, setResult] = useState<string | undefined>()
  const [error, setError] = useState<Error | undefined>()
  const replay = async () => {
    setAsking(false)
    try {
      const r = await api.replay({ ids: [id] })
      setResult(`Revived ${F.count(r.revived)} row${r.revived === 1 ? "" : "s"}.`)
    } catch (e) {
      setError(e as Error)
    }
    hook.reload()
  }
  const h = hook.data
  return (
    <>
      <h1>
        Hook <span class="mono">{id}</span>
      </h1>
      <p>
        <a href={href(["dead"])}>← Dead letters</a>
      </p>
      {h === undefined ? (
        hook.error !== undefined ? <Problem error={hook.error} /> : <Loading />
      ) : (
        <>
          <dl class="facts">
            <dt>Tenant</dt>
            <dd>
              <a href={href(["tenants", h.tenant])}>{h.tenant}</a>
            </dd>
            <dt>Source</dt>
            <dd>{h.source}</dd>
            <dt>Received</dt>
            <dd>{F.time(h.received_at)}</dd>
            <dt>Event type</dt>
            <dd data-event-type>{h.event_type ?? "none"}</dd>
            <dt>Content type</dt>
            <dd>{h.content_type}</dd>
            <dt>Body</dt>
            <dd>{F.bytes(h.body_bytes)}</dd>
          </dl>
          <h2>Deliveries</h2>
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Sink</th>
                  <th scope="col">Row</th>
                  <th scope="col" class="num">
                    Attempts
                  </th>
                  <th scope="col" class="num">
                    Last status
                  </th>
                  <th scope="col">Last attempt</th>
                  <th scope="col" class="num">
                    Size
                  </th>
                </tr>
              </thead>
              <tbody>
                {h.deliveries.map((d) => (
                  <tr key={d.sink_index}>
                    <td>{d.sink ?? `#${d.sink_index}`}</td>
                    <td>{d.exists ? "kept" : "gone (delivered or purged)"}</td>
                    <td class="num">{F.count(d.attempts)}</td>
                    <td class="num">{d.last_status === null ? "–" : d.last_status === 0 ? "no answer (timeout or connection error)" : d.last_status}</td>
                    <td>{F.time(d.last_attempt_at)}</td>
                    <td class="num">{d.size === null ? "–" : F.bytes(d.size)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <h2>Body preview</h2>
          <p class="muted">
            {h.body_truncated ? `The first ${F.bytes(2048)} of ${F.bytes(h.body_bytes)}` : "The whole body"}
            {h.body_preview_encoding === "base64" ? ", base64 (not UTF-8 text)" : ""}.
          </p>
          <pre class="preview" tabIndex={0} aria-label="Body preview">
            {h.body_preview}
          </pre>
          {Object.keys(h.headers).length > 0 && (
            <>
              <h2>Kept headers</h2>
              <dl class="facts">
                {Object.entries(h.headers).map(([k, v]) => (
                  <div key={k}>
                    <dt>{k}</dt>
                    <dd>{v}</dd>
                  </div>
                ))}
              </dl>
            </>
          )}
          <button type="button" onClick={() => setAsking(true)}>
            Replay this hook…
          </button>
          {result !== undefined && <Note>{result}</Note>}
          {error !== undefined && <Problem error={error} />}
          {asking && (
            <Confirm title="Replay this hook?" action="Replay" onConfirm={replay} onCancel={() => setAsking(false)}>
              <p>Revive every dead row of hook {id} as a first attempt, due now.</p>
            </Confirm>
          )}
        </>
      )}
    </>
  )
}
