// A deadline on Redis replies without a timer per command (CONTRACT §7: outages answer fast).
// ioredis' own `commandTimeout` arms and clears a timer for every command it sends — two per
// budgeted request, the largest per-request cost the durable ledger's client settings added
// (bench/PROFILE.md, "The regression"). One timer per connection does the same job: replies come
// back in the order commands were sent, so a Redis that does not answer shows as the oldest
// waiting command staying at the head of the connection's queue with no byte arriving. When it has
// stayed there for `timeoutMs`, the connection is dropped: with maxRetriesPerRequest 0 every
// waiting command fails at once, commands sent meanwhile fail fast (no offline queue), and ioredis
// reconnects. A reply still arriving (a large one on a busy instance) is progress, not a freeze.
import type Redis from "ioredis";

interface CommandQueue {
  length: number;
  peekFront(): unknown;
}

/** Bytes the connection's socket has read so far (0 while it has none). */
const bytesRead = (conn: Redis) => (conn as unknown as { stream?: { bytesRead?: number } }).stream?.bytesRead ?? 0;

/** Starts the watchdog on `conn`; returns its stop. A command waits at most about `timeoutMs` + `timeoutMs` / 4. */
export function watchReplies(conn: Redis, timeoutMs: number): () => void {
  const tickMs = Math.max(5, Math.floor(timeoutMs / 4));
  let head: unknown = null;
  let since = 0;
  let read = 0;
  const tick = setInterval(() => {
    const queue = (conn as unknown as { commandQueue?: CommandQueue }).commandQueue;
    const front = queue && queue.length > 0 ? queue.peekFront() : null;
    const bytes = bytesRead(conn);
    const progressed = bytes !== read;
    read = bytes;
    if (front === null || front === undefined) {
      head = null;
      return;
    }
    const now = performance.now();
    if (front !== head || progressed) {
      // First seen now, or part of its reply came in since the last tick: judged from here, one
      // tick early (it was sent or last heard of at most one tick ago).
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
