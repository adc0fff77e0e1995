// Rate limits across gateway instances and through store trouble (CONTRACT §8), real stores only:
// three instances over one Redis and Postgres hold one shared limit (never each the full limit);
// a SIGKILLed holder's concurrency lease stops counting when it expires (≤ 90 s); while Redis is
// unreachable a limited key without a budget is admitted at floor(limit / instances) per instance
// and a budgeted one gets the budget's fast 503; the official openai SDK, with its default
// retries, never retries before the Retry-After the gateway sent.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import Redis from "ioredis";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startPrivateRedis } from "../helpers/private-redis.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { LEASE_TTL_MS, limitKeys } from "../../src/relay/limits/rate-limits.ts";
import { post, spawnSibling } from "./child-gateway.ts";
import { addCredential, addRoutingKey, lane } from "./fixtures.ts";

const name = REAL_STORES ? "rate limits shared by instances (postgres+redis)" : "rate limits shared by instances: skipped in embedded mode (one process, no shared store)";

const chat = (extra: Record<string, unknown> = {}) => ({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], ...extra });

describe.if(REAL_STORES)(name, () => {
  let A: MockUpstream;
  let gws: TestGateway[] = [];
  let acct: { id: string };
  let cred: { id: string };
  let hop: ReturnType<typeof Bun.serve>;
  let inFlight = 0;
  let peak = 0;

  beforeAll(async () => {
    A = await startMockOpenAI({ record: false });
    // Counts the requests at the upstream at once, from every instance.
    hop = Bun.serve({
      port: 0, hostname: "127.0.0.1",
      async fetch(req) {
        peak = Math.max(peak, ++inFlight);
        try {
          const res = await fetch(A.url.replace(/\/v1$/, "") + new URL(req.url).pathname, { method: req.method, headers: req.headers, body: await req.arrayBuffer(), signal: req.signal });
          // Streams pass through as they come (their count ends at the headers; no test counts them).
          if (res.headers.get("content-type")?.includes("event-stream")) return new Response(res.body, { status: res.status, headers: res.headers });
          return new Response(await res.arrayBuffer(), { status: res.status, headers: res.headers });
        } finally {
          inFlight--;
        }
      },
    });
    const env = { PROVIDER_OPENAI_BASE_URL: `http://127.0.0.1:${hop.port}/v1` };
    const first = await startTestGateway(env);
    gws = [first, await startTestGateway(env, { shareWith: first }), await startTestGateway(env, { shareWith: first })];
    acct = await createAccount(first);
    cred = await addCredential(first, acct.id, "openai");
  }, 60_000);
  afterAll(async () => {
    for (const g of [...gws].reverse()) await g.stop();
    hop?.stop(true);
    await A?.stop();
  }, 60_000);

  test("3 instances hold one requests-per-minute limit: 200 concurrent clients hammering a 60 RPM key for 3 s get at most 60 answers (≤ 61 in any 60 s window)", async () => {
    const k = await addRoutingKey(gws[0]!, acct.id, { lanes: [lane("openai", cred.id)], rpmLimit: 60 });
    const until = performance.now() + 3000;
    const counts = await Promise.all(Array.from({ length: 200 }, async (_, i) => {
      let ok = 0, refused = 0;
      while (performance.now() < until) {
        const r = await post(gws[i % 3]!.url, k.raw, chat());
        await r.text();
        if (r.status === 200) ok++;
        else if (r.status === 429) refused++;
        else throw new Error(`unexpected status ${r.status}`);
      }
      return { ok, refused };
    }));
    const ok = counts.reduce((a, c) => a + c.ok, 0);
    expect(ok).toBeLessThanOrEqual(60);
    expect(ok).toBeGreaterThanOrEqual(50);
    expect(counts.reduce((a, c) => a + c.refused, 0)).toBeGreaterThan(200);
  }, 30_000);

  test("a hot key with headroom costs no round trip per request: an instance serves from a slice it took ahead, and 3 instances with slices still hold the shared limit", async () => {
    const k = await addRoutingKey(gws[0]!, acct.id, { lanes: [lane("openai", cred.id)], rpmLimit: 300 });
    const admissions = gws.map(() => 0);
    const originals = gws.map((g) => g.ctx.kv.reserve.bind(g.ctx.kv));
    gws.forEach((g, i) => {
      g.ctx.kv.reserve = (...args: Parameters<typeof g.ctx.kv.reserve>) => { admissions[i]!++; return originals[i]!(...args); };
    });
    try {
      // Each instance: sequential clients (a hot key), 150 requests each, 450 in all on a 300 RPM key.
      const statuses = (await Promise.all(gws.map(async (g) => {
        const out: number[] = [];
        for (let i = 0; i < 150; i++) {
          const r = await post(g.url, k.raw, chat());
          await r.text();
          out.push(r.status);
        }
        return out;
      }))).flat();
      const ok = statuses.filter((s) => s === 200).length;
      expect(ok).toBeLessThanOrEqual(300);
      expect(ok).toBeGreaterThanOrEqual(200); // slices cost some precision near the limit, not much
      expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
      const trips = admissions.reduce((a, b) => a + b, 0);
      expect(trips).toBeLessThan(ok / 2);
    } finally {
      gws.forEach((g, i) => { g.ctx.kv.reserve = originals[i]!; });
    }
  }, 30_000);

  test("3 instances hold one concurrency cap: a cap of 4 never shows more than 4 requests at the upstream", async () => {
    const k = await addRoutingKey(gws[0]!, acct.id, { lanes: [lane("openai", cred.id)], maxConcurrentRequests: 4 });
    peak = 0;
    for (let round = 0; round < 3; round++) {
      const statuses = await Promise.all(Array.from({ length: 30 }, (_, i) => post(gws[i % 3]!.url, k.raw, chat({ mock: { latency_ms: 150 } })).then(async (r) => { await r.text(); return r.status; })));
      expect(statuses.filter((s) => s === 200).length).toBe(4);
    }
    expect(peak).toBeLessThanOrEqual(4);
  });

  test("a 10k TPM key with 100 concurrent max_tokens 1000 requests over 3 instances has at most 10 at the upstream", async () => {
    const k = await addRoutingKey(gws[0]!, acct.id, { lanes: [lane("openai", cred.id)], tpmLimit: 10_000 });
    peak = 0;
    const statuses = await Promise.all(Array.from({ length: 100 }, (_, i) => post(gws[i % 3]!.url, k.raw, chat({ max_tokens: 1000, mock: { latency_ms: 200, completion_tokens: 90 } })).then(async (r) => { await r.text(); return r.status; })));
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(10);
    expect(peak).toBeLessThanOrEqual(10);
  });

  test("the official openai SDK with default retries never retries before the Retry-After it was sent", async () => {
    const k = await addRoutingKey(gws[0]!, acct.id, { lanes: [lane("openai", cred.id)], maxConcurrentRequests: 1 });
    const holder = post(gws[1]!.url, k.raw, chat({ mock: { latency_ms: 1500 } }));
    await Bun.sleep(150);
    const log: Array<{ at: number; status: number; retryMs: number | null }> = [];
    const client = new OpenAI({
      apiKey: k.raw, baseURL: gws[0]!.url + "/v1",
      fetch: async (url, init) => {
        const at = performance.now();
        const res = await fetch(url, init);
        const h = res.headers.get("retry-after-ms");
        log.push({ at, status: res.status, retryMs: h === null ? null : Number(h) });
        return res;
      },
    });
    const answer = await client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] });
    expect(answer.choices[0]!.message.content).toBeTruthy();
    await (await holder).text();
    expect(log[0]!.status).toBe(429);
    expect(log.at(-1)!.status).toBe(200);
    for (let i = 1; i < log.length; i++) {
      const asked = log[i - 1]!.retryMs!;
      expect(asked).toBeGreaterThan(0);
      expect(log[i]!.at - log[i - 1]!.at).toBeGreaterThanOrEqual(asked);
    }
  }, 20_000);

  test("1,000 cancelled streams leave 0 leases within 1 s", async () => {
    const k = await addRoutingKey(gws[0]!, acct.id, { lanes: [lane("openai", cred.id)], maxConcurrentRequests: 1000 });
    const redis = new Redis(gws[0]!.env.REDIS_URL!);
    try {
      const keys = limitKeys(k.id);
      // In waves of 80 (client, gateway and counting hop share this process's fetch connection
      // limit): every wave's streams are open and hold their leases, then all are cancelled.
      let cancelledAt = 0;
      for (let wave = 0; wave < 1000 / 80; wave++) {
        const n = Math.min(80, 1000 - wave * 80);
        const controllers = Array.from({ length: n }, () => new AbortController());
        const opened = await Promise.all(controllers.map((c, i) => fetch(gws[i % 3]!.url + "/v1/chat/completions", {
          method: "POST", signal: c.signal, headers: { authorization: `Bearer ${k.raw}`, "content-type": "application/json" },
          body: JSON.stringify(chat({ stream: true, mock: { chunks: 100, chunk_delay_ms: 500 } })),
        })));
        expect(opened.every((r) => r.status === 200)).toBe(true);
        expect(await redis.zcard(keys.leases)).toBeGreaterThanOrEqual(n);
        for (const c of controllers) c.abort();
        cancelledAt = performance.now();
      }
      let left = -1;
      while (performance.now() - cancelledAt < 1000) {
        left = await redis.zcard(keys.leases);
        if (left === 0) break;
        await Bun.sleep(50);
      }
      expect(left).toBe(0);
    } finally {
      redis.disconnect();
    }
  }, 60_000);

  test("a SIGKILLed instance's concurrency lease stops counting when it expires, within 90 s of its last renewal", async () => {
    const k = await addRoutingKey(gws[0]!, acct.id, { lanes: [lane("openai", cred.id)], maxConcurrentRequests: 1 });
    const g = gws[0]!;
    const child = await spawnSibling(g, { PROVIDER_OPENAI_BASE_URL: A.url });
    const hanging = post(child.url, k.raw, chat({ mock: { hang: true } })).catch(() => null);
    const redis = new Redis(g.env.REDIS_URL!);
    try {
      const keys = limitKeys(k.id);
      for (let i = 0; i < 100 && (await redis.zcard(keys.leases)) === 0; i++) await Bun.sleep(20);
      await child.kill();
      await hanging;
      // Still counted right after the kill: the cap is reached.
      const blocked = await post(g.url, k.raw, chat());
      expect(blocked.status).toBe(429);
      await blocked.text();
      const [, score] = await redis.zrange(keys.leases, 0, 0, "WITHSCORES");
      const [sec, micro] = await redis.time();
      const redisNow = Number(sec) * 1000 + Math.floor(Number(micro) / 1000);
      expect(Number(score) - redisNow).toBeLessThanOrEqual(90_000);
      expect(Number(score) - redisNow).toBeGreaterThan(LEASE_TTL_MS - 10_000);
      // At its expiry (the admission script's clock moved there) the dead lease no longer counts.
      const r = await g.ctx.kv.reserve(`gw:{k:${k.id}}:budget:x`, 0, 0, -1, 60, undefined, {
        keys, limits: { rpm: null, tpm: null, concurrency: 1 }, ask: { entry: "probe", requests: 1, tokens: 0, leases: 1 }, leaseTtlMs: 1000, now: Number(score) + 1,
      });
      expect(r.limits!.refused).toBeNull();
    } finally {
      redis.disconnect();
    }
  }, 60_000);
});

