/** Building blocks of the configuration's Schemas (config.ts, retry-policy.ts). */
import { Effect, Schema } from "effect"

export const int = (min: number, max: number) => Schema.Int.check(Schema.isBetween({ minimum: min, maximum: max }))

/**
 * A key that may be absent and then decodes to `value`. Absent, not undefined:
 * `Config.schema` would let an `undefined` member take a bad struct as absent.
 */
export const withDefault = <S extends Schema.Top>(schema: S, value: () => S["Type"]) =>
  schema.pipe(Schema.withDecodingDefaultTypeKey<S>(Effect.sync(value)))
