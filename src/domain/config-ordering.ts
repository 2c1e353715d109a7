/** A destination's `ordered` setting (docs/delivery.md "Ordered delivery"; docs/configuration.md). */
import { Schema } from "effect"
import { withDefault } from "./schema-parts.js"

/** `true` is `{onDead: skip}`; `false` (the default) does not order. */
export const Ordered = Schema.Union([
  Schema.Boolean,
  Schema.Struct({ onDead: withDefault(Schema.Literals(["skip", "hold"]), () => "skip" as const) })
])
export type Ordered = typeof Ordered.Type

/** The `onDead` of an ordered destination, or undefined when it does not order. */
export const onDeadOf = (o: Ordered | undefined): "skip" | "hold" | undefined =>
  o === undefined || o === false ? undefined : o === true ? "skip" : o.onDead
