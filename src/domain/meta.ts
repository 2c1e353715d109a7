/** Meta keys of the default column family: the format, the allocators and the job cursors. */

export const Meta = {
  format: Buffer.from("m:format"),
  nextOrd: Buffer.from("m:next_ord"),
  nextSeq: Buffer.from("m:next_seq"),
  /** 8 random bytes written at first open of the Writer: the node part of hook ids (src/domain/hook-id.ts). */
  nodeId: Buffer.from("m:node_id"),
  migrating: (to: number) => Buffer.from(`m:migrating:${to}`),
  cursor: (name: string) => Buffer.from(`m:cursor:${name}`),
  /** Written once with the sentinels of a family added to a format after it shipped (src/store/open.ts). */
  family: (name: string) => Buffer.from(`m:family:${name}`)
} as const
