/**
 * One endpoint's activity on the Endpoints page (docs/console.md "Endpoints"): "Send test event"
 * (`POST …/endpoints/:id/test`; the answer's hook id is shown) and "Recent attempts"
 * (`GET …/endpoints/:id/deliveries`), read when shown, on "Refresh attempts", and after a test
 * every second until the test hook's first attempt is listed (at most `FOLLOW_MS`).
 */
import { useEffect, useState } from "preact/hooks"
import { api, type Endpoint } from "../api.js"
import * as F from "../format.js"
import { useLoad } from "../load.js"
import { href } from "../route.js"
import { Loading, Note, Problem } from "./status.js"

/** Attempts shown (the node keeps at most 100 an endpoint). */
const SHOWN = 20
const FOLLOW_EVERY_MS = 1_000
const FOLLOW_MS = 20_000

const statusText = (s: number) => (s === 0 ? "no answer" : String(s))

export const Activity = ({ tenant, endpoint }: { readonly tenant: string; readonly endpoint: Endpoint }) => {
  const attempts = useLoad(() => api.endpointAttempts(tenant, endpoint.id, SHOWN), [tenant, endpoint.id])
  const [sent, setSent] = useState<{ readonly id: string; readonly at: number } | undefined>()
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<Error | undefined>()
  const items = attempts.data?.items
  const seen = sent !== undefined && items !== undefined && items.some((a) => a.hookId === sent.id)
  useEffect(() => {
    if (sent === undefined || seen) return
    const timer = setInterval(() => (Date.now() - sent.at > FOLLOW_MS ? clearInterval(timer) : attempts.reload()), FOLLOW_EVERY_MS)
    return () => clearInterval(timer)
  }, [sent, seen, attempts.reload])
  const send = async () => {
    setBusy(true)
    setError(undefined)
    try {
      const r = await api.testEndpoint(tenant, endpoint.id)
      setSent({ id: r.id, at: Date.now() })
      attempts.reload()
    } catch (err) {
      setError(err as Error)
    } finally {
      setBusy(false)
    }
  }
  return (
    <section class="activity" aria-label={`Activity of ${endpoint.id}`}>
      <div class="row">
        <button type="button" onClick={send} disabled={busy}>Send test event</button>
        <button type="button" onClick={attempts.reload}>Refresh attempts</button>
      </div>
      {sent !== undefined && (
        <Note>
          Test event sent: hook{" "}
          <a class="mono" data-test-hook href={href(["dead", sent.id])}>{sent.id}</a>
          {seen ? "." : " (no attempt listed yet)"}
        </Note>
      )}
      {error !== undefined && <Problem error={error} />}
      <h4>Recent attempts</h4>
      {attempts.error !== undefined ? (
        <Problem error={attempts.error} />
      ) : items === undefined ? (
        <Loading />
      ) : items.length === 0 ? (
        <p class="muted">No attempts yet (the log is kept in memory: a restart empties it).</p>
      ) : (
        <div class="table-wrap">
          <table class="attempts">
            <caption class="visually-hidden">Recent attempts of {endpoint.id}, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col" class="num">Status</th>
                <th scope="col" class="num">Latency</th>
                <th scope="col">Outcome</th>
                <th scope="col">Error</th>
                <th scope="col">Hook</th>
              </tr>
            </thead>
            <tbody>
              {items.map((a, i) => (
                <tr key={`${a.at}/${a.hookId}/${i}`} data-hook={a.hookId}>
                  <td>{F.time(a.at)}</td>
                  <td class="num" data-col="status">{statusText(a.status)}</td>
                  <td class="num">{F.duration(a.latencyMs / 1000)}</td>
                  <td data-col="outcome">{a.outcome}</td>
                  <td data-col="error" title={a.body ?? undefined}>
                    {a.error ?? (a.body === null ? "–" : a.body.slice(0, 80))}
                  </td>
                  <td>
                    <a class="mono" href={href(["dead", a.hookId])}>{a.hookId}</a>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  )
}
