/** A row of labelled figures (the queue gauges, a tenant's counters). */
export interface Stat {
  /** A stable key (`data-stat`), e.g. the counter's name. */
  readonly key: string
  readonly label: string
  readonly value: string
  readonly hint?: string
}

export const Stats = ({ stats, label }: { readonly stats: ReadonlyArray<Stat>; readonly label: string }) => (
  <dl class="stats" aria-label={label}>
    {stats.map((s) => (
      <div class="stat" key={s.key} data-stat={s.key} title={s.hint}>
        <dt>{s.label}</dt>
        <dd>{s.value}</dd>
      </div>
    ))}
  </dl>
)
