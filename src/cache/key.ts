// The key of a cached answer (docs/caching.md "What makes two requests the same"): a versioned
// sha256 of the canonical JSON (keys sorted at every depth) of the endpoint, the routing key's
// route (its lanes with every setting, what they name and whether it still exists, the
// classifier), and the whole request body, the requested model included, minus the few fields
// below that cannot change the answer. Everything else is in it: messages, tools, tool_choice,
// parallel_tool_calls, reasoning effort, response_format, seed, temperature, output limits, and
// any field a future API adds. A PATCH of a lane, a rewire or a deleted credential is a new route.
import { createHash } from "node:crypto";
import type { Json } from "../protocols/types.ts";
import type { ResolvedLane } from "../providers/types.ts";
import { accountTag } from "./quota-scripts.ts";

/** Bumped whenever the canonical form or the entry format changes: old entries are never read again. */
export const CACHE_KEY_VERSION = 3;

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

/** The hash naming a request's answer on one endpoint and route (routeDigest). */
export function requestHash(endpoint: string, body: Json, route = ""): string {
  const kept: Json = {};
  for (const k in body) if (!IGNORED_FIELDS.includes(k)) kept[k] = body[k];
  return createHash("sha256").update(`v${CACHE_KEY_VERSION}\n${endpoint}\n${route}\n${canonicalJson(kept)}`).digest("base64url");
}

/** What of a routing key shapes the upstream call: its lanes and how one is chosen. */
export interface Route {
  mode: string;
  classifierProvider: string | null;
  classifierModel: string | null;
  classifierInstructions: string | null;
  classifierCredentialId: string | null;
  lanes: readonly ResolvedLane[];
}

/** A lane's resolved references (secrets among them): in the digest only as what they name, and whether it is there. */
const RESOLVED = new Set(["credential", "bridge", "subSession", "index"]);

const digests = new WeakMap<Route, string>();

/**
 * The digest of a key's route: each lane's every setting (provider, model, the credential,
 * session or bridge it names, reasoning_effort, verbosity, service_tier, fallback, category, and
 * any setting added later), whether what it names still exists (a deleted credential, a revoked
 * bridge or an ended session changes it), and the classifier's settings. Keys whose routes
 * differ never share an entry, `shared: true` or not. Computed once per loaded key context.
 */
export function routeDigest(route: Route): string {
  let d = digests.get(route);
  if (d !== undefined) return d;
  const lanes = route.lanes.map((l) => {
    const o: Json = {};
    for (const [k, v] of Object.entries(l)) if (!RESOLVED.has(k)) o[k] = v;
    o.resolved = [l.credential?.id ?? null, l.bridge?.id ?? null, l.subSession && l.subSession.status !== "revoked" ? l.subSession.id : null];
    return o;
  });
  const { mode, classifierProvider, classifierModel, classifierInstructions, classifierCredentialId } = route;
  d = createHash("sha256").update(canonicalJson({ mode, classifierProvider, classifierModel, classifierInstructions, classifierCredentialId, lanes })).digest("base64url");
  digests.set(route, d);
  return d;
}

/** Where a key's entries live: its own namespace, or its account's shared one. Never another account's. */
export interface CacheScope {
  accountId: string;
  keyId: string;
  shared: boolean;
  /** routeDigest() of the key: answers made through other lanes or settings are other entries. */
  route: string;
}

/**
 * The store key of an entry; the account is always part of it, as the hash tag its quota's
 * bookkeeping shares (quota-scripts.ts), so one script writes the entry and counts its bytes.
 */
export function entryKey(scope: CacheScope, endpoint: string, body: Json): string {
  const ns = scope.shared ? "shared" : `key:${scope.keyId}`;
  return `gw:rc:v${CACHE_KEY_VERSION}:${accountTag(scope.accountId)}:${ns}:${requestHash(endpoint, body, scope.route)}`;
}
