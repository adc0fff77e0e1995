// The key of a cached answer (docs/caching.md "What makes two requests the same"): a versioned
// sha256 of the canonical JSON (keys sorted at every depth) of the endpoint and the whole request
// body, the requested model included, minus the few fields below that cannot change the answer.
// Everything else is in it: messages, tools, tool_choice, parallel_tool_calls, reasoning effort,
// response_format, seed, temperature, output limits, and any field a future API adds.
import { createHash } from "node:crypto";
import type { Json } from "../../protocols/types.ts";
import { accountTag } from "./quota-scripts.ts";

/** Bumped whenever the canonical form or the entry format changes: old entries are never read again. */
export const CACHE_KEY_VERSION = 2;

/**
 * Body fields left out of the key: how the answer is delivered (stream, stream_options), who
 * asked (user, safety_identifier, metadata), and the vendor's own storage and prompt-cache hints.
 */
export const IGNORED_FIELDS: readonly string[] = ["stream", "stream_options", "user", "metadata", "store", "safety_identifier", "prompt_cache_key"];

/** JSON with object keys sorted at every depth (arrays keep their order: it is meaning). */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== "object") return JSON.stringify(v) ?? "null";
  if (Array.isArray(v)) return `[${v.map((x) => (x === undefined || typeof x === "function" ? "null" : canonicalJson(x))).join(",")}]`;
  const keys = Object.keys(v).sort();
  let s = "";
  for (const k of keys) {
    const x = (v as Json)[k];
    if (x === undefined || typeof x === "function") continue;
    s += `${s ? "," : ""}${JSON.stringify(k)}:${canonicalJson(x)}`;
  }
  return `{${s}}`;
}

/** The hash naming a request's answer on one endpoint. */
export function requestHash(endpoint: string, body: Json): string {
  const kept: Json = {};
  for (const k in body) if (!IGNORED_FIELDS.includes(k)) kept[k] = body[k];
  return createHash("sha256").update(`v${CACHE_KEY_VERSION}\n${endpoint}\n${canonicalJson(kept)}`).digest("base64url");
}

/** Where a key's entries live: its own namespace, or its account's shared one. Never another account's. */
export interface CacheScope {
  accountId: string;
  keyId: string;
  shared: boolean;
}

/**
 * The store key of an entry; the account is always part of it, as the hash tag its quota's
 * bookkeeping shares (quota-scripts.ts), so one script writes the entry and counts its bytes.
 */
export function entryKey(scope: CacheScope, endpoint: string, body: Json): string {
  const ns = scope.shared ? "shared" : `key:${scope.keyId}`;
  return `gw:rc:v${CACHE_KEY_VERSION}:${accountTag(scope.accountId)}:${ns}:${requestHash(endpoint, body)}`;
}
