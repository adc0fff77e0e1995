// A request's say over the cache (docs/caching.md "Bypassing the cache"): the standard
// Cache-Control request directives, and which requests the cache never answers.
import type { ClientShape, Json } from "../protocols/types.ts";

export interface CacheControl {
  /** Neither read nor write an entry. */
  noStore: boolean;
  /** Do not answer from an entry; the fresh answer is still stored. */
  noCache: boolean;
  /** Accept an entry at most this many seconds old (null: up to the key's TTL). */
  maxAge: number | null;
}

const NONE: CacheControl = { noStore: false, noCache: false, maxAge: null };

/** Parses Cache-Control; unknown directives and malformed values are ignored, as HTTP caches do. */
export function cacheControlOf(header: string | null): CacheControl {
  if (!header) return NONE;
  const cc: CacheControl = { noStore: false, noCache: false, maxAge: null };
  for (const raw of header.split(",")) {
    const d = raw.trim().toLowerCase();
    if (d === "no-store") cc.noStore = true;
    else if (d === "no-cache") cc.noCache = true;
    else if (d.startsWith("max-age=")) {
      const v = d.slice(8).replace(/^"|"$/g, "");
      if (/^\d{1,10}$/.test(v)) cc.maxAge = Math.min(cc.maxAge ?? Infinity, Number(v));
    }
  }
  return cc;
}

/**
 * Requests whose answer the cache never keeps: several choices (`n` > 1; replays carry one), and
 * Responses that live on the vendor's side (`background`, `previous_response_id`, `conversation`:
 * the answer depends on state the body does not show). A Responses request the vendor stores
 * (`store` left out or true, OpenAI's default) is not cached either: its answer's `resp_` id can
 * be referred back to (`previous_response_id`), and a hit's id, made up, could not.
 */
export function cacheableRequest(shape: ClientShape, body: Json): boolean {
  if (typeof body.n === "number" && body.n !== 1) return false;
  if (shape === "responses" && (body.store !== false || body.background === true || body.previous_response_id != null || body.conversation != null)) return false;
  return true;
}
