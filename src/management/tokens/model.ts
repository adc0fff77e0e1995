// Request schemas for /v1/organizations/tokens and the public token view.
import { z } from "zod";
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

export const noQuery = z.strictObject({});

export const deleteTokenQuery = z.strictObject({
  id: z.string().min(1).max(200).regex(/^[A-Za-z0-9_-]+$/, { error: "Query parameter `id` is not a token id (ids look like tok_…)." }),
});

/** What a create response shows (CONTRACT §6): never the raw token, never its hash. */
export function tokenView(t: AccountToken) {
  return {
    id: t.id,
    prefix: t.prefix,
    scope: t.scope,
    label: t.label,
    created_at: iso(t.createdAt),
  };
}

/** A list entry: the create view plus when the token was last used (to the minute; null = never). */
export function tokenListView(t: AccountToken) {
  return { ...tokenView(t), last_used_at: iso(t.lastUsedAt) };
}
