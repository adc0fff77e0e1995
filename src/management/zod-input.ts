// Management input through zod: a body or query that fails its schema becomes one 400
// bad_request whose message is a plain sentence naming the field. Schemas are strict objects,
// so a field the endpoint does not take (`plan`, `account_id`, spend…) is refused, never ignored.
import type { z } from "zod";
import { badRequest } from "../errors.ts";
import { queryOf } from "../http/request.ts";
import { readJsonObject } from "../http/body.ts";
import { formatCharIn } from "../lib/format-chars.ts";
import type { Base } from "../base.ts";

type Issue = z.core.$ZodIssue;

/** `providers[2].credential_id`, or `the request body` for the root. */
export function fieldPath(path: ReadonlyArray<PropertyKey>): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out === "" ? String(p) : `.${String(p)}`;
  return out;
}

function valueAt(data: unknown, path: ReadonlyArray<PropertyKey>): unknown {
  let v: any = data;
  for (const p of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = v[p as any];
  }
  return v;
}

function typeName(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object") return "an object";
  return `a ${typeof v}`;
}

const article = (t: string) => (t === "array" || t === "object" || t === "integer" ? `an ${t}` : `a ${t}`);

/** One issue as one sentence. Values the caller sent are never echoed (they may be secrets). */
export function issueSentence(issue: Issue, data: unknown, where: "body" | "query" = "body"): string {
  const name = fieldPath(issue.path);
  const field = name === "" ? (where === "query" ? "the query" : "the request body") : `\`${name}\``;
  switch (issue.code) {
    case "unrecognized_keys": {
      const keys = issue.keys.map((k) => `\`${name === "" ? k : `${name}.${k}`}\``).join(", ");
      const noun = where === "query" ? "query parameter" : "field";
      return `Unknown ${noun}${issue.keys.length > 1 ? "s" : ""} ${keys}; this endpoint does not accept ${issue.keys.length > 1 ? "them" : "it"}. Remove ${issue.keys.length > 1 ? "them" : "it"} and retry.`;
    }
    case "invalid_type": {
      const got = valueAt(data, issue.path);
      if (got === undefined) return `${field} is required.`;
      return `${field} must be ${article(issue.expected)}, not ${typeName(got)}.`;
    }
    case "too_big": {
      const max = Number(issue.maximum);
      if (issue.origin === "string") return `${field} must be at most ${max} characters.`;
      if (issue.origin === "array") return `${field} can have at most ${max} items.`;
      return `${field} must be at most ${max}.`;
    }
    case "too_small": {
      const min = Number(issue.minimum);
      if (issue.origin === "string") return min <= 1 ? `${field} must not be empty.` : `${field} must be at least ${min} characters.`;
      if (issue.origin === "array") return `${field} needs at least ${min} item${min === 1 ? "" : "s"}.`;
      return issue.inclusive ? `${field} must be at least ${min}.` : `${field} must be greater than ${min}.`;
    }
    case "invalid_value":
      return `${field} must be one of: ${issue.values.map((v) => JSON.stringify(v)).join(", ")}.`;
    case "invalid_format":
      return `${field} is not a valid ${issue.format}.`;
    default: {
      // Custom checks carry their own sentence; prefix the field when the sentence does not name it.
      const m = issue.message.trim().replace(/\.?$/, ".");
      return m.includes("`") ? m : `${field}: ${m}`;
    }
  }
}

/**
 * The path of the first string (value or object key) for which `bad` is true, or null. The body
 * reader has already bounded the nesting (http/body.ts), so this walk's depth is too.
 */
export function stringPath(data: unknown, bad: (s: string) => boolean, path: PropertyKey[] = []): PropertyKey[] | null {
  if (typeof data === "string") return bad(data) ? path : null;
  if (data === null || typeof data !== "object") return null;
  if (Array.isArray(data)) {
    for (let i = 0; i < data.length; i++) {
      const p = stringPath(data[i], bad, [...path, i]);
      if (p) return p;
    }
    return null;
  }
  for (const [k, v] of Object.entries(data)) {
    if (bad(k)) return path;
    const p = stringPath(v, bad, [...path, k]);
    if (p) return p;
  }
  return null;
}

/**
 * The path of the first string holding a NUL character, or null. Postgres text cannot hold one and
 * upstream headers refuse it: such input is a 400 naming the field (CONTRACT §8), checked before
 * the schema so no store or upstream ever sees it.
 */
export const nulPath = (data: unknown): PropertyKey[] | null => stringPath(data, (s) => s.includes("\u0000"));

export function parseWith<S extends z.ZodType>(schema: S, data: unknown, where: "body" | "query" = "body"): z.output<S> {
  const nul = nulPath(data);
  if (nul) {
    const name = fieldPath(nul);
    const field = name === "" ? (where === "query" ? "the query" : "the request body") : `\`${name}\``;
    throw badRequest(`${field} contains a NUL character (\\u0000), which cannot be stored. Remove it and retry.`);
  }
  // Labels, names and model ids are read by people: an invisible or bidirectional format character
  // would make one read as another (lib/format-chars.ts).
  let char: string | null = null;
  const cf = stringPath(data, (s) => (char = formatCharIn(s)) !== null);
  if (cf) {
    const name = fieldPath(cf);
    const field = name === "" ? (where === "query" ? "the query" : "the request body") : `\`${name}\``;
    throw badRequest(`${field} contains an invisible or bidirectional formatting character (${char}), which would make it read as something else. Remove it and retry.`);
  }
  const r = schema.safeParse(data);
  if (r.success) return r.data;
  // Unknown fields first: a mass-assignment attempt is the most useful thing to report.
  const issues = [...r.error.issues].sort((a, b) => Number(b.code === "unrecognized_keys") - Number(a.code === "unrecognized_keys"));
  throw badRequest(issueSentence(issues[0]!, data, where));
}

/**
 * Reads the JSON body (size-capped) and validates it. Call only after authenticate().
 * `allowEmpty`: a request without a body counts as `{}` (endpoints whose fields are all optional).
 */
export async function readBody<S extends z.ZodType>(ctx: Base, request: Request, schema: S, opts: { allowEmpty?: boolean } = {}): Promise<z.output<S>> {
  if (opts.allowEmpty && (request.body === null || request.headers.get("content-length") === "0")) return parseWith(schema, {}, "body");
  const raw = await readJsonObject(request, ctx.config.MAX_REQUEST_BYTES, (m) => badRequest(m));
  return parseWith(schema, raw.value, "body");
}

/** Validates the query string; unknown parameters are refused by the strict schema. */
export function readQuery<S extends z.ZodType>(request: Request, schema: S): z.output<S> {
  return parseWith(schema, queryOf(request), "query");
}
