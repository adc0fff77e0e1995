// The response cache for a /blitz batch (docs/caching.md "/blitz"). Every prompt is looked up
// before admission: one answered from the cache is never admitted (no reservation, no rate
// limit), costs $0 and is recorded as a cache_hit with the cost it saved. Prompts share entries
// with POST /v1/chat/completions on the same key. Within a batch, identical prompts that missed
// go upstream once: the first leads, the others wait for its answer and replay it (their share
// of the reservation goes back unspent), or go upstream themselves when it brought no answer.
import type { KeyContext } from "../relay/key-context.ts";
import type { CachedAnswer } from "../cache/answer.ts";
import type { CacheControl } from "../cache/control.ts";
import type { PromptEntry, ResponseCache } from "../cache/response-cache.ts";
import type { Json } from "../protocols/types.ts";

/** A prompt's part in its batch's single flight: the leader's answer when it follows one; `done` ends its own lead. */
export interface Lead {
  answer: CachedAnswer | null;
  done(a: CachedAnswer | null): void;
}

export interface BatchCache {
  /** Per prompt: its entry key and fresh entry, or null when the cache does not apply to it. */
  entries: Array<PromptEntry | null>;
  /** The first prompt of `k` leads (answer null); a later one gets the leader's answer once it ends. */
  lead(k: string): Promise<Lead>;
}

export async function lookupBatch(cache: ResponseCache, key: KeyContext, prompts: Json[], cc: CacheControl): Promise<BatchCache> {
  const entries = await Promise.all(prompts.map((p) => cache.lookupPrompt(key, p, cc)));
  const flights = new Map<string, Promise<CachedAnswer | null>>();
  return {
    entries,
    async lead(k) {
      const running = flights.get(k);
      if (running) return { answer: await running, done: () => {} };
      let finish!: (a: CachedAnswer | null) => void;
      flights.set(k, new Promise((r) => (finish = r)));
      let ended = false;
      return {
        answer: null,
        done(a) {
          if (ended) return;
          ended = true;
          // A lead that ends without an answer lets the next identical prompt lead in its turn.
          if (!a) flights.delete(k);
          finish(a);
        },
      };
    },
  };
}
