/**
 * The tenant page's erase (TEN-5; docs/console.md): typing the tenant id arms the button, a
 * confirmation says what goes and what stays, and the job's progress is read every second
 * until it is done; then the refusal can be lifted. Global tokens only: for a scoped token
 * the section is not shown (the status read answers 403).
 */
import { useState } from "preact/hooks"
import { api, ApiError, type EraseJob } from "../api.js"
import { Confirm } from "../components/confirm.js"
import { Note, Problem } from "../components/status.js"
import * as F from "../format.js"
import { useLoad } from "../load.js"

const STEPS = 7

/** The job, read every second; undefined when the tenant has none (404). */
const useJob = (tenant: string) =>
  useLoad(() => api.eraseStatus(tenant).catch((e) => (e instanceof ApiError && e.status === 404 ? undefined : Promise.reject(e))), [tenant], 1_000)

const Progress = ({ job }: { readonly job: EraseJob }) => {
  const done = Math.min(job.step - 1, STEPS)
  const counts = Object.entries(job.counts).filter(([, n]) => n > 0)
  return (
    <div data-erase-job={job.id}>
      <label>
        {job.done ? `Erased: all ${STEPS} steps done` : `Step ${job.step} of ${STEPS}: ${job.step_name}`}
        <progress max={STEPS} value={done} aria-label={`Erase of ${job.tenant}`} />
      </label>
      <p class="muted">
        Job <span class="mono">{job.id}</span>, started {F.time(job.started_at)} by {job.actor}
        {job.finished_at !== null && <>, finished {F.time(job.finished_at)}</>}.
      </p>
      {counts.length > 0 && (
        <p>
          Deleted: {counts.map(([k, n]) => `${F.count(n)} ${k.replaceAll("_", " ")}`).join(", ")}.
        </p>
      )}
    </div>
  )
}

export const EraseTenant = ({ tenant, onChange }: { readonly tenant: string; readonly onChange: () => void }) => {
  const job = useJob(tenant)
  const [typed, setTyped] = useState("")
  const [asking, setAsking] = useState<"erase" | "lift" | undefined>()
  const [error, setError] = useState<Error | undefined>()
  const [note, setNote] = useState<string | undefined>()
  if (job.error instanceof ApiError && job.error.status === 403) return null
  const act = async (what: "erase" | "lift") => {
    setAsking(undefined)
    setError(undefined)
    try {
      if (what === "erase") await api.erase(tenant)
      else await api.liftErase(tenant)
      setNote(what === "erase" ? `Erasing ${tenant}: its new hooks are refused from now on.` : `The refusal of ${tenant} is lifted: its next hook starts a new tenant.`)
      setTyped("")
    } catch (e) {
      setError(e as Error)
    }
    job.reload()
    onChange()
  }
  const current = job.data
  return (
    <section aria-labelledby="erase-title" class="panel">
      <h2 id="erase-title">Erase tenant</h2>
      {current === undefined ? (
        <>
          <p>
            Deletes every row of <strong>{tenant}</strong> on this node: its queue, dead letters, hooks and their archived
            copies, idempotency keys, quarantined requests, limits and endpoints. Audit rows stay. New hooks of the tenant are
            refused (410) until the refusal is lifted.
          </p>
          <label>
            Type the tenant id to confirm{" "}
            <input type="text" value={typed} onInput={(e) => setTyped((e.target as HTMLInputElement).value)} autocomplete="off" spellcheck={false} />
          </label>{" "}
          <button type="button" class="danger" disabled={typed !== tenant} onClick={() => setAsking("erase")}>
            Erase tenant…
          </button>
        </>
      ) : (
        <>
          <Progress job={current} />
          {current.done && (
            <button type="button" onClick={() => setAsking("lift")}>
              Lift the refusal…
            </button>
          )}
        </>
      )}
      {note !== undefined && <Note>{note}</Note>}
      {error !== undefined && <Problem error={error} />}
      {job.error !== undefined && <Problem error={job.error} />}
      {asking === "erase" && (
        <Confirm title={`Erase tenant ${tenant}?`} action="Erase every row" onConfirm={() => void act("erase")} onCancel={() => setAsking(undefined)}>
          <p>
            Every row of tenant <strong>{tenant}</strong> on this node will be deleted, and cannot be recovered. Its hooks are
            refused from the first step on.
          </p>
        </Confirm>
      )}
      {asking === "lift" && (
        <Confirm title={`Lift the refusal of ${tenant}?`} action="Lift the refusal" onConfirm={() => void act("lift")} onCancel={() => setAsking(undefined)}>
          <p>
            Hooks of <strong>{tenant}</strong> will be accepted again, as a new tenant: nothing of the erased one comes back.
          </p>
        </Confirm>
      )}
    </section>
  )
}
