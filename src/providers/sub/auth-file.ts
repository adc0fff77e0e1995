// The subscription CLI's sign-in file (CONTRACT §4): its schema, and what the sub lane reads from
// it: the access token, the account id and when the token expires. Pure: no I/O.
import { z } from "zod";

/** The sign-in file as uploaded. Only the two tokens are required; the rest is kept as sent. */
export const authJsonSchema = z.looseObject({
  tokens: z.looseObject({
    access_token: z.string().min(1),
    refresh_token: z.string().min(1),
    id_token: z.string().nullable().optional(),
    account_id: z.string().nullable().optional(),
  }),
  last_refresh: z.string().nullable().optional(),
  OPENAI_API_KEY: z.string().nullable().optional(),
});
export type AuthJson = z.output<typeof authJsonSchema>;

export interface SubTokens {
  access_token: string;
  refresh_token: string;
  id_token?: string | null;
  account_id?: string | null;
  [extra: string]: unknown;
}

export interface SubAuthFile {
  tokens: SubTokens;
  last_refresh?: string | null;
  OPENAI_API_KEY?: string | null;
  [extra: string]: unknown;
}

/** The JWT claim namespace the subscription's tokens carry the account id under. */
const AUTH_CLAIM = "https://api.openai.com/auth";

/** The payload of a JWT-shaped token, or null (tokens are opaque to us unless they are JWTs). */
export function jwtPayload(token: string | null | undefined): Record<string, unknown> | null {
  if (!token) return null;
  const parts = token.split(".");
  if (parts.length !== 3 || !parts[1]) return null;
  try {
    const v = JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8"));
    return v && typeof v === "object" && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

/** Expiry of a JWT-shaped token in epoch ms; null when the token does not say. */
export function tokenExpiresAt(token: string | null | undefined): number | null {
  const exp = jwtPayload(token)?.exp;
  return typeof exp === "number" && Number.isFinite(exp) ? exp * 1000 : null;
}

/**
 * True when the access token is past (or within `skewMs` of) its expiry. A token that carries no
 * expiry is trusted until the backend answers 401.
 */
export function accessTokenExpired(auth: SubAuthFile, now = Date.now(), skewMs = 30_000): boolean {
  const at = tokenExpiresAt(auth.tokens.access_token);
  return at !== null && at - skewMs <= now;
}

/** `tokens.account_id`, else the account id claim of the id or access token. */
export function accountIdOf(auth: SubAuthFile): string | null {
  if (typeof auth.tokens.account_id === "string" && auth.tokens.account_id) return auth.tokens.account_id;
  for (const t of [auth.tokens.id_token, auth.tokens.access_token]) {
    const claim = jwtPayload(t)?.[AUTH_CLAIM] as Record<string, unknown> | undefined;
    const id = claim?.chatgpt_account_id;
    if (typeof id === "string" && id) return id;
  }
  return null;
}

/** The headers every call to the subscription backend carries. */
export function subAuthHeaders(auth: SubAuthFile): Record<string, string> {
  const h: Record<string, string> = { authorization: `Bearer ${auth.tokens.access_token}` };
  const account = accountIdOf(auth);
  if (account) h["chatgpt-account-id"] = account;
  return h;
}

/** The sign-in file after a refresh grant: new tokens merged in, everything else kept. */
export function withRefreshedTokens(
  auth: SubAuthFile,
  grant: { access_token?: unknown; refresh_token?: unknown; id_token?: unknown },
  now = new Date(),
): SubAuthFile {
  const tokens: SubTokens = { ...auth.tokens };
  if (typeof grant.access_token === "string" && grant.access_token) tokens.access_token = grant.access_token;
  if (typeof grant.refresh_token === "string" && grant.refresh_token) tokens.refresh_token = grant.refresh_token;
  if (typeof grant.id_token === "string" && grant.id_token) tokens.id_token = grant.id_token;
  return { ...auth, tokens, last_refresh: now.toISOString() };
}
