/**
 * The erase job of a tenant (TEN-5): its persisted record and the ops of its
 * first and last steps. Pure: the job runner (src/queue/erase.ts) reads and
 * writes, this builds.
 *
 * The record lives at `<<?r, tenant_id>>` in the tenants column family, value
 * `<<1::8, JSON>>`. It is the tenant id's durable refusal: written by step 1,
 * kept after the job is done, deleted only when an operator lifts it.
 */
import * as Counters from "./counters.js"
import { counterKey, erasureKey, tenantKey, tenantOrdKey } from "./keys.js"
import { del, type Op, type Put, put } from "./ops.js"

/** The seven steps, in order (docs/storage.md "Erasing a tenant"). `done` follows step 7. */
export const STEPS = ["refuse", "inflight", "purge", "hooks", "dedupe", "rest", "tombstone"] as const
export type StepName = (typeof STEPS)[number]

export interface EraseJob {
  /** `e_<ord as 8 hex>`: an ordinal is erased at most once. */
  readonly id: string
  readonly tenant: string
  readonly ord: number
  /** The next step to run, 1..7; 8 once done. */
  readonly step: number
  /** Where the current step stopped: its phase and the last key it finished (hex), or null at its start. */
  readonly cursor: { readonly phase: string; readonly key: string | null } | null
  /** Rows deleted so far, by what they were. */
  readonly counts: Readonly<Record<string, number>>
  /** The admin token's name that started it. */
  readonly actor: string
  readonly startedAt: number
  readonly updatedAt: number
  readonly finishedAt: number | null
}

export const DONE = STEPS.length + 1
/** The last step, before which the store scrubs what it deleted (`Store.scrub`). */
export const TOMBSTONE_STEP = STEPS.indexOf("tombstone") + 1

export const isDone = (j: EraseJob): boolean => j.step >= DONE

export const jobId = (ord: number): string => `e_${ord.toString(16).padStart(8, "0")}`

export const stepName = (step: number): StepName | "done" => STEPS[step - 1] ?? "done"

const VERSION = 1

export const encodeJob = (j: EraseJob): Uint8Array => Buffer.concat([Buffer.from([VERSION]), Buffer.from(JSON.stringify(j), "utf8")])

/** undefined for a value this build cannot read (store check reports it). */
export const decodeJob = (v: Uint8Array | undefined): EraseJob | undefined => {
  if (v === undefined || v.length < 2 || v[0] !== VERSION) return undefined
  try {
    const j = JSON.parse(Buffer.from(v.buffer, v.byteOffset + 1, v.byteLength - 1).toString("utf8")) as EraseJob
    return typeof j.tenant === "string" && Number.isInteger(j.ord) && Number.isInteger(j.step) ? j : undefined
  } catch {
    return undefined
  }
}

/** The put of the job's record (every step's batch carries it with the step's ops). */
export const jobOp = (j: EraseJob): Put => put("tenants", erasureKey(j.tenant), encodeJob(j))

export const started = (tenant: string, ord: number, actor: string, now: number): EraseJob => ({
  id: jobId(ord),
  tenant,
  ord,
  step: 2,
  cursor: null,
  counts: {},
  actor,
  startedAt: now,
  updatedAt: now,
  finishedAt: null
})

/** The job after a batch: at `step` with `cursor`, `add` added to its counts. */
export const advanced = (
  j: EraseJob,
  at: { readonly step: number; readonly cursor: EraseJob["cursor"]; readonly now: number; readonly add?: Readonly<Record<string, number>> }
): EraseJob => {
  const counts = { ...j.counts }
  for (const [k, n] of Object.entries(at.add ?? {})) if (n !== 0) counts[k] = (counts[k] ?? 0) + n
  return { ...j, step: at.step, cursor: at.cursor, counts, updatedAt: at.now, finishedAt: at.step >= DONE ? at.now : j.finishedAt }
}

/**
 * Step 7 (TEN-1 §2): the tenant's six counter rows and its `?n` row go, and `?t`
 * stays as a tombstone (an empty value) so no straggling row can ever be
 * attributed to another tenant. The aggregate is untouched: every row the
 * counters counted was deleted with its deltas before (steps 2-4).
 */
export const tombstoneOps = (tenant: string, ord: number): ReadonlyArray<Op> => [
  ...Object.values(Counters.Fields).map((f) => del("counters", counterKey(ord, f))),
  del("tenants", tenantOrdKey(tenant)),
  put("tenants", tenantKey(ord), new Uint8Array(0))
]

/** Lifting the refusal: the record goes, so the next hook of the id allocates a new ordinal. */
export const liftOp = (tenant: string): Op => del("tenants", erasureKey(tenant))
