// Slices: how one instance serves a hot key without a Redis round trip per request, for rate
// limits (relay/limits/rate-limits.ts) and budgets (money/leases.ts) alike. A key is hot on
// an instance when it sees a second admission within SLICE_MS; with its next admission the
// instance then reserves a slice of what the key has left, atomically in Redis like any
// reservation, and admits the following requests from it locally. A slice is at most a tenth of
// the key's limit shared among the live instances and at most a quarter of what remains, so slices
// shrink as the key runs low, and one too small to serve a few more requests is not taken: near
// the end every request is admitted in Redis again, and the shared limit holds across instances.

/** How long a key stays hot after an admission (and a rate-limit slice serves requests). */
export const SLICE_MS = 1000;

/** What the last admission on this instance told about a key. */
export interface Seen<T> {
  at: number;
  left: T;
}

/** The keys admitted lately on this instance, with what their last admission left. */
export class HotKeys<T> {
  private seen = new Map<string, Seen<T>>();

  /** Notes an admission's verdict (what the key has left after it). */
  admitted(keyId: string, left: T, now = Date.now()): void {
    if (this.seen.size > 10_000) this.seen.clear();
    this.seen.set(keyId, { at: now, left });
  }

  /** What the key had left at its last admission when that was within SLICE_MS; else null. */
  hot(keyId: string, now = Date.now()): T | null {
    const s = this.seen.get(keyId);
    return s && now - s.at <= SLICE_MS ? s.left : null;
  }

  forget(keyId: string): void {
    this.seen.delete(keyId);
  }

  /** Drops what is no longer hot (called now and then). */
  prune(now = Date.now()): void {
    for (const [id, s] of this.seen) if (now - s.at > SLICE_MS) this.seen.delete(id);
  }
}

/**
 * A slice's size in the key's unit (requests, tokens, nano-dollars): a tenth of the limit shared
 * among the live instances, at most a quarter of what remains (floored).
 */
export function sliceSize(limit: number, remaining: number, liveInstances: number): number {
  const n = 10 * Math.max(1, liveInstances);
  return Math.max(0, Math.min(Math.floor(limit / n), Math.floor(remaining / 4)));
}
