/**
 * A tenant's endpoints (docs/console.md "Endpoints"): the self-service page of a scoped token
 * or a portal token. List, create, edit, disable or enable, delete (confirmed), reveal the
 * secret (shown once on create), send a test event and see the recent attempts (Activity,
 * components/endpoint-activity.tsx), and the tenant's newest dead letters with a way to replay
 * them on the Dead letters page. Everything goes through `…/v1/tenants/:tenant/endpoints`.
 */
import { useState } from "preact/hooks"
import { api, type Endpoint, type EndpointInput, type Principal } from "../api.js"
import { Confirm } from "../components/confirm.js"
import { DeadTable } from "../components/dead-table.js"
import { Activity } from "../components/endpoint-activity.js"
import { Loading, Note, Problem } from "../components/status.js"
import * as F from "../format.js"
import { useLoad } from "../load.js"
import { breakerText } from "./sinks.js"
import { href } from "../route.js"

interface Draft {
  readonly url: string
  readonly description: string
  /** Comma- or space-separated event types and prefixes (`invoice.*`). */
  readonly eventTypes: string
  /** One `Name: value` a line. */
  readonly headers: string
  readonly ratePerSec: string
  readonly concurrency: string
}

const EMPTY: Draft = { url: "", description: "", eventTypes: "", headers: "", ratePerSec: "0", concurrency: "4" }

const draftOf = (e: Endpoint): Draft => ({
  url: e.url,
  description: e.description,
  eventTypes: e.eventTypes.join(", "),
  headers: Object.entries(e.headers).map(([k, v]) => `${k}: ${v}`).join("\n"),
  ratePerSec: String(e.ratePerSec),
  concurrency: String(e.concurrency)
})

/** The body the API takes; the node checks every field and names the one it refuses. */
const inputOf = (d: Draft): EndpointInput => ({
  url: d.url.trim(),
  description: d.description,
  eventTypes: d.eventTypes.split(/[\s,]+/).filter((t) => t !== ""),
  headers: Object.fromEntries(
    d.headers.split("\n").filter((l) => l.trim() !== "").map((l) => {
      const i = l.indexOf(":")
      return i < 0 ? [l.trim(), ""] : [l.slice(0, i).trim(), l.slice(i + 1).trim()]
    })
  ),
  ratePerSec: Number(d.ratePerSec),
  concurrency: Number(d.concurrency)
})

const Field = ({ id, label, value, onInput, hint, area }: {
  readonly id: string
  readonly label: string
  readonly value: string
  readonly onInput: (v: string) => void
  readonly hint?: string
  readonly area?: boolean
}) => (
  <div class="field">
    <label for={id}>{label}</label>
    {area === true ? (
      <textarea id={id} rows={3} value={value} onInput={(e) => onInput(e.currentTarget.value)} />
    ) : (
      <input id={id} value={value} onInput={(e) => onInput(e.currentTarget.value)} />
    )}
    {hint !== undefined && <span class="muted">{hint}</span>}
  </div>
)

/** The create and edit form. */
const EndpointForm = ({ initial, submit, label, onCancel }: {
  readonly initial: Draft
  readonly submit: (input: EndpointInput) => Promise<void>
  readonly label: string
  readonly onCancel?: () => void
}) => {
  const [d, setD] = useState(initial)
  const [error, setError] = useState<Error | undefined>()
  const [busy, setBusy] = useState(false)
  const set = (k: keyof Draft) => (v: string) => setD((x) => ({ ...x, [k]: v }))
  const onSubmit = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      await submit(inputOf(d))
      setD(initial)
    } catch (err) {
      setError(err as Error)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form class="endpoint-form" onSubmit={onSubmit} aria-label={label}>
      <Field id={`${label}-url`} label="URL" value={d.url} onInput={set("url")} hint="https://… of your receiver" />
      <Field id={`${label}-description`} label="Description" value={d.description} onInput={set("description")} />
      <Field id={`${label}-types`} label="Event types" value={d.eventTypes} onInput={set("eventTypes")} hint="e.g. invoice.paid, user.* (empty: every event)" />
      <Field id={`${label}-headers`} label="Headers" value={d.headers} onInput={set("headers")} hint="One Name: value a line" area />
      <div class="row">
        <Field id={`${label}-rate`} label="Deliveries / s" value={d.ratePerSec} onInput={set("ratePerSec")} hint="0: unlimited" />
        <Field id={`${label}-concurrency`} label="Concurrency" value={d.concurrency} onInput={set("concurrency")} />
      </div>
      <div class="row">
        <button type="submit" disabled={busy}>{label}</button>
        {onCancel !== undefined && <button type="button" onClick={onCancel}>Cancel</button>}
      </div>
      {error !== undefined && <Problem error={error} />}
    </form>
  )
}

