// Removes a lane's own secret from upstream error text before it reaches a client or a log. An
// upstream (or a tenant's bridge) may echo the key it was sent, whole or in part, plainly or
// encoded: every substring of at least MIN_FRAGMENT characters of the secret, of its URL and
// JSON escapes, its hex and its base64 (at each of the three byte alignments, so the base64 of
// any fragment is caught too) is redacted.
//
// Matching is by a set of the secret's MIN_FRAGMENT-grams, built once per secret and cached: a
// text of n characters costs n substring lookups, whatever the secret's length.
import type { UpstreamCall } from "../providers/types.ts";

/** The shortest fragment of a secret that is redacted. */
export const MIN_FRAGMENT = 8;
/** Upstream error text longer than this is cut before scanning (clients see at most 600 characters). */
const MAX_SCANNED = 16 * 1024;
const REDACTED = "[redacted]";

/** The forms a secret is known to travel in. */
export function encodingsOf(secret: string): string[] {
  const bytes = Buffer.from(secret, "utf8");
  const url = encodeURIComponent(secret);
  const forms = new Set<string>([secret, url, url.toLowerCase(), JSON.stringify(secret).slice(1, -1), bytes.toString("hex"), bytes.toString("hex").toUpperCase()]);
  for (let off = 0; off < 3 && off < bytes.length; off++) {
    const part = bytes.subarray(off);
    forms.add(part.toString("base64").replace(/=+$/, ""));
    forms.add(part.toString("base64url"));
  }
  return [...forms];
}

const gramCache = new Map<string, Set<string>>();

function gramsOf(secret: string): Set<string> {
  let grams = gramCache.get(secret);
  if (grams) return grams;
  grams = new Set();
  for (const form of encodingsOf(secret)) {
    for (let i = 0; i + MIN_FRAGMENT <= form.length; i++) grams.add(form.slice(i, i + MIN_FRAGMENT));
  }
  // A small cache: the lanes in use at a time; the oldest entry goes first.
  if (gramCache.size >= 256) gramCache.delete(gramCache.keys().next().value!);
  gramCache.set(secret, grams);
  return grams;
}

/** `text` with every run made of the secrets' fragments (≥ MIN_FRAGMENT characters) replaced. */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  if (secrets.length === 0 || text.length < MIN_FRAGMENT) return text;
  const t = text.length > MAX_SCANNED ? text.slice(0, MAX_SCANNED) : text;
  const sets: Set<string>[] = [];
  for (const s of secrets) if (s.length >= MIN_FRAGMENT) sets.push(gramsOf(s));
  if (sets.length === 0) return t;
  let out = "";
  let copied = 0; // t[0, copied) is in `out` already
  let coveredTo = -1; // end of the current redacted run
  let runStart = -1;
  for (let i = 0; i + MIN_FRAGMENT <= t.length; i++) {
    const gram = t.slice(i, i + MIN_FRAGMENT);
    let hit = false;
    for (const g of sets) if (g.has(gram)) { hit = true; break; }
    if (!hit) continue;
    if (i > coveredTo) {
      if (runStart >= 0) { out += REDACTED; copied = coveredTo; }
      out += t.slice(copied, i);
      runStart = i;
    }
    coveredTo = i + MIN_FRAGMENT;
  }
  if (runStart < 0) return t;
  out += REDACTED + t.slice(coveredTo);
  return out;
}

const CREDENTIAL_HEADER = /key|token|secret|authorization|signature/i;

/**
 * The secrets an upstream call carries: credential header values (without an auth scheme such as
 * `Bearer `) and a `key` query parameter. These are what the lane's upstream could echo.
 */
export function secretsOfCall(call: UpstreamCall): string[] {
  const out: string[] = [];
  for (const name in call.headers) {
    if (!CREDENTIAL_HEADER.test(name)) continue;
    const v = call.headers[name]!.trim();
    const sp = v.indexOf(" ");
    out.push(sp > 0 && sp < 10 ? v.slice(sp + 1).trim() : v);
  }
  const q = call.url.indexOf("?");
  if (q >= 0) {
    for (const [k, v] of new URLSearchParams(call.url.slice(q + 1))) if (CREDENTIAL_HEADER.test(k)) out.push(v);
  }
  return out;
}
