// CONTRACT §9 "Lane cooldowns": the store's arithmetic, called directly: the in-process KV always,
// and the Redis scripts beside it when REDIS_URL is set (the same steps, the same answers).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { MemoryKV } from "../../src/store/kv/memory.ts";
import { RedisKV } from "../../src/store/kv/redis.ts";
import type { KV } from "../../src/store/kv/types.ts";
import { cooldownMs, type LaneFailCall } from "../../src/store/kv/lane-cooldown.ts";
import { coolsLane, retryAfterMs } from "../../src/relay/routing/cooldowns.ts";

const policy = { threshold: 3, windowMs: 30_000, baseMs: 5_000, maxMs: 300_000 };
const fail = (now: number, extra: Partial<LaneFailCall> = {}): LaneFailCall => ({ ...policy, retryAfterMs: null, immediate: false, probe: false, now, ...extra });
const T0 = 1_800_000_000_000;

const stores: Array<[string, () => KV]> = [["memory", () => new MemoryKV()]];
if (process.env.REDIS_URL) stores.push(["redis", () => new RedisKV(process.env.REDIS_URL!)]);
const opened: KV[] = [];
afterAll(async () => { for (const kv of opened) await kv.close(); }, 10_000);

test("CONTRACT §9: a cooldown starts at the base and doubles while the lane keeps failing, up to the maximum", () => {
  expect([1, 2, 3, 4, 5, 6, 7, 8, 9].map((l) => cooldownMs(l, policy, null))).toEqual([5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000]);
  // A vendor's Retry-After sets it (never past the maximum).
  expect(cooldownMs(4, policy, 2_000)).toBe(2_000);
  expect(cooldownMs(1, policy, 3_600_000)).toBe(300_000);
});

test("CONTRACT §9: retryable causes cool a lane (connection refused, timeout, 429, 5xx); refusals of the request do not", () => {
  for (const f of [{ status: 0, code: "connection_failed" }, { status: 0, code: "timeout" }, { status: 429, code: "rate_limit" }, { status: 500, code: "http_500" }, { status: 503, code: "overloaded" }, { status: 200, code: "stream_broken" }]) expect(coolsLane(f)).toBe(true);
  for (const f of [{ status: 400, code: "unsupported_feature" }, { status: 401, code: "invalid_api_key" }, { status: 404, code: "model_not_found" }, { status: 408, code: "http_408" }, { status: 0, code: "lane_unavailable" }, { status: 0, code: "no_credential" }]) expect(coolsLane(f)).toBe(false);
});

test("CONTRACT §9: Retry-After is read in seconds, as an HTTP date, or as retry-after-ms", () => {
  const now = Date.parse("2026-12-01T00:00:00Z");
  expect(retryAfterMs(new Headers({ "retry-after": "7" }), now)).toBe(7_000);
  expect(retryAfterMs(new Headers({ "retry-after": "Tue, 01 Dec 2026 00:00:30 GMT" }), now)).toBe(30_000);
  expect(retryAfterMs(new Headers({ "retry-after-ms": "1500", "retry-after": "9" }), now)).toBe(1_500);
  expect(retryAfterMs(new Headers({ "retry-after": "soon" }), now)).toBeNull();
  expect(retryAfterMs(new Headers(), now)).toBeNull();
});