/** Enable, then (if asked) replay the endpoint's dead letters: they are delivered to it again. */
const enable = async (tenant: string, id: string, replayDead: boolean) => {
  await api.updateEndpoint(tenant, id, { disabled: false })
  if (replayDead) await api.replay({ tenant, destination: `endpoint:${id}` })
}

const Row = ({ tenant, e, onChanged }: { readonly tenant: string; readonly e: Endpoint; readonly onChanged: (note: string) => void }) => {
  const [editing, setEditing] = useState(false)
  const [deleting, setDeleting] = useState(false)
  const [secret, setSecret] = useState<string | undefined>()
  const [error, setError] = useState<Error | undefined>()
  const [replayDead, setReplayDead] = useState(false)
  const act = (f: () => Promise<unknown>, note: string) => async () => {
    setError(undefined)
    try {
      await f()
      onChanged(note)
    } catch (err) {
      setError(err as Error)
    }
  }
  return (
    <li class="endpoint panel" data-endpoint={e.id}>
      <h3 class="mono">{e.url}</h3>
      <p>
        {e.description !== "" && <span>{e.description} · </span>}
        <span class="mono">{e.id}</span> · {e.eventTypes.length === 0 ? "every event" : e.eventTypes.join(", ")} ·{" "}
        <strong data-status>{e.disabled ? `disabled${e.disabledReason === null ? "" : `: ${e.disabledReason}`}` : "enabled"}</strong>
      </p>
      <p data-breaker>
        Breaker: <span data-col="breaker">{breakerText(e.breaker)}</span> · last success:{" "}
        <span data-col="last-success">{e.breaker?.lastSuccessAt == null ? "none since its pool opened" : F.time(e.breaker.lastSuccessAt)}</span>
      </p>
      <p class="muted">
        {e.ratePerSec === 0 ? "no rate limit" : `${F.rate(e.ratePerSec)} deliveries/s`} · concurrency {e.concurrency} · updated{" "}
        {F.time(e.updatedAt)}
      </p>
      <div class="row">
        <button type="button" onClick={() => setEditing(!editing)}>Edit</button>
        <button type="button" onClick={act(() => (e.disabled ? enable(tenant, e.id, replayDead) : api.updateEndpoint(tenant, e.id, { disabled: true })), e.disabled ? (replayDead ? "Enabled; its dead letters replayed." : "Enabled.") : "Disabled.")}>
          {e.disabled ? "Enable" : "Disable"}
        </button>
        {e.disabled && (
          <label>
            <input type="checkbox" checked={replayDead} onChange={(ev) => setReplayDead(ev.currentTarget.checked)} /> also replay its dead letters
          </label>
        )}
        <button type="button" onClick={act(async () => setSecret((await api.endpointSecret(tenant, e.id)).secret), "")}>Reveal secret</button>
        <button type="button" class="danger" onClick={() => setDeleting(true)}>Delete…</button>
      </div>
      {secret !== undefined && (
        <p>
          Signing secret: <code data-secret>{secret}</code>
        </p>
      )}
      {error !== undefined && <Problem error={error} />}
      {editing && (
        <EndpointForm
          initial={draftOf(e)}
          label="Save"
          onCancel={() => setEditing(false)}
          submit={async (input) => {
            await api.updateEndpoint(tenant, e.id, input)
            setEditing(false)
            onChanged("Saved.")
          }}
        />
      )}
      <Activity tenant={tenant} endpoint={e} />
      {deleting && (
        <Confirm
          title="Delete this endpoint?"
          action="Delete endpoint"
          onCancel={() => setDeleting(false)}
          onConfirm={() => (setDeleting(false), act(() => api.deleteEndpoint(tenant, e.id), "Deleted.")())}
        >
          <p>
            <span class="mono">{e.url}</span> of tenant <strong>{tenant}</strong> gets no more events.
          </p>
        </Confirm>
      )}
    </li>
  )
}

