// CONTRACT §7 (outages answer fast) without a timer per Redis command: the reply deadline is one
// watchdog per connection (src/store/kv/reply-watchdog.ts). A redis-server of the test's own is
// frozen (SIGSTOP) and thawed by PID; real stores only.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { REAL_STORES } from "../helpers/gateway.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { COMMAND_TIMEOUT_MS, RedisKV } from "../../src/store/kv/redis.ts";

const name = REAL_STORES ? "Redis reply deadline (own redis-server)" : "Redis reply deadline: skipped in embedded mode (needs a real redis-server to freeze)";

describe.if(REAL_STORES)(name, () => {
  let redis: PrivateRedis;
  let kv: RedisKV;
  beforeAll(async () => {
    redis = await startPrivateRedis();
    kv = new RedisKV(redis.url);
    await kv.ping();
  }, 60_000);
  afterAll(async () => {
    redis?.thaw();
    await kv?.close();
    await redis?.stop();
  }, 60_000);

  test("CONTRACT §7: commands on the hot path arm no timer of their own (the deadline is one watchdog per connection)", async () => {
    const original = globalThis.setTimeout;
    let armed = 0;
    globalThis.setTimeout = Object.assign((...a: Parameters<typeof setTimeout>) => { armed++; return original(...a); }, original) as typeof setTimeout;
    try {
      await Promise.all(Array.from({ length: 200 }, (_, i) => kv.set(`deadline:${i}`, "1", 60)));
      for (let i = 0; i < 50; i++) await kv.getNumber(`deadline:${i}`);
    } finally {
      globalThis.setTimeout = original;
    }
    expect(armed).toBe(0);
  });

  test("CONTRACT §7: a frozen Redis fails every waiting command about the deadline after it was sent, and commands succeed again once it answers", async () => {
    redis.freeze();
    let results: Array<{ ok: boolean; ms: number }>;
    try {
      const t = performance.now();
      results = await Promise.all(Array.from({ length: 5 }, () => kv.getNumber("deadline:1").then(() => ({ ok: true, ms: performance.now() - t }), () => ({ ok: false, ms: performance.now() - t }))));
      // While the connection is being re-established to a Redis that still does not answer, a
      // command fails at once rather than waiting.
      const again = performance.now();
      const next = await kv.getNumber("deadline:2").then(() => true, () => false);
      expect(next).toBe(false);
      expect(performance.now() - again).toBeLessThan(COMMAND_TIMEOUT_MS * 4);
    } finally {
      redis.thaw();
    }
    expect(results.every((r) => !r.ok)).toBe(true);
    // Not before the deadline's first check; well within a bound a loaded machine keeps.
    for (const r of results) {
      expect(r.ms).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS / 2);
      expect(r.ms).toBeLessThan(3000);
    }
    let back = false;
    for (let i = 0; i < 50 && !back; i++) {
      back = await kv.getNumber("deadline:3").then(() => true, () => false);
      if (!back) await Bun.sleep(100);
    }
    expect(back).toBe(true);
  }, 20_000);
});
