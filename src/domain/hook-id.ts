/**
 * Hook ids: `h_<node:16 hex>_<seq:16 hex>`, e.g. `h_9f3c2a1b0d4e5f60_000000000000002a`.
 *
 * `node` is 8 random bytes persisted in the store's default family at the
 * Writer's first open (`m:node_id`), `seq` the hook's commit order. Unique
 * across a fleet (stores are per node; 64 random bits make two nodes sharing
 * a node part vanishingly unlikely) and never reused on a node (seqs are
 * not). Fixed width, so ids of one node sort in commit order, and the seq is
 * read back from an id without an index (replay by id).
 */
import { randomBytes } from "node:crypto"

const NODE_HEX = 16
const SEQ_HEX = 16
const RE = /^h_([0-9a-f]{16})_([0-9a-f]{16})$/

/** A fresh node part: 8 random bytes. */
export const freshNodeId = (): Uint8Array => randomBytes(NODE_HEX / 2)

export const nodeHex = (node: Uint8Array): string => {
  if (node.length !== NODE_HEX / 2) throw new Error(`node id has ${node.length} bytes, expected ${NODE_HEX / 2}`)
  return Buffer.from(node.buffer, node.byteOffset, node.byteLength).toString("hex")
}

export const make = (node: string, seq: number): string => `h_${node}_${seq.toString(16).padStart(SEQ_HEX, "0")}`

/** undefined when `id` is not a hook id of this scheme. */
export const parse = (id: string): { readonly node: string; readonly seq: number } | undefined => {
  const m = RE.exec(id)
  if (m === null) return undefined
  const seq = Number.parseInt(m[2]!, 16)
  return Number.isSafeInteger(seq) ? { node: m[1]!, seq } : undefined
}
