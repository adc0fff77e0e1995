// Tags (CONTRACT §9): attribution below the routing key. A request names its tags in the header
// `x-gateway-tags: t1,t2` or, when it sends no such header, in its body as `metadata.tags` (an
// array of strings); they are written on every usage record of the request and read back by
// /usage/records?tag= and /usage/groups?by=tag. At most MAX_TAGS distinct tags of 1 to
// MAX_TAG_CHARS characters from A-Za-z0-9_.:- ; anything else is a 400 naming where it came from.
// Duplicates collapse to one (a record counts once in a tag's group); spaces around a comma are
// allowed (HTTP list syntax). Hand-written, one pass per character: a request without the header
// pays one header lookup and one property read of its body.
import { GatewayError } from "../errors.ts";
import type { Json } from "../protocols/types.ts";

export const TAGS_HEADER = "x-gateway-tags";
export const MAX_TAGS = 10;
export const MAX_TAG_CHARS = 64;

/** 1 for each character a tag may hold (A-Z a-z 0-9 _ . : -). */
const ALLOWED = new Uint8Array(128);
for (let c = 48; c <= 57; c++) ALLOWED[c] = 1;
for (let c = 65; c <= 90; c++) ALLOWED[c] = 1;
for (let c = 97; c <= 122; c++) ALLOWED[c] = 1;
for (const ch of "_.:-") ALLOWED[ch.charCodeAt(0)] = 1;

const RULE = `at most ${MAX_TAGS} tags of 1 to ${MAX_TAG_CHARS} characters from A-Z a-z 0-9 _ . : -`;

/** The 400 of a tag list that breaks the rule, in the client protocol's error shape (errors.ts). */
export function invalidTags(where: string, why: string): GatewayError {
  return new GatewayError(400, `Invalid \`${where}\`: ${why}. Send ${RULE}, e.g. \`${TAGS_HEADER}: team-search,run:42\`.`, {
    type: "invalid_request_error", code: "invalid_tags", param: where === TAGS_HEADER ? null : where,
  });
}

/** A routing key with require_tags: true answers an untagged request with this 400. */
export function tagsRequired(): GatewayError {
  return new GatewayError(400, `This routing key requires tags: send the \`${TAGS_HEADER}\` header (${RULE}, comma-separated) or \`metadata.tags\` in the body. The key's owner can turn this off with PATCH /v1/organizations/routing-keys/{id} {"require_tags": false}.`, {
    type: "invalid_request_error", code: "tags_required", param: null,
  });
}

const shown = (s: string) => JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}…` : s);

/** Checks one tag; returns why it breaks the rule, or null. */
function badTag(t: string): string | null {
  if (t.length === 0) return "a tag is empty";
  if (t.length > MAX_TAG_CHARS) return `tag ${shown(t)} is ${t.length} characters long (at most ${MAX_TAG_CHARS})`;
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c >= 128 || ALLOWED[c] === 0) return `tag ${shown(t)} holds ${JSON.stringify(t[i])}, which is not allowed`;
  }
  return null;
}

/** True when `s` is one well-formed tag (the usage reads' `tag=` filter). */
export const isTag = (s: string): boolean => badTag(s) === null;

/** Adds `t` to `out` unless it is there; throws past MAX_TAGS distinct tags. */
function addTag(out: string[], t: string, where: string): void {
  const why = badTag(t);
  if (why !== null) throw invalidTags(where, why);
  if (out.includes(t)) return;
  if (out.length === MAX_TAGS) throw invalidTags(where, `more than ${MAX_TAGS} tags`);
  out.push(t);
}

const isSpace = (c: number) => c === 32 || c === 9;

/** The header's value as a tag list (spaces around commas allowed); throws the 400 naming the header. */
export function parseTagsHeader(value: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (let i = 0; i <= value.length; i++) {
    if (i < value.length && value.charCodeAt(i) !== 44 /* , */) continue;
    let a = start;
    let b = i;
    while (a < b && isSpace(value.charCodeAt(a))) a++;
    while (b > a && isSpace(value.charCodeAt(b - 1))) b--;
    addTag(out, value.slice(a, b), TAGS_HEADER);
    start = i + 1;
  }
  return out;
}

/** `metadata.tags` as a tag list; throws the 400 naming it. An empty array is no tags. */
export function parseTagsArray(tags: unknown[]): string[] {
  const out: string[] = [];
  for (const t of tags) {
    if (typeof t !== "string") throw invalidTags("metadata.tags", `${JSON.stringify(t)?.slice(0, 40) ?? String(t)} is not a string`);
    addTag(out, t, "metadata.tags");
  }
  return out;
}

/**
 * The request's tags, or null when it has none: the header first; else the body's
 * `metadata.tags` when it is an array. A `metadata.tags` array is the gateway's and is taken off
 * the body (the vendors' `metadata` holds string values only, or no such member at all: OpenAI
 * refuses an array there, Anthropic any member but user_id), and `metadata` with it when nothing
 * else is left in it, whichever of the two named the tags. Any other `metadata.tags` (a string:
 * OpenAI's own metadata) is the client's and goes upstream as sent.
 */
export function requestTags(headers: Headers, body: Json | null): string[] | null {
  const header = headers.get(TAGS_HEADER);
  const meta = body?.metadata;
  let fromBody: unknown[] | null = null;
  if (meta !== null && typeof meta === "object" && !Array.isArray(meta) && Array.isArray((meta as Json).tags)) {
    fromBody = (meta as Json).tags as unknown[];
    const { tags: _, ...rest } = meta as Json;
    // A new top-level value: a pass-through body serialises it afresh (wire-json.ts).
    if (Object.keys(rest).length > 0) body!.metadata = rest;
    else delete body!.metadata;
  }
  if (header !== null) return parseTagsHeader(header);
  if (fromBody === null) return null;
  const tags = parseTagsArray(fromBody);
  return tags.length > 0 ? tags : null;
}

/**
 * /blitz and /blitz/jobs: tags are the batch's (the header, or the top-level `metadata.tags`, taken
 * off before the prompts are built). A prompt object's own `metadata.tags` array is refused, 400
 * naming it, rather than sent to a vendor that would refuse it or silently not counted.
 */
export function refusePromptTags(requests: Json[]): void {
  for (let i = 0; i < requests.length; i++) {
    const m = requests[i]!.metadata;
    if (m !== null && typeof m === "object" && !Array.isArray(m) && Array.isArray((m as Json).tags)) {
      throw new GatewayError(400, `prompts[${i}].metadata.tags is not accepted: a batch's tags go on every prompt. Send them in the \`${TAGS_HEADER}\` header or the top-level metadata.tags.`, { code: "invalid_tags" });
    }
  }
}
