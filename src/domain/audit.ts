/**
 * Audit rows (TEN-1 §3: the audit family, `<<?a, seq::64, at::64>>`, tenant
 * as a row field): who did what to which tenants' data. Value encoding:
 * `<<1::8, JSON utf8>>` with `{actor, tenants, action, params}`.
 * Pure: codecs and the scope rule.
 */

/** Admin actions that leave a row (product.md "Admin"). */
export const AUDIT_ACTIONS = [
  "replay",
  "purge",
  "quarantine.delete",
  "config.read",
  "config.reload",
  "limits.set",
  "endpoint.create",
  "endpoint.update",
  "endpoint.delete",
  "endpoint.secret",
  "endpoint.rotate",
  "portal.token",
  "tenant.erase",
  "tenant.lift"
] as const
export type AuditAction = (typeof AUDIT_ACTIONS)[number]

export interface AuditEntry {
  /** The admin token's name. */
  readonly actor: string
  /** Tenants the action touched; null for a node-wide action by a global token. */
  readonly tenants: ReadonlyArray<string> | null
  readonly action: AuditAction
  /** The request's parameters (filters, kinds, counts); never a secret. */
  readonly params: Readonly<Record<string, unknown>>
}

export interface AuditRow extends AuditEntry {
  readonly seq: number
  readonly at: number
}

/**
 * A URL as an audit row keeps it: scheme, host, port and path only. The query string, the
 * fragment and any user info are left out: receivers' URLs often carry a credential there.
 * Not a URL: an empty string (a row never keeps what it cannot read).
 */
export const auditUrl = (url: string): string => {
  try {
    const u = new URL(url)
    return `${u.protocol}//${u.host}${u.pathname}`
  } catch {
    return ""
  }
}

const VERSION = 1

export const encodeAudit = (e: AuditEntry): Uint8Array =>
  Buffer.concat([
    Buffer.from([VERSION]),
    Buffer.from(JSON.stringify({ actor: e.actor, tenants: e.tenants, action: e.action, params: e.params }), "utf8")
  ])

/** Throws on bytes this build cannot read: an audit row is never silently skipped. */
export const decodeAudit = (seq: number, at: number, v: Uint8Array): AuditRow => {
  const b = Buffer.from(v.buffer, v.byteOffset, v.byteLength)
  if (b[0] !== VERSION) throw new Error(`corrupt audit value at seq ${seq}: ${b.toString("hex")}`)
  const m = JSON.parse(b.toString("utf8", 1)) as AuditEntry
  return { seq, at, actor: m.actor, tenants: m.tenants, action: m.action, params: m.params }
}

/**
 * Who may read a row: a global token (scope null) reads all; a scoped token
 * reads a row only if every tenant it names is in its scope, so one tenant's
 * operator never learns another tenant's name or parameters; node-wide rows
 * (tenants null) are for global tokens only.
 */
export const visibleTo = (row: Pick<AuditRow, "tenants">, scope: ReadonlyArray<string> | null): boolean =>
  scope === null || (row.tenants !== null && row.tenants.length > 0 && row.tenants.every((t) => scope.includes(t)))

/** The optional `tenant=` filter: rows naming that tenant. */
export const mentions = (row: Pick<AuditRow, "tenants">, tenant: string | undefined): boolean =>
  tenant === undefined || (row.tenants !== null && row.tenants.includes(tenant))
