/** Sinks: each sink's delivery outcomes and call latency since the process started (`GET /v1/stats/sinks`). */
import { api, type Breaker, type Principal } from "../api.js"
import { Loading, Problem } from "../components/status.js"
import * as F from "../format.js"
import { useLoad } from "../load.js"

/** A breaker's state, its failed calls since the last success, and when an open one probes. */
export const breakerText = (b: Breaker | null) =>
  b === null
    ? "–"
    : `${b.state}${b.failures > 0 ? `, ${F.count(b.failures)} failed since the last success` : ""}${b.openUntil === null ? "" : `, probe at ${F.time(b.openUntil)}`}`

const Table = () => {
  const stats = useLoad(api.sinks, [], 10_000)
  if (stats.data === undefined) return stats.error !== undefined ? <Problem error={stats.error} /> : <Loading />
  return (
    <>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Sink</th>
              <th scope="col" class="num">Delivered</th>
              <th scope="col" class="num">Retried</th>
              <th scope="col" class="num">Dead</th>
              <th scope="col" class="num">Dropped</th>
              <th scope="col" class="num">p50</th>
              <th scope="col" class="num">p99</th>
              <th scope="col" class="num">Mean</th>
              <th scope="col">Breaker</th>
              <th scope="col">Last success</th>
              <th scope="col">Last failure</th>
            </tr>
          </thead>
          <tbody>
            {stats.data.items.map((s) => (
              <tr key={s.sink} data-sink={s.sink}>
                <td>{s.sink}</td>
                <td class="num">{F.count(s.delivered)}</td>
                <td class="num">{F.count(s.retried)}</td>
                <td class="num">{F.count(s.dead)}</td>
                <td class="num">{F.count(s.dropped)}</td>
                <td class="num">{F.duration(s.p50_seconds)}</td>
                <td class="num">{F.duration(s.p99_seconds)}</td>
                <td class="num">{F.duration(s.mean_seconds)}</td>
                <td data-col="breaker">{breakerText(s.breaker)}</td>
                <td data-col="last-success">{s.breaker?.lastSuccessAt == null ? "–" : F.time(s.breaker.lastSuccessAt)}</td>
                <td data-col="last-failure" title={s.last_failure?.body ?? undefined}>
                  {s.last_failure === null
                    ? "–"
                    : `${F.time(s.last_failure.at)}: ${s.last_failure.status === 0 ? (s.last_failure.error ?? "no answer") : s.last_failure.status}${
                        s.last_failure.body === null || s.last_failure.body === "" ? "" : ` ${s.last_failure.body.slice(0, 120)}`
                      }`}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p class="muted">
        Since the node started ({F.time(stats.data.since)}). Latency is one sink call, start to answer or error; p50 and p99 are
        estimated from the histogram's buckets. The breaker and the last success are in the node's memory (a restart starts every
        breaker closed). The last failure is the newest failed call the node still remembers (its status
        and the first 4 KiB of the answer's body, or why there was no answer).
      </p>
    </>
  )
}

export const Sinks = ({ principal }: { readonly principal: Principal }) => (
  <>
    <h1>Sinks</h1>
    {principal.tenants === null ? <Table /> : <p class="muted">Per-sink figures count every tenant's deliveries: they need a global token.</p>}
  </>
)
