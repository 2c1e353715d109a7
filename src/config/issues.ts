/**
 * A Schema issue of the configuration as one problem per bad key, each
 * printed `config error at KEY (SOURCE): MESSAGE`. The Schema decodes what
 * the ConfigProviders answer, strings, so a number or a boolean that did not
 * parse is reported as the type it should be, with the value as given.
 */
import { SchemaAST, SchemaIssue } from "effect"

export const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path
    .map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`))
    .join("")

/** How a problem shows the rejected value: not at all, as a string, or as the number it parsed to. */
type Shown = "none" | "quoted" | "bare"

export interface Problem {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
  readonly unexpected: boolean
  readonly shown: Shown
  /** The rejected value, when the decode kept it (`reportInput`). */
  readonly input?: { readonly value: unknown }
}

const problem = (path: ReadonlyArray<PropertyKey>, message: string, shown: Shown, issue?: SchemaIssue.Issue): Problem => ({
  path,
  message,
  unexpected: false,
  shown,
  ...(issue !== undefined && SchemaIssue.hasInput(issue) ? { input: { value: issue.input } } : {})
})

// The members a value may take, without the `undefined` that an optional key adds.
const members = (ast: SchemaAST.AST): ReadonlyArray<SchemaAST.AST> =>
  SchemaAST.isUnion(ast) ? ast.types.flatMap(members) : SchemaAST.isUndefined(ast) ? [] : [ast]

/** What a type expects, without the value (`Expected number`). */
const expected = (ast: SchemaAST.AST): string => SchemaIssue.defaultLeafHook(new SchemaIssue.InvalidType(ast))

/** A value no member of a union took, in one line: `expected one of a, b, c` for words, else `Expected string | object`. */
const unionMessage = (union: SchemaAST.Union): string => {
  const all = members(union)
  if (all.length > 0 && all.every(SchemaAST.isLiteral)) return `expected one of ${all.map((m) => String(m.literal)).join(", ")}`
  return `Expected ${all.map((m) => expected(m).replace(/^Expected /, "")).join(" | ")}`
}

const isParsed = (ast: SchemaAST.AST) => SchemaAST.isNumber(ast) || SchemaAST.isBoolean(ast)

// Below a number's or a boolean's own encodings, an issue about another type is about the string it is read from.
const failedToParse = (issue: SchemaIssue.Issue, ast: SchemaAST.AST): boolean =>
  issue._tag === "Encoding" ? failedToParse(issue.issue, ast) : "ast" in issue && issue.ast._tag !== ast._tag

/** The issue tree as one problem per bad key; `under` is the type whose checks are being read. */
export const problems = (
  issue: SchemaIssue.Issue,
  path: ReadonlyArray<PropertyKey> = [],
  under?: SchemaAST.AST
): ReadonlyArray<Problem> => {
  switch (issue._tag) {
    case "Pointer":
      return problems(issue.issue, [...path, ...issue.path])
    case "Encoding":
      if (isParsed(issue.ast) && failedToParse(issue.issue, issue.ast)) return [problem(path, expected(issue.ast), "quoted")]
      return problems(issue.issue, path, under)
    case "Composite":
      return issue.issues.flatMap((i) => problems(i, path, issue.ast))
    case "AnyOf": {
      // A member whose shape the value does not have says nothing about it; one that went deeper does.
      const deeper = issue.issues.filter((i) => i._tag !== "InvalidType")
      if (deeper.length > 0) return deeper.flatMap((i) => problems(i, path))
      return [problem(path, unionMessage(issue.ast), "quoted", issue)]
    }
    case "Filter": {
      // A filter of ours says what it wants; a built-in one (a range, a length) is `Expected <range>`.
      const own = issue.filter.annotations?.message ?? (issue.issue._tag === "InvalidValue" ? issue.issue.annotations?.message : undefined)
      if (typeof own === "string") return [problem(path, own, "none")]
      if (issue.issue._tag !== "InvalidValue") return problems(issue.issue, path, under)
      const shown = under !== undefined && SchemaAST.isNumber(under) ? "bare" : "quoted"
      return [problem(path, `Expected ${issue.filter.annotations?.expected ?? "a valid value"}`, shown, issue)]
    }
    case "InvalidValue": {
      const own = issue.annotations?.message
      return [typeof own === "string" ? problem(path, own, "none") : problem(path, "Invalid value", "quoted", issue)]
    }
    case "InvalidType":
      return [problem(path, expected(issue.ast), "quoted", issue)]
    case "MissingKey":
      return [problem(path, "is missing", "none")]
    case "UnexpectedKey": {
      const keys = SchemaAST.isObjects(issue.ast) ? issue.ast.propertySignatures.map((p) => JSON.stringify(String(p.name))) : []
      return [{ ...problem(path, keys.length === 0 ? "is unexpected" : `is unexpected, expected: ${keys.join(" | ")}`, "none"), unexpected: true }]
    }
    case "OneOf":
    case "Forbidden":
      return [problem(path, SchemaIssue.defaultLeafHook(issue), "none")]
  }
}

const formatValue = (u: unknown): string => {
  try {
    return JSON.stringify(u) ?? String(u)
  } catch {
    return String(u)
  }
}

/**
 * One line for a problem. `source` names where the key's value came from
 * (`file ankusa.yaml`, `from ANKUSA_HTTP_PORT`); `given` is the value as that
 * source gave it, shown when the decode did not keep the input.
 */
export const formatProblem = (p: Problem, source: string | undefined, given: string | undefined): string => {
  const key = formatPath(p.path)
  const actual =
    p.shown === "none"
      ? ""
      : p.input !== undefined
        ? `, actual ${formatValue(p.input.value)}`
        : given === undefined
          ? ""
          : `, actual ${p.shown === "bare" ? given : JSON.stringify(given)}`
  return `config error at ${key === "" ? "(top level)" : key}${source === undefined ? "" : ` (${source})`}: ${p.message}${actual}`
}