for (const [name, open] of stores) {
  describe(`lane cooldown store (${name})`, () => {
    const kv = open();
    opened.push(kv);
    beforeAll(() => kv.ping(), 10_000);
    const key = () => `gw:test:{l:${randomBytes(6).toString("hex")}}:cd`;

    test("CONTRACT §9: the third retryable failure within the window cools the lane for the base cooldown", async () => {
      const k = key();
      expect(await kv.laneFailed(k, fail(T0))).toEqual({ untilMs: 0, level: 0, failures: 1, cooled: false });
      expect(await kv.laneFailed(k, fail(T0 + 1_000))).toEqual({ untilMs: 0, level: 0, failures: 2, cooled: false });
      expect(await kv.laneFailed(k, fail(T0 + 2_000))).toEqual({ untilMs: T0 + 7_000, level: 1, failures: 0, cooled: true });
      // Requests in flight when it cooled, failing after: nothing more (no longer cooldown for them).
      expect(await kv.laneFailed(k, fail(T0 + 2_500))).toEqual({ untilMs: T0 + 7_000, level: 1, failures: 0, cooled: false });
    });

    test("CONTRACT §9: failures further apart than the window do not add up", async () => {
      const k = key();
      await kv.laneFailed(k, fail(T0));
      await kv.laneFailed(k, fail(T0 + 10_000));
      // The window (30 s from the first failure) is over: the count starts again.
      expect((await kv.laneFailed(k, fail(T0 + 31_000))).failures).toBe(1);
      expect((await kv.laneFailed(k, fail(T0 + 32_000))).failures).toBe(2);
    });

    test("CONTRACT §9: a refused connection and a Retry-After cool at once; Retry-After sets the length", async () => {
      const a = key();
      expect(await kv.laneFailed(a, fail(T0, { immediate: true }))).toEqual({ untilMs: T0 + 5_000, level: 1, failures: 0, cooled: true });
      const b = key();
      expect(await kv.laneFailed(b, fail(T0, { retryAfterMs: 42_000 }))).toEqual({ untilMs: T0 + 42_000, level: 1, failures: 0, cooled: true });
      // A later Retry-After while cooling replaces the end (the vendor knows best).
      expect(await kv.laneFailed(b, fail(T0 + 1_000, { retryAfterMs: 60_000 }))).toEqual({ untilMs: T0 + 61_000, level: 2, failures: 0, cooled: true });
    });

    test("CONTRACT §9: half-open: after the cooldown one probe at a time; a failed probe cools again for twice as long", async () => {
      const k = key();
      await kv.laneFailed(k, fail(T0, { immediate: true })); // cooling until T0 + 5 s
      expect(await kv.laneProbe(k, 10_000, T0 + 4_000)).toEqual({ granted: false, untilMs: T0 + 5_000, level: 1 });
      expect(await kv.laneProbe(k, 10_000, T0 + 5_000)).toEqual({ granted: true, untilMs: T0 + 5_000, level: 1 });
      // The others keep skipping it while the probe runs.
      expect(await kv.laneProbe(k, 10_000, T0 + 5_100)).toEqual({ granted: false, untilMs: T0 + 15_000, level: 1 });
      expect(await kv.laneFailed(k, fail(T0 + 6_000, { probe: true }))).toEqual({ untilMs: T0 + 16_000, level: 2, failures: 0, cooled: true });
      // A probe whose instance died frees the lane once its hold expires.
      expect((await kv.laneProbe(k, 1_000, T0 + 16_000)).granted).toBe(true);
      expect((await kv.laneProbe(k, 1_000, T0 + 16_500)).granted).toBe(false);
      expect((await kv.laneProbe(k, 1_000, T0 + 17_001)).granted).toBe(true);
    });

    test("CONTRACT §9: a probe that serves clears the record: the next cooldown starts from the base again", async () => {
      const k = key();
      await kv.laneFailed(k, fail(T0, { immediate: true }));
      await kv.laneFailed(k, fail(T0 + 6_000, { probe: true })); // level 2
      await kv.del(k); // the probe served
      expect(await kv.laneProbe(k, 1_000, T0 + 7_000)).toEqual({ granted: true, untilMs: 0, level: 0 });
      expect(await kv.laneFailed(k, fail(T0 + 7_000, { immediate: true }))).toEqual({ untilMs: T0 + 12_000, level: 1, failures: 0, cooled: true });
    });

    test("CONTRACT §9: a lane never cooled is never held back", async () => {
      const k = key();
      expect(await kv.laneProbe(k, 1_000, T0)).toEqual({ granted: true, untilMs: 0, level: 0 });
      await kv.laneFailed(k, fail(T0));
      expect(await kv.laneProbe(k, 1_000, T0)).toEqual({ granted: true, untilMs: 0, level: 0 });
    });
  });
}
