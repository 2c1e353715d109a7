/**
 * The gate between the HTTP edge and the services behind it. The server
 * binds first (so `/healthz` and `/readyz` answer during migrations and boot
 * recovery); ingest and admin wait behind the gate and answer 503 until boot
 * opens it, and again once shutdown begins (stop accepting).
 */
import { Context, Effect, Layer } from "effect"
import type { Audit } from "../lifecycle/audit.js"
import type { Endpoints } from "../queue/endpoints.js"
import type { Quarantine } from "../lifecycle/quarantine.js"
import type { Limits } from "../queue/limits.js"
import type { Queue } from "../queue/queue.js"
import type { Replay } from "../queue/replay.js"
import type { Tenants } from "../queue/tenants.js"
import type { Writer } from "../queue/writer.js"
import { NotReady } from "./errors.js"

/** What ingest and admin handlers run with. */
export type ApiServices = Writer | Queue | Tenants | Replay | Quarantine | Audit | Limits | Endpoints

/** `standby`: another node holds the store's lease (src/ha/lease.ts); this one waits to take over. */
export type Phase = "starting" | "standby" | "migrating" | "recovering" | "ready" | "stopping"

/**
 * `f` of the services context in force, worked out once per context: the gate's context changes
 * only when it opens again (a reload), so the edge's hot path does not look its services up per request.
 */
export const perServices = <A>(f: (services: Context.Context<ApiServices>) => A): ((services: Context.Context<ApiServices>) => A) => {
  let seen: Context.Context<ApiServices> | undefined
  let value: A
  return (services) => {
    if (services !== seen) (value = f(services)), (seen = services)
    return value
  }
}

type State = { readonly phase: Exclude<Phase, "ready"> } | { readonly phase: "ready"; readonly services: Context.Context<ApiServices> }

export interface GateShape {
  readonly phase: Effect.Effect<Phase>
  readonly setPhase: (phase: Exclude<Phase, "ready">) => Effect.Effect<void>
  /** Ready: handlers run with these services. */
  readonly open: (services: Context.Context<ApiServices>) => Effect.Effect<void>
  /** The services, or `NotReady` while starting or stopping. */
  readonly services: Effect.Effect<Context.Context<ApiServices>, NotReady>
  /** The same, read synchronously (the ingest listener, which runs outside any fiber). */
  readonly unsafeServices: () => Context.Context<ApiServices> | NotReady
}

export class Gate extends Context.Service<Gate, GateShape>()("ankusa/http/Gate") {}

export const make = Effect.sync(() => {
  // A plain cell: every change is one synchronous assignment, and the ingest listener reads it without a fiber.
  let state: State = { phase: "starting" }
  const unsafeServices = () => (state.phase === "ready" ? state.services : new NotReady({ phase: state.phase }))
  return {
    phase: Effect.sync(() => state.phase),
    setPhase: (phase) => Effect.sync(() => void (state = { phase })),
    open: (services) => Effect.sync(() => void (state = { phase: "ready", services })),
    services: Effect.suspend(() => {
      const s = unsafeServices()
      return s instanceof NotReady ? Effect.fail(s) : Effect.succeed(s)
    }),
    unsafeServices
  } satisfies GateShape
})

/** A closed gate (serve opens it at the end of boot). */
export const layer: Layer.Layer<Gate> = Layer.effect(Gate, make)

/** A gate open on the services of the context (tests, and anything built after boot). */
export const layerOpen: Layer.Layer<Gate, never, ApiServices> = Layer.effect(
  Gate,
  Effect.gen(function* () {
    const gate = yield* make
    yield* gate.open(yield* Effect.context<ApiServices>())
    return gate
  })
)
