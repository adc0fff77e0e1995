// The response cache never takes memory that budgets and limits need (CONTRACT §8 "Response
// cache": quotas per account and in total, in Redis too; docs/caching.md "Storage"). On the
// test's own redis-server: the byte quotas per account and in total refuse writes past them and
// get bytes back as entries expire; then, through a gateway on a Redis with a small maxmemory and
// `noeviction`, one account filling the cache leaves another account's budgeted requests
// answering 200, and an OOM from Redis keeps nothing but never fails the request.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Redis from "ioredis";
import { MemoryCacheStore, RedisCacheStore } from "../../src/cache/store.ts";
import { accountQuotaKeys, entrySize } from "../../src/cache/quota-scripts.ts";
import { entryKey } from "../../src/cache/key.ts";
import { createAccount, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "./fixtures.ts";

let n = 0;
const keyOf = (acct: string) => entryKey({ accountId: acct, keyId: "rkey_1", shared: false, route: "r" }, "chat", { model: "m", messages: [{ role: "user", content: `q${++n}` }] });

describe("CONTRACT §8: cache byte quotas per account and in total (Redis)", () => {
  let redis: PrivateRedis;
  let r: Redis;
  beforeAll(async () => {
    redis = await startPrivateRedis();
    r = new Redis(redis.url, { maxRetriesPerRequest: 0 });
  }, 30_000);
  afterAll(async () => {
    r?.disconnect();
    await redis?.stop();
  }, 30_000);

  test("CONTRACT §8: a write past the account's quota keeps nothing; other accounts still write; the count is exact", async () => {
    await r.flushall();
    const value = "x".repeat(10_000);
    const size = entrySize(keyOf("acct_x"), value);
    const store = new RedisCacheStore(r, { perAccount: size * 3 + 10, total: 1 << 30 }, 75);
    const kept: string[] = [];
    for (let i = 0; i < 3; i++) {
      const k = keyOf("acct_x");
      expect(await store.set(k, value, 60, "acct_x")).toBe(true);
      kept.push(k);
    }
    const over = keyOf("acct_x");
    expect(await store.set(over, value, 60, "acct_x")).toBe(false);
    expect(await r.exists(over)).toBe(0);
    for (const k of kept) expect(await store.get(k)).toBe(value);
    // Overwriting an entry counts it once.
    expect(await store.set(kept[0]!, value, 60, "acct_x")).toBe(true);
    expect(Number(await r.get(accountQuotaKeys("acct_x").used))).toBe(3 * size);
    // Another account has a quota of its own.
    expect(await store.set(keyOf("acct_y"), value, 60, "acct_y")).toBe(true);
  });

  test("CONTRACT §8: the total quota holds across accounts", async () => {
    await r.flushall();
    const value = "y".repeat(10_000);
    const size = entrySize(keyOf("acct_a"), value);
    const store = new RedisCacheStore(r, { perAccount: 1 << 30, total: size * 4 + 10 }, 75);
    for (const a of ["acct_a", "acct_b", "acct_c", "acct_d"]) expect(await store.set(keyOf(a), value, 60, a)).toBe(true);
    const k = keyOf("acct_e");
    expect(await store.set(k, value, 60, "acct_e")).toBe(false);
    expect(await r.exists(k)).toBe(0);
    // The refused account was not charged for the write it did not get.
    expect(Number((await r.get(accountQuotaKeys("acct_e").used)) ?? 0)).toBe(0);
  });

  test("CONTRACT §8: an entry's expiry gives its bytes back to its account and to the total", async () => {
    await r.flushall();
    const value = "z".repeat(10_000);
    const size = entrySize(keyOf("acct_t"), value);
    const store = new RedisCacheStore(r, { perAccount: size + 10, total: size + 10 }, 75);
    expect(await store.set(keyOf("acct_t"), value, 1, "acct_t")).toBe(true);
    expect(await store.set(keyOf("acct_t"), value, 1, "acct_t")).toBe(false);
    expect(await store.set(keyOf("acct_u"), value, 1, "acct_u")).toBe(false); // the total is full too
    await Bun.sleep(1100);
    expect(await store.set(keyOf("acct_t"), value, 60, "acct_t")).toBe(true);
  });

  test("CONTRACT §8: with noeviction, writes stop before Redis is full and an OOM answer keeps nothing, without throwing", async () => {
    await r.flushall();
    const used = Number(/used_memory:(\d+)/.exec(await r.info("memory"))![1]);
    await r.config("SET", "maxmemory-policy", "noeviction");
    await r.config("SET", "maxmemory", String(used + 4 * 1024 * 1024));
    try {
      const store = new RedisCacheStore(r, { perAccount: 1 << 30, total: 1 << 30 }, 75);
      const value = "w".repeat(64 * 1024);
      let kept = 0;
      for (let i = 0; i < 200; i++) if (await store.set(keyOf("acct_f"), value, 60, "acct_f")) kept++;
      expect(kept).toBeGreaterThan(0);
      expect(kept).toBeLessThan(200);
      // Redis still has room for other writes (budgets, limits).
      expect(await r.set("gw:other", "x".repeat(100_000))).toBe("OK");
      // Redis full: the OOM is a write that keeps nothing.
      await r.config("SET", "maxmemory", "1");
      const oomStore = new RedisCacheStore(r, { perAccount: 1 << 30, total: 1 << 30 }, 100);
      expect(await oomStore.set(keyOf("acct_g"), "v", 60, "acct_g")).toBe(false);
    } finally {
      await r.config("SET", "maxmemory", "0");
    }
  });
});

describe("CONTRACT §8: cache byte quotas on a Redis Cluster", () => {
  test("CONTRACT §8: on a Cluster the total and the account are charged in their own slots; a refusal by the account gives the total back", async () => {
    const redis = await startPrivateRedis({ cluster: true });
    // One node owning every slot refuses a script whose keys hash to different slots, as a Cluster does.
    const c = new Redis(redis.url, { maxRetriesPerRequest: 0 });
    try {
      const value = "c".repeat(10_000);
      const size = entrySize(keyOf("acct_c1"), value);
      const store = new RedisCacheStore(c, { perAccount: size + 10, total: size * 2 + 10 }, 75);
      const k = keyOf("acct_c1");
      expect(await store.set(k, value, 60, "acct_c1")).toBe(true);
      expect(await store.get(k)).toBe(value);
      expect(await store.set(keyOf("acct_c1"), value, 60, "acct_c1")).toBe(false); // the account is full
      expect(await store.set(keyOf("acct_c2"), value, 60, "acct_c2")).toBe(true); // the total had room left for it
      expect(await store.set(keyOf("acct_c3"), value, 60, "acct_c3")).toBe(false); // and now has none
    } finally {
      c.disconnect();
      await redis.stop();
    }
  }, 30_000);
});

describe("CONTRACT §8: cache byte quota per account (embedded)", () => {
  test("CONTRACT §8: an account's entries stay within its quota; its oldest are not pushed out by it, and others still write", async () => {
    const store = new MemoryCacheStore({ perAccount: 30_000, total: 1 << 20 });
    const value = "m".repeat(9_000);
    const x = [keyOf("acct_x"), keyOf("acct_x"), keyOf("acct_x")];
    for (const k of x) expect(await store.set(k, value, 60, "acct_x")).toBe(true);
    expect(await store.set(keyOf("acct_x"), value, 60, "acct_x")).toBe(false);
    expect(await store.set(x[0]!, value, 60, "acct_x")).toBe(true); // a rewrite of one it holds
    expect(await store.set(keyOf("acct_y"), value, 60, "acct_y")).toBe(true);
    for (const k of x) expect(await store.get(k)).toBe(value);
    // Expired entries give their bytes back.
    const short = new MemoryCacheStore({ perAccount: 10_000, total: 1 << 20 });
    expect(await short.set(keyOf("acct_s"), value, 1, "acct_s")).toBe(true);
    expect(await short.set(keyOf("acct_s"), value, 1, "acct_s")).toBe(false);
    await Bun.sleep(1100);
    expect(await short.set(keyOf("acct_s"), value, 60, "acct_s")).toBe(true);
  });
});

describe("CONTRACT §8: one account filling the cache never costs another account's budgeted requests (gateway, Redis with noeviction)", () => {
  let redis: PrivateRedis;
  let admin: Redis;
  let A: MockUpstream;
  let gw: TestGateway;
  beforeAll(async () => {
    redis = await startPrivateRedis();
    admin = new Redis(redis.url, { maxRetriesPerRequest: 0 });
    A = await startMockOpenAI();
    // Leases off: every budgeted request is admitted in Redis, so a full Redis would refuse it.
    gw = await startTestGateway({ REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: A.url, BUDGET_LEASES: "false" });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await A?.stop();
    admin?.disconnect();
    await redis?.stop();
  }, 60_000);

  test("CONTRACT §8: account X fills the cache; account Y's budgeted requests keep answering 200", async () => {
    const x = await createAccount(gw);
    const y = await createAccount(gw);
    const xKey = await addRoutingKey(gw, x.id, { lanes: [lane("openai", (await addCredential(gw, x.id, "openai")).id)], cache: { ttl_seconds: 3600, shared: false } });
    const yKey = await addRoutingKey(gw, y.id, { lanes: [lane("openai", (await addCredential(gw, y.id, "openai")).id)], monthlyBudgetUsd: 100, cache: { ttl_seconds: 3600, shared: false } });
    const ask = (raw: string, content: string) => gw.req("/v1/chat/completions", { method: "POST", token: raw, body: chatBody({ max_tokens: 50, messages: [{ role: "user", content }] }) });
    // Warm Y (key cache, budget counter), then give Redis a small maxmemory over what it holds.
    expect((await ask(yKey.raw, "warm")).status).toBe(200);
    const used = Number(/used_memory:(\d+)/.exec(await admin.info("memory"))![1]);
    await admin.config("SET", "maxmemory-policy", "noeviction");
    await admin.config("SET", "maxmemory", String(used + 8 * 1024 * 1024));
    A.setDefault({ content: "b".repeat(256 * 1024) }); // 256 KiB answers: 64 of them are twice what Redis has room for
    try {
      for (let i = 0; i < 64; i++) {
        const res = await ask(xKey.raw, `fill ${i}`);
        expect(res.status).toBe(200); // never an error because the cache could not write
        await res.text();
      }
      A.setDefault({});
      for (let i = 0; i < 5; i++) {
        const res = await ask(yKey.raw, `budgeted ${i}`);
        const body: any = await res.json();
        expect({ status: res.status, code: body.error?.code ?? null }).toEqual({ status: 200, code: null });
      }
    } finally {
      A.setDefault({});
      await admin.config("SET", "maxmemory", "0");
    }
  }, 120_000);
});

describe("CONTRACT §8: RESPONSE_CACHE_REDIS_URL puts the cache on its own Redis", () => {
  test("CONTRACT §8: with RESPONSE_CACHE_REDIS_URL the entries live on that Redis and hits are served from it", async () => {
    const own = await startPrivateRedis();
    const probe = new Redis(own.url, { maxRetriesPerRequest: 0 });
    const A = await startMockOpenAI();
    const gw = await startTestGateway({ RESPONSE_CACHE_REDIS_URL: own.url, PROVIDER_OPENAI_BASE_URL: A.url });
    try {
      const acct = await createAccount(gw);
      const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", (await addCredential(gw, acct.id, "openai")).id)], cache: { ttl_seconds: 60, shared: false } });
      const body = chatBody({ messages: [{ role: "user", content: `own redis ${Math.random()}` }] });
      const post = () => gw.req("/v1/chat/completions", { method: "POST", token: k.raw, body });
      expect((await post()).headers.get("x-cache")).toBe("MISS");
      let entries: string[] = [];
      for (let i = 0; i < 50 && entries.length === 0; i++) {
        if (i) await Bun.sleep(20);
        // The entry itself (the single-flight lock beside it may not have expired yet).
        entries = (await probe.keys(`gw:rc:v*:{rc:${acct.id}}:*`)).filter((e) => !e.endsWith(":lock"));
      }
      expect(entries.length).toBe(1);
      expect((await post()).headers.get("x-cache")).toBe("HIT");
    } finally {
      await gw.stop();
      await A.stop();
      probe.disconnect();
      await own.stop();
    }
  }, 60_000);
});
