// A deadline on Redis replies without a timer per command (CONTRACT §7: outages answer fast).
// ioredis' own `commandTimeout` arms and clears a timer for every command it sends — two per
// budgeted request, the largest per-request cost the durable ledger's client settings added
// (bench/PROFILE.md, "The regression"). One timer per connection does the same job: replies come
// back in the order commands were sent, so a Redis that does not answer shows as the oldest
// waiting command staying at the head of the connection's queue. When it has stayed there for
// `timeoutMs`, the connection is dropped: with maxRetriesPerRequest 0 every waiting command fails
// at once, commands sent meanwhile fail fast (no offline queue), and ioredis reconnects.
import type Redis from "ioredis";

interface CommandQueue {
  length: number;
  peekFront(): unknown;
}

/** Starts the watchdog on `conn`; returns its stop. A command waits at most about `timeoutMs` + `timeoutMs` / 4. */
export function watchReplies(conn: Redis, timeoutMs: number): () => void {
  const tickMs = Math.max(5, Math.floor(timeoutMs / 4));
  let head: unknown = null;
  let since = 0;
  const tick = setInterval(() => {
    const queue = (conn as unknown as { commandQueue?: CommandQueue }).commandQueue;
    const front = queue && queue.length > 0 ? queue.peekFront() : null;
    if (front === null || front === undefined) {
      head = null;
      return;
    }
    const now = performance.now();
    if (front !== head) {
      // First seen now; it was sent at most one tick ago, so it is judged one tick early.
      head = front;
      since = now - tickMs;
      return;
    }
    if (now - since >= timeoutMs) {
      head = null;
      conn.disconnect(true);
    }
  }, tickMs);
  tick.unref?.();
  return () => clearInterval(tick);
}
