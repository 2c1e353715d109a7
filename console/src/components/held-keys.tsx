/**
 * A tenant's held keys (docs/delivery.md "Ordered delivery"): each key of an ordered destination
 * with `onDead: hold` that waits for its dead head, the head's hook linked to its page (replay
 * it there, or purge it, and the key moves on).
 */
import { api } from "../api.js"
import { useLoad } from "../load.js"
import { href } from "../route.js"
import { Loading, Problem } from "./status.js"

/** Held keys shown at most (the API's default page). */
export const HELD_SHOWN = 100

export const HeldKeys = ({ tenant }: { readonly tenant: string }) => {
  const held = useLoad(() => api.held(tenant, HELD_SHOWN), [tenant], 10_000)
  const items = held.data?.items
  return (
    <section aria-labelledby="tenant-held-title">
      <h2 id="tenant-held-title">Held keys</h2>
      {held.error !== undefined && <Problem error={held.error} />}
      {items === undefined ? (
        held.error === undefined && <Loading />
      ) : items.length === 0 ? (
        <p class="muted">No key is held.</p>
      ) : (
        <>
          <p class="muted">
            Keys of ordered destinations (<code>onDead: hold</code>) waiting for their dead head: replay it, or purge it, and the
            key moves on.{items.length === HELD_SHOWN ? ` The first ${HELD_SHOWN} shown.` : ""}
          </p>
          <div class="table-wrap">
            <table class="held">
              <caption class="visually-hidden">Held keys of {tenant}</caption>
              <thead>
                <tr>
                  <th scope="col">Ordering key</th>
                  <th scope="col">Destination</th>
                  <th scope="col">Dead head</th>
                </tr>
              </thead>
              <tbody>
                {items.map((h) => (
                  <tr key={`${h.seq}/${h.sink_index}`} data-key={h.ordering_key ?? ""}>
                    <td class="mono">{h.ordering_key ?? "(hook gone)"}</td>
                    <td>{h.destination ?? `sink ${h.sink_index}`}</td>
                    <td class="mono">{h.id === null ? `seq ${h.seq}` : <a href={href(["dead", h.id])}>{h.id}</a>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </section>
  )
}
