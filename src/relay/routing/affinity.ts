// Session affinity (CONTRACT §9, docs/behaviour.md): a session's next request tries first the lane
// (and so the credential, sub session or bridge) that served its last successful one, so the
// vendor's prompt cache for the conversation stays warm. Failover is unchanged: a session whose
// lane failed is served by the next one and sticks to it from then on.
//
// The session is a function of the request alone (headers and the parsed body's top-level
// fields), the same for every client protocol. Its lane is kept in the shared KV under the routing
// key's hash tag, with an idle TTL: read once per request, in parallel with the admission; written
// after an answer, off the request's path (the writes of one event-loop turn go out together, and
// a lane already written recently is not written again).
import { LRUCache } from "lru-cache";
import { sha256Hex } from "../../lib/crypto.ts";
import type { Logger } from "../../logger.ts";
import type { Json } from "../../protocols/types.ts";
import type { ResolvedLane } from "../../providers/types.ts";
import type { KV } from "../../store/kv/types.ts";
import { laneIdentity } from "./cooldowns.ts";

/** Request headers that name a session, first present wins (then the body's fields). */
export const SESSION_HEADERS = ["x-session-id", "x-claude-code-session-id", "session-id", "x-session-affinity", "thread-id"] as const;

/** A longer session id is cut here (it is hashed anyway; this bounds the hashing). */
const MAX_SESSION_CHARS = 512;

const present = (v: unknown): v is string => typeof v === "string" && v.length > 0;

/**
 * The request's session: the first present of the headers above, then the body's
 * `prompt_cache_key`, `metadata.user_id`, `user`; null when none is. The body is the one the
 * request path already parsed: reading its top-level fields costs no parse.
 */
export function sessionOf(headers: Headers, body: Json): string | null {
  for (const h of SESSION_HEADERS) {
    const v = headers.get(h);
    if (v !== null && v.length > 0) return v.slice(0, MAX_SESSION_CHARS);
  }
  if (present(body.prompt_cache_key)) return body.prompt_cache_key.slice(0, MAX_SESSION_CHARS);
  const md = body.metadata;
  if (md !== null && typeof md === "object" && present((md as Json).user_id)) return ((md as Json).user_id as string).slice(0, MAX_SESSION_CHARS);
  if (present(body.user)) return body.user.slice(0, MAX_SESSION_CHARS);
  return null;
}

/** What affinity did for one attempt: its lane is the session's (followed), another (moved), or the session had none (new). */
export type AffinityResult = "followed" | "moved" | "new";

/** One request's session, as the executor carries it (RelayRequest.affinity). */
export interface RequestAffinity {
  /** The session's entry in the store. */
  entry: string;
  ttlSeconds: number;
  /** The lane identity the session was last served by (cooldowns.ts laneIdentity), null for a new session. */
  remembered: string | null;
}

/** The session's result for an attempt on `lane`. */
export function affinityResult(a: RequestAffinity, lane: ResolvedLane): AffinityResult {
  if (a.remembered === null) return "new";
  return laneIdentity(lane) === a.remembered ? "followed" : "moved";
}

/** The stored value: "<lane index>|<lane identity>" (the index finds the lane again when two share an identity). */
const valueOf = (lane: ResolvedLane) => `${lane.index}|${laneIdentity(lane)}`;

/**
 * `lanes` with the session's remembered lane first (the rest in their order), and that lane's
 * identity; the lanes as they are when the value names no lane of the key (it was rewired).
 */
export function affinityFirst(lanes: ResolvedLane[], stored: string | null): { lanes: ResolvedLane[]; remembered: string | null; found: boolean } {
  if (stored === null) return { lanes, remembered: null, found: false };
  const cut = stored.indexOf("|");
  const index = Number(stored.slice(0, cut));
  const id = stored.slice(cut + 1);
  const lane = lanes.find((l) => l.index === index && laneIdentity(l) === id) ?? lanes.find((l) => laneIdentity(l) === id);
  if (!lane) return { lanes, remembered: id, found: false };
  if (lanes[0] === lane) return { lanes, remembered: id, found: true };
  return { lanes: [lane, ...lanes.filter((l) => l !== lane)], remembered: id, found: true };
}

/** How stale a written entry may get before the same lane is written again (its idle TTL restarted): a tenth of the TTL. */
const REWRITE_FRACTION = 0.1;

/** The sessions' lanes in the KV, written in batches off the request path. */
export class SessionAffinity {
  private pending = new Map<string, { value: string; ttlSeconds: number }>();
  private scheduled = false;
  /** What this instance last wrote per entry and when, to skip rewriting the same lane on every turn. */
  private written = new LRUCache<string, { value: string; at: number }>({ max: 50_000 });

  constructor(private deps: { kv: KV; log: Logger }) {}

  /** The store entry of a routing key's session (hashed: a session id can be a user's id). */
  entryOf(keyId: string, session: string): string {
    return `gw:{k:${keyId}}:aff:${sha256Hex(session).slice(0, 32)}`;
  }

  /** The session's remembered lane value, or null (none, or the store could not be read: the chain order then). */
  lookup(entry: string): Promise<string | null> {
    // A write of this instance still to go out is the newest value there is.
    const pending = this.pending.get(entry);
    if (pending) return Promise.resolve(pending.value);
    return this.deps.kv.get(entry).catch(() => null);
  }

  /** The session was served by `lane`: remembered for its TTL from now, written with this turn's others. */
  remember(a: RequestAffinity, lane: ResolvedLane): void {
    const value = valueOf(lane);
    const w = this.written.get(a.entry);
    if (w && w.value === value && Date.now() - w.at < a.ttlSeconds * 1000 * REWRITE_FRACTION) return;
    this.pending.set(a.entry, { value, ttlSeconds: a.ttlSeconds });
    if (this.scheduled) return;
    this.scheduled = true;
    setTimeout(() => this.flush(), 0);
  }

  /** Writes what is pending (also at shutdown). */
  async flush(): Promise<void> {
    this.scheduled = false;
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    const now = Date.now();
    await Promise.all([...batch].map(([entry, { value, ttlSeconds }]) => {
      this.written.set(entry, { value, at: now });
      return this.deps.kv.set(entry, value, ttlSeconds).catch((e: unknown) => {
        this.written.delete(entry);
        this.deps.log.warn({ err: e instanceof Error ? e.message : String(e) }, "session affinity not written: the session's next request follows the chain order");
      });
    }));
  }
}
