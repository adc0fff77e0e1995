// Request schemas for /v1/organizations/tokens and the public token view.
import { z } from "zod";
import { badRequest } from "../../errors.ts";
import { iso } from "../../lib/time.ts";
import type { AccountToken } from "../guard.ts";

export const TOKEN_SCOPES = ["read_write", "read_only"] as const;
export type TokenScope = (typeof TOKEN_SCOPES)[number];
export const TOKEN_LABEL_MAX = 60;

export const createTokenBody = z.strictObject({
  scope: z.enum(TOKEN_SCOPES, { error: "`scope` must be \"read_write\" (an sk_ token) or \"read_only\" (an rk_ token)." }),
  label: z
    .string({ error: "`label` must be a string." })
    .trim()
    .min(1, { error: "`label` must not be empty." })
    .max(TOKEN_LABEL_MAX, { error: `\`label\` is longer than ${TOKEN_LABEL_MAX} characters.` })
    .optional(),
});

export const deleteTokenQuery = z.strictObject({
  id: z.string({ error: "Query parameter `id` (the token id) is required." }).min(1, { error: "Query parameter `id` must not be empty." }).max(200, { error: "Query parameter `id` is not a token id." }),
});

/**
 * Parses with a zod schema; the first problem becomes a 400 bad_request whose message names the
 * field (unknown fields included, so typos and mass assignment are refused, not ignored).
 */
export function parseOr400<T extends z.ZodType>(schema: T, value: unknown, where: "body" | "query" = "body"): z.infer<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  if (issue.code === "unrecognized_keys") {
    const keys = issue.keys.map((k) => `\`${k}\``).join(", ");
    const shape = (schema as unknown as { shape?: Record<string, unknown> }).shape;
    const allowed = shape ? Object.keys(shape).join(", ") : "";
    throw badRequest(`Unknown ${where === "body" ? "field" : "query parameter"}${issue.keys.length > 1 ? "s" : ""} ${keys}.${allowed ? ` Allowed: ${allowed}.` : ""}`);
  }
  const field = issue.path.map(String).join(".");
  if (issue.code === "invalid_type" && issue.input === undefined) {
    throw badRequest(where === "body" ? `Field \`${field}\` is required.` : `Query parameter \`${field}\` is required.`);
  }
  // Custom messages already name the field; zod's defaults get the field put in front.
  const msg = issue.message.includes("`") ? issue.message : `\`${field}\`: ${issue.message}`;
  throw badRequest(msg);
}

/** What a token list or create response shows: never the raw token, never its hash. */
export function tokenView(t: AccountToken) {
  return {
    id: t.id,
    prefix: t.prefix,
    scope: t.scope,
    label: t.label,
    created_at: iso(t.createdAt),
  };
}
