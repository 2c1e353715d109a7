/**
 * One tenant: its seven counters, its limits (dispatch and admission; an overridden one says so),
 * its newest dead rows, its held keys (held-keys.tsx), and purge, after a confirmation that names
 * the tenant and how many rows of each kind will be deleted; then its erase (tenant-erase.tsx).
 */
import { useState } from "preact/hooks"
import { api, type Counters, type TenantLimits } from "../api.js"
import { Confirm } from "../components/confirm.js"
import { DeadTable } from "../components/dead-table.js"
import { HeldKeys } from "../components/held-keys.js"
import { Stats } from "../components/stats.js"
import { Loading, Note, Problem } from "../components/status.js"
import * as F from "../format.js"
import { useLoad } from "../load.js"
import { href } from "../route.js"
import { EraseTenant } from "./tenant-erase.js"

type Kind = "pending" | "dead"

const counterStats = (c: Counters) => [
  { key: "pending", label: "Pending", value: F.count(c.pending) },
  { key: "scheduled", label: "Scheduled", value: F.count(c.scheduled) },
  { key: "inflight", label: "Inflight", value: F.count(c.inflight) },
  { key: "dead", label: "Dead", value: F.count(c.dead) },
  { key: "bytes", label: "Bytes", value: F.bytes(c.bytes) },
  { key: "archive_pending", label: "Archive pending", value: F.count(c.archive_pending) },
  { key: "waiting", label: "Waiting behind a key", value: F.count(c.waiting) }
]

const unlimited = (n: number, shown: string) => (n === 0 ? "unlimited" : shown)

const limitStats = (c: Counters) => {
  const l = c.limits
  const stat = (key: keyof TenantLimits, label: string, value: string) => ({
    key,
    label,
    value: c.limits_override[key] === undefined ? value : `${value} (override)`,
    hint: c.limits_override[key] === undefined ? "the configured default (tenants.limits)" : "this tenant's override"
  })
  return [
    stat("weight", "Weight", F.count(l.weight)),
    stat("maxInflight", "Max inflight", unlimited(l.maxInflight, F.count(l.maxInflight))),
    stat("ratePerSec", "Deliveries / s", unlimited(l.ratePerSec, F.rate(l.ratePerSec))),
    stat("ingestPerSec", "Ingest / s", unlimited(l.ingestPerSec, F.rate(l.ingestPerSec))),
    stat("maxQueuedBytes", "Queued bytes quota", unlimited(l.maxQueuedBytes, F.bytes(l.maxQueuedBytes)))
  ]
}

const Purge = ({ counters, onDone }: { readonly counters: Counters; readonly onDone: () => void }) => {
  const [kinds, setKinds] = useState<ReadonlySet<Kind>>(new Set<Kind>(["pending", "dead"]))
  const [asking, setAsking] = useState(false)
  const [result, setResult] = useState<string | undefined>()
  const [error, setError] = useState<Error | undefined>()
  const toggle = (k: Kind) => setKinds((s) => (s.has(k) ? new Set([...s].filter((x) => x !== k)) : new Set([...s, k])))
  const waiting = counters.pending + counters.scheduled
  const what = [
    kinds.has("pending") ? `${F.count(waiting)} waiting row${waiting === 1 ? "" : "s"} (${F.count(counters.pending)} pending, ${F.count(counters.scheduled)} scheduled)` : undefined,
    kinds.has("dead") ? `${F.count(counters.dead)} dead row${counters.dead === 1 ? "" : "s"}` : undefined
  ].filter((x) => x !== undefined)
  const run = async () => {
    setAsking(false)
    setError(undefined)
    try {
      const r = await api.purge(counters.tenant, [...kinds])
      setResult(
        `Purged ${F.count(r.purged.pending)} waiting and ${F.count(r.purged.dead)} dead rows of ${counters.tenant}.` +
          (r.done ? "" : " More remain: purge again.")
      )
    } catch (e) {
      setError(e as Error)
    }
    onDone()
  }
  return (
    <section aria-labelledby="purge-title" class="panel">
      <h2 id="purge-title">Purge</h2>
      <fieldset>
        <legend>Rows to delete</legend>
        <label>
          <input type="checkbox" checked={kinds.has("pending")} onChange={() => toggle("pending")} /> Waiting (pending and
          scheduled retries)
        </label>
        <label>
          <input type="checkbox" checked={kinds.has("dead")} onChange={() => toggle("dead")} /> Dead
        </label>
      </fieldset>
      <button type="button" class="danger" disabled={kinds.size === 0} onClick={() => (setResult(undefined), setAsking(true))}>
        Purge…
      </button>
      {result !== undefined && <Note>{result}</Note>}
      {error !== undefined && <Problem error={error} />}
      {asking && (
        <Confirm title={`Purge tenant ${counters.tenant}?`} action="Delete rows" onConfirm={run} onCancel={() => setAsking(false)}>
          <p>
            This deletes {what.join(" and ")} of tenant <strong>{counters.tenant}</strong>, as counted now. Rows inflight are
            left alone. Deleted rows are not delivered and cannot be replayed.
          </p>
        </Confirm>
      )}
    </section>
  )
}

export const Tenant = ({ tenant }: { readonly tenant: string }) => {
  const counters = useLoad(() => api.tenant(tenant), [tenant], 3_000)
  const dead = useLoad(() => api.dlq({ tenant, limit: 20 }), [tenant], 10_000)
  const reload = () => {
    counters.reload()
    dead.reload()
  }
  return (
    <>
      <h1>
        Tenant <span class="mono">{tenant}</span>
      </h1>
      {counters.data === undefined ? (
        counters.error !== undefined ? <Problem error={counters.error} /> : <Loading />
      ) : (
        <>
          <Stats label={`Counters of ${tenant}`} stats={counterStats(counters.data)} />
          <section aria-labelledby="tenant-limits-title">
            <h2 id="tenant-limits-title">Limits</h2>
            <Stats label={`Limits of ${tenant}`} stats={limitStats(counters.data)} />
          </section>
          <section aria-labelledby="tenant-dead-title">
            <h2 id="tenant-dead-title">Newest dead rows</h2>
            {dead.error !== undefined && <Problem error={dead.error} />}
            {dead.data !== undefined && <DeadTable items={dead.data.items} label={`Dead rows of ${tenant}`} />}
            <p>
              <a href={href(["dead"], { tenant })}>All dead letters of {tenant}: filter, page, replay</a>
            </p>
          </section>
          <HeldKeys tenant={tenant} />
          <Purge counters={counters.data} onDone={reload} />
        </>
      )}
      <EraseTenant tenant={tenant} onChange={reload} />
    </>
  )
}
