/**
 * TEN-1 §12 `bench/gauges-bench`: the gauge tick (src/observability/gauges.ts, the
 * very `tick` the node schedules: aggregate counters, oldest due age from the
 * active index, `m:next_ord`, top tenants by pending) against 10³…10⁶ queued
 * rows and 10…10⁵ tenants with 8 active, 3,000 merging batches per second
 * committed meanwhile. Harness and pass rule: bench/lib/tick-bench.ts.
 * Run: npx tsx bench/gauges-bench.ts [--quick]
 */
import { Effect, Layer } from "effect"
import * as Gauges from "../src/observability/gauges.js"
import { Queue } from "../src/queue/queue.js"
import * as Tenants from "../src/queue/tenants.js"
import { Store } from "../src/store/store.js"
import { runScript } from "./lib/tick-bench.js"

runScript({
  name: "gauges-bench",
  what: "the gauge tick of src/observability/gauges.ts (counters of ord 0, oldest due age, tenant count, top 100 tenants by pending)",
  make: (store, queue) =>
    Effect.map(Effect.provide(Gauges.make, Layer.mergeAll(Tenants.layer.pipe(Layer.provide(Layer.succeed(Store, store))), Layer.succeed(Queue, queue))), (g) => g.tick)
})