describe.if(REAL_STORES)("rate limits while Redis is unreachable (own redis-server)", () => {
  test("a limited key without a budget admits floor(limit / instances) per instance; a budgeted one gets 503 budget_unavailable", async () => {
    const redis = await startPrivateRedis();
    const A = await startMockOpenAI({ record: false });
    const env = { REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: A.url };
    const a = await startTestGateway(env);
    const b = await startTestGateway(env, { shareWith: a });
    try {
      const acct = await createAccount(a);
      const cred = await addCredential(a, acct.id, "openai");
      const free = await addRoutingKey(a, acct.id, { lanes: [lane("openai", cred.id)], rpmLimit: 5 });
      const budgeted = await addRoutingKey(a, acct.id, { lanes: [lane("openai", cred.id)], rpmLimit: 5, monthlyBudgetUsd: 10 });
      // Both keys known to the instance (cached) before the outage.
      for (const k of [free, budgeted]) expect((await post(a.url, k.raw, chat())).status).toBe(200);
      for (let i = 0; i < 100 && a.ctx.services.ledger!.liveInstances < 2; i++) await Bun.sleep(100);
      expect(a.ctx.services.ledger!.liveInstances).toBe(2);
      await redis.stop();
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        const r = await post(a.url, free.raw, chat());
        statuses.push(r.status);
        if (r.status === 429) expect(((await r.json()) as any).error.code).toBe("rate_limit_exceeded");
        else await r.text();
      }
      expect(statuses).toEqual([200, 200, 429, 429]); // floor(5 / 2) = 2 on this instance
      const down = await post(a.url, budgeted.raw, chat());
      expect(down.status).toBe(503);
      expect(((await down.json()) as any).error.code).toBe("budget_unavailable");
    } finally {
      await b.stop();
      await a.stop();
      await A.stop();
      await redis.stop().catch(() => {});
    }
  }, 60_000);
});
