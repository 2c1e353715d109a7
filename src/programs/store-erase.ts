/**
 * `ankusa store lift-erase TENANT` (TEN-5; docs/api.md "Erasing a tenant"):
 * on a stopped node, lift the refusal of a finished erase, as
 * `DELETE /v1/tenants/:tenant/erase` does on a running one: the job's record
 * goes with an audit row `tenant.lift` (actor `cli:<user>`) in one synced
 * batch, and the tenant id gets a new ordinal at its next hook.
 */
import { Console, Data, Effect } from "effect"
import * as os from "node:os"
import * as E from "../domain/erase.js"
import { erasureKey } from "../domain/keys.js"
import * as Audit from "../lifecycle/audit.js"
import { makeRocksDbStore } from "../store/rocksdb.js"
import { Store } from "../store/store.js"

export class LiftRefused extends Data.TaggedError("LiftRefused")<{ readonly message: string }> {}

export const liftErase = (dir: string, tenant: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* makeRocksDbStore(dir, { commitThread: "main" })
      const job = E.decodeJob(yield* store.get("tenants", erasureKey(tenant)))
      if (job === undefined) return yield* new LiftRefused({ message: `no erase job for tenant ${JSON.stringify(tenant)}` })
      if (!E.isDone(job)) return yield* new LiftRefused({ message: `the erase of ${JSON.stringify(tenant)} is at step ${job.step} of 7; start the node to finish it first` })
      const audit = yield* Audit.make().pipe(Effect.provideService(Store, store))
      const row = yield* audit.stage({ actor: `cli:${os.userInfo().username}`, tenants: [tenant], action: "tenant.lift", params: { job: job.id, tenant } })
      yield* store.write([E.liftOp(tenant), row], { sync: true })
      yield* Console.log(`lifted the refusal of ${tenant} (erase ${job.id}); its next hook gets a new ordinal`)
    })
  )
