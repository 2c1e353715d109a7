import { Effect } from "effect"
import { layerMemory, MemoryDb } from "../src/store/memory.js"
import { storeConformance } from "./store-conformance.js"

storeConformance<MemoryDb>({
  name: "memory",
  fresh: Effect.sync(() => new MemoryDb()),
  layer: (db, opts) => layerMemory({ db, ...opts }),
  poison: (db) =>
    Effect.sync(() => {
      db.failNextWrite = 1
      return []
    })
})