export const Endpoints = ({ tenant }: { readonly tenant: string }) => {
  const list = useLoad(() => api.endpoints(tenant), [tenant])
  const dead = useLoad(() => api.dlq({ tenant, limit: 20 }), [tenant], 10_000)
  const [note, setNote] = useState<string | undefined>()
  const changed = (n: string) => {
    if (n !== "") setNote(n)
    list.reload()
  }
  return (
    <>
      <h1>
        Endpoints of <span class="mono">{tenant}</span>
      </h1>
      {note !== undefined && <Note>{note}</Note>}
      {list.error !== undefined ? (
        <Problem error={list.error} />
      ) : list.data === undefined ? (
        <Loading />
      ) : (
        <>
          {list.data.items.length === 0 && <p class="muted">No endpoints yet.</p>}
          <ul class="endpoints" aria-label={`Endpoints of ${tenant}`}>
            {list.data.items.map((e) => <Row key={e.id} tenant={tenant} e={e} onChanged={changed} />)}
          </ul>
          <section class="panel" aria-labelledby="add-endpoint-title">
            <h2 id="add-endpoint-title">Add an endpoint</h2>
            <EndpointForm
              initial={EMPTY}
              label="Create endpoint"
              submit={async (input) => {
                const made = await api.createEndpoint(tenant, input)
                changed(`Created ${made.id}. Its signing secret: ${made.secret}`)
              }}
            />
          </section>
        </>
      )}
      <section aria-labelledby="endpoint-dead-title">
        <h2 id="endpoint-dead-title">Dead letters</h2>
        {dead.error !== undefined && <Problem error={dead.error} />}
        {dead.data !== undefined && <DeadTable items={dead.data.items} label={`Dead rows of ${tenant}`} />}
        <p>
          <a href={href(["dead"], { tenant })}>All dead letters of {tenant}: filter, page, replay</a>
        </p>
      </section>
    </>
  )
}

/** `#/endpoints`: the token's tenants to choose from (a global token opens one by id). */
export const EndpointsIndex = ({ principal }: { readonly principal: Principal }) => {
  const [tenant, setTenant] = useState("")
  if (principal.tenants !== null && principal.tenants.length === 1) return <Endpoints tenant={principal.tenants[0]!} />
  return (
    <>
      <h1>Endpoints</h1>
      {principal.tenants !== null ? (
        <ul>
          {principal.tenants.map((t) => (
            <li key={t}>
              <a href={href(["tenants", t, "endpoints"])}>{t}</a>
            </li>
          ))}
        </ul>
      ) : (
        <form class="row" onSubmit={(e) => (e.preventDefault(), tenant.trim() !== "" && (location.hash = href(["tenants", tenant.trim(), "endpoints"])))}>
          <label for="endpoints-tenant">Tenant</label>
          <input id="endpoints-tenant" value={tenant} onInput={(e) => setTenant(e.currentTarget.value)} />
          <button type="submit">Open</button>
        </form>
      )}
    </>
  )
}
