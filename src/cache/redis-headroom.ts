// The cache's writes stop before a Redis shared with the budgets is full. With `noeviction` (the
// policy that Redis must run when it holds budget counters) a full Redis refuses every write,
// and budgeted requests then answer 503 budget_unavailable: the cache must never be what fills
// it. So while Redis's used memory, as last sampled plus what this instance has written since,
// is above a share of its `maxmemory`, nothing is written; an OOM answer stops writes for a
// while (growing while Redis stays full). A Redis that evicts on its own (allkeys-*), or has no
// maxmemory, is left to do so: only the quotas apply there.
import type Redis from "ioredis";

/** How often Redis's memory is sampled (INFO memory), at most; a sample is taken off a write's path. */
const SAMPLE_MS = 1000;
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 60_000;

/** used_memory, maxmemory and the policy from an INFO memory reply. */
export function parseMemoryInfo(info: string): { used: number; max: number; policy: string } {
  const field = (name: string) => {
    const at = info.indexOf(`\n${name}:`);
    if (at < 0) return "";
    const from = at + name.length + 2;
    const end = info.indexOf("\n", from);
    return info.slice(from, end < 0 ? undefined : end).trim();
  };
  return { used: Number(field("used_memory")) || 0, max: Number(field("maxmemory")) || 0, policy: field("maxmemory_policy") };
}

export class RedisHeadroom {
  private sampledAt = 0;
  private sampling = false;
  /** Bytes the cache may still write before the limit, as of the last sample (Infinity: no limit). */
  private room = Infinity;
  private blockedUntil = 0;
  private backoffMs = BACKOFF_MIN_MS;

  /** The cache leaves a non-evicting Redis `100 - percent` % of its maxmemory free (for budgets and limits). */
  constructor(private r: Redis, private percent: number) {
    void this.sample(); // ready before the first write, which then never waits for it
  }

  /** True when writing `size` bytes leaves Redis the room the rest of the gateway needs. */
  async admits(size: number): Promise<boolean> {
    const now = Date.now();
    if (now < this.blockedUntil) return false;
    if (now - this.sampledAt >= SAMPLE_MS) {
      if (this.sampledAt === 0) await this.sample(); // no sample yet (Redis was unreachable at start)
      else void this.sample();
    }
    return size <= this.room;
  }

  /** A write of `size` bytes went through: it counts until the next sample sees it. */
  wrote(size: number): void {
    this.room -= size;
    this.backoffMs = BACKOFF_MIN_MS;
  }

  /** Redis answered OOM: no writes for a while, longer each time it happens again. */
  refused(): void {
    this.blockedUntil = Date.now() + this.backoffMs;
    this.backoffMs = Math.min(BACKOFF_MAX_MS, this.backoffMs * 2);
    this.room = 0;
  }

  private async sample(): Promise<void> {
    if (this.sampling) return;
    this.sampling = true;
    try {
      const m = parseMemoryInfo(`\n${await this.r.info("memory")}`);
      this.room = m.max > 0 && !m.policy.startsWith("allkeys") ? (m.max * this.percent) / 100 - m.used : Infinity;
      this.sampledAt = Date.now();
    } catch {
      // Unreachable: the write will fail on its own. Before any sample got through, the next
      // write asks again (and waits for the answer); after one, the last sample stands a while.
      if (this.sampledAt !== 0) this.sampledAt = Date.now();
    } finally {
      this.sampling = false;
    }
  }
}
