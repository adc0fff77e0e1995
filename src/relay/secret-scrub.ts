// Removes a lane's own secret from upstream error text before it reaches a client or a log. An
// upstream (or a tenant's bridge) may echo the key it was sent, whole or in part, plainly or
// encoded: every substring of at least MIN_FRAGMENT characters of the secret, of its URL and
// JSON escapes, its hex and its base64 (at each of the three byte alignments, so the base64 of
// any fragment is caught too) is redacted.
//
// Matching is by a set of the secret's MIN_FRAGMENT-grams, built once per secret and cached, and
// looked up only where the text holds a run of MIN_FRAGMENT characters that all occur in the
// secret's forms: a text of n characters costs one pass plus a lookup per such position, whatever
// the secret's length. The text is scanned whole and comes back unchanged (the same string) when
// nothing was redacted: the pass-through stream relies on that to deliver events of any size intact.
import type { UpstreamCall } from "../providers/types.ts";

/** The shortest fragment of a secret that is redacted. */
export const MIN_FRAGMENT = 8;
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

/** A secret's grams, and the characters they are made of (a gram can only start a run of these). */
interface Grams { set: Set<string>; ascii: Uint8Array; other: Set<number> }

const gramCache = new Map<string, Grams>();

function gramsOf(secret: string): Grams {
  let grams = gramCache.get(secret);
  if (grams) return grams;
  grams = { set: new Set(), ascii: new Uint8Array(128), other: new Set() };
  for (const form of encodingsOf(secret)) {
    for (let i = 0; i + MIN_FRAGMENT <= form.length; i++) grams.set.add(form.slice(i, i + MIN_FRAGMENT));
    for (let i = 0; i < form.length; i++) {
      const c = form.charCodeAt(i);
      if (c < 128) grams.ascii[c] = 1;
      else grams.other.add(c);
    }
  }
  // A small cache: the lanes in use at a time; the oldest entry goes first.
  if (gramCache.size >= 256) gramCache.delete(gramCache.keys().next().value!);
  gramCache.set(secret, grams);
  return grams;
}

function occursIn(sets: readonly Grams[], c: number): boolean {
  for (const g of sets) if (c < 128 ? g.ascii[c] === 1 : g.other.has(c)) return true;
  return false;
}

/**
 * `text` with every run made of the secrets' fragments (≥ MIN_FRAGMENT characters) replaced. The
 * whole text is scanned, in linear time; when nothing matched, `text` itself is returned.
 */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  if (secrets.length === 0 || text.length < MIN_FRAGMENT) return text;
  const sets: Grams[] = [];
  for (const s of secrets) if (s.length >= MIN_FRAGMENT) sets.push(gramsOf(s));
  if (sets.length === 0) return text;
  let out = "";
  let copied = 0; // text[0, copied) is in `out` already
  let coveredTo = -1; // end of the current redacted run
  let runStart = -1;
  // run: how many characters up to and including text[j] occur in some secret's forms.
  let run = 0;
  for (let j = 0; j < text.length; j++) {
    run = occursIn(sets, text.charCodeAt(j)) ? run + 1 : 0;
    if (run < MIN_FRAGMENT) continue;
    const i = j + 1 - MIN_FRAGMENT;
    const gram = text.slice(i, j + 1);
    let hit = false;
    for (const g of sets) if (g.set.has(gram)) { hit = true; break; }
    if (!hit) continue;
    if (i > coveredTo) {
      if (runStart >= 0) { out += REDACTED; copied = coveredTo; }
      out += text.slice(copied, i);
      runStart = i;
    }
    coveredTo = j + 1;
  }
  if (runStart < 0) return text;
  out += REDACTED + text.slice(coveredTo);
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
