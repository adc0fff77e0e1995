// Routing-key auth for inference (SPEC Authentication 5): bearer → prefix check → sha256 →
// in-process cache → Postgres on a miss. A warm key runs no query and no await on I/O.
import type { Config } from "../config.ts";
import { GatewayError } from "../errors.ts";
import { bearer } from "../http/request.ts";
import { sha256Hex } from "../lib/crypto.ts";
import type { KeyCache } from "./key-cache.ts";
import type { KeyContext } from "./key-context.ts";

export type { KeyContext } from "./key-context.ts";

/** What routing-key auth uses: the site's address (for the signup hint) and the key cache. */
export interface AuthDeps {
  config: Pick<Config, "siteUrl">;
  services: { keyCache: Pick<KeyCache, "peek" | "load"> };
}

function signupRequired(ctx: AuthDeps, why: string): GatewayError {
  return new GatewayError(401, `${why} Inference needs a routing key (gw_…). An agent can sign up at ${ctx.config.siteUrl}/api/auth?action=agent-signup, then create a key with POST /v1/organizations/routing-keys.`, { code: "signup_required" });
}

function invalidKey(message: string): GatewayError {
  return new GatewayError(401, message, { code: "invalid_api_key" });
}

const UNKNOWN = "The routing key is unknown or revoked. Send a live gw_ key in the Authorization header; list or create keys with /v1/organizations/routing-keys.";


/** Checks the token's form; returns the key hash or throws the matching 401. Synchronous. */
export function routingKeyHash(ctx: AuthDeps, token: string | null): string {
  if (!token) throw signupRequired(ctx, "No API key was sent.");
  if (token.startsWith("sk-")) throw signupRequired(ctx, "That is an upstream provider key, not a gateway routing key; the gateway never forwards raw provider keys.");
  if (token.startsWith("sk_") || token.startsWith("rk_")) {
    throw invalidKey("That is an account token (sk_/rk_), which only works on the /v1/organizations management endpoints. Inference needs a routing key (gw_…): create one with POST /v1/organizations/routing-keys and send it instead.");
  }
  if (!token.startsWith("gw_") || token.length > 256) throw invalidKey(UNKNOWN);
  return hashOf(token);
}

/**
 * SHA-256 of recently seen routing keys, by raw value: a fleet sends the same few keys all day,
 * and hashing is ~1.5 % of a request. Bounded: past HASH_CACHE_MAX distinct keys it starts over.
 */
const HASH_CACHE_MAX = 10_000;
let hashes = new Map<string, string>();

function hashOf(token: string): string {
  let h = hashes.get(token);
  if (h === undefined) {
    h = sha256Hex(token);
    if (hashes.size >= HASH_CACHE_MAX) hashes = new Map();
    hashes.set(token, h);
  }
  return h;
}

function check(key: KeyContext | null): KeyContext {
  if (!key) throw invalidKey(UNKNOWN);
  // An unpaid account passing its deadline between the expiry sweep and now is already gone.
  if (key.accountExpiresAtMs !== null && key.accountExpiresAtMs <= Date.now()) throw invalidKey(UNKNOWN);
  return key;
}

/**
 * Where a client's SDK puts its API key besides `Authorization: Bearer`: Anthropic's in
 * `x-api-key`; Google's in `x-goog-api-key` or the `key` query parameter (CONTRACT §9), which
 * come first there (a Google client may also carry an unrelated Authorization).
 */
export type KeySource = "bearer" | "anthropic" | "google";

/** The routing key a request carries, by its protocol's places, or null. */
export function tokenOf(request: Request, from: KeySource): string | null {
  if (from === "google") {
    const goog = request.headers.get("x-goog-api-key")?.trim();
    if (goog) return goog;
    const q = request.url.includes("key=") ? new URL(request.url).searchParams.get("key")?.trim() : null;
    return q || bearer(request);
  }
  return bearer(request) ?? (from === "anthropic" ? request.headers.get("x-api-key")?.trim() || null : null);
}

/**
 * Resolves the request's routing key or throws (rejects with) 401 signup_required / invalid_api_key.
 * `from`: the client protocol's key places besides Authorization (true: Anthropic's `x-api-key`).
 */
export async function resolveRoutingKey(ctx: AuthDeps, request: Request, from: boolean | KeySource = false): Promise<KeyContext> {
  const token = tokenOf(request, from === true ? "anthropic" : from === false ? "bearer" : from);
  const hash = routingKeyHash(ctx, token);
  const kc = ctx.services.keyCache;
  const hit = kc.peek(hash);
  return check(hit !== undefined ? hit : await kc.load(hash));
}
