// Budget leases (CONTRACT §7): an instance admits a hot budgeted key's requests from a slice of the
// budget reserved ahead in Redis, without a round trip each; the budget stays a ceiling across
// instances, and a SIGKILLed instance's requests each get one `interrupted` record at their worst
// case while the rest of its slice goes back (counter = Σ records). Real child gateways over the
// test's own redis-server (so every admission it sees is theirs) and the shared Postgres.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { inArray } from "drizzle-orm";
import Redis from "ioredis";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { keyContextOf, usageRows } from "../helpers/relay-world.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { monitorRedis, type RedisMonitor } from "../helpers/redis-monitor.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { inflightKey, monthSpendUsd } from "../../src/money/counters.ts";
import { estimateCostUsd } from "../../src/money/estimate.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { spawnSibling, tryPost, type ChildGateway } from "./child-gateway.ts";
import { addCredential, addRoutingKey, chatBody, lane, bytesOf } from "./fixtures.ts";
import { until as waitUntil } from "../helpers/until.ts";

const name = REAL_STORES
  ? "budget leases (child gateways, own redis-server)"
  : "budget leases: skipped in embedded mode (leases are a Redis-mode mechanism; the in-process KV makes no round trip)";

const until = <T>(what: string, fn: () => Promise<T | null>, ms = 30_000) => waitUntil(what, fn, ms);

describe.if(REAL_STORES)(name, () => {
  let redis: PrivateRedis;
  let A: MockUpstream;
  let gw: TestGateway;
  let acct: { id: string };
  let cred: { id: string };
  let watch: Redis;
  let monitor: RedisMonitor;
  /** Budget admissions (the 5-key ADMIT script) Redis ran, by routing key id. */
  const admissions = new Map<string, number>();
  const children: ChildGateway[] = [];

  beforeAll(async () => {
    redis = await startPrivateRedis();
    A = await startMockOpenAI();
    // The in-process instance provisions, reads the database, and is the surviving reconciler.
    gw = await startTestGateway({ REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: A.url, INSTANCE_DEAD_AFTER_SECONDS: "3" });
    acct = await createAccount(gw);
    cred = await addCredential(gw, acct.id, "openai");
    watch = new Redis(redis.url);
    monitor = await monitorRedis(redis.url);
    monitor.on("monitor", (_t: string, args: string[]) => {
      // ADMIT: five keys and at least six arguments (LEDGER has five keys and four: 12 in all).
      if (String(args[0]).toLowerCase() !== "evalsha" || args[2] !== "5" || args.length === 12) return;
      const m = /^gw:\{k:([^}]+)\}:budget:/.exec(String(args[3]));
      if (m) admissions.set(m[1]!, (admissions.get(m[1]!) ?? 0) + 1);
    });
  }, 30_000);
  afterAll(async () => {
    for (const c of children) await c.kill().catch(() => {});
    monitor?.close();
    watch?.disconnect();
    await gw?.stop();
    await A?.stop();
    await redis?.stop();
  }, 60_000);

  const child = async () => {
    const c = await spawnSibling(gw, { PROVIDER_OPENAI_BASE_URL: A.url, INSTANCE_DEAD_AFTER_SECONDS: "3" });
    children.push(c);
    return c;
  };
  const recordsOf = async (keyId: string) => {
    return usageRows(gw, inArray(usageRecords.routingKeyId, [keyId]));
  };
  const estimateOf = async (body: ReturnType<typeof chatBody>) => {
    const probe = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 1 });
    return estimateCostUsd(gw.ctx, await keyContextOf(gw, probe.raw), body, bytesOf(body))!;
  };

  test("CONTRACT §7 leases: a hot budgeted key is admitted from a lease, not a Redis admission per request; given back whole, counter = Σ records", async () => {
    const body = chatBody({ max_tokens: 50 });
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    const c = await child();
    for (let i = 0; i < 100; i++) expect((await tryPost(c.url, k.raw, body))!.status).toBe(200);
    // A lease per few seconds of traffic, not an admission per request.
    expect(admissions.get(k.id) ?? 0).toBeLessThanOrEqual(10);
    // Idle: the lease ends, what it did not use goes back; the counter holds exactly the records.
    await until("the lease given back", async () => (Object.keys(await watch.hgetall(inflightKey(k.id))).length === 0 ? true : null));
    const rows = await until("100 records", async () => {
      const r = await recordsOf(k.id);
      return r.length >= 100 ? r : null;
    });
    expect(rows.length).toBe(100);
    expect(rows.every((r) => r.outcome === "ok")).toBe(true);
    const spent = rows.reduce((a, r) => a + r.costUsd, 0);
    expect((await monthSpendUsd(gw.ctx, await keyContextOf(gw, k.raw))).usd).toBeCloseTo(spent, 9);
    expect(await c.terminate()).toBe(0);
  }, 60_000);

  test("CONTRACT §7 leases: a hot key's batch goes to Redis in pieces of at most MAX_BATCH (usage stream entries, LEDGER calls); counter = Σ records", async () => {
    // One instance, a thousand requests at once: without the cap their settlements and records
    // went out as one script call and one stream entry (at thousands a second, long enough in
    // Redis for the reply watchdog to drop the connection).
    const body = chatBody({ max_tokens: 50 });
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    const entries: number[] = [];
    const settlements: number[] = [];
    const onCommand = (_t: string, args: string[]) => {
      const cmd = String(args[0]).toLowerCase();
      if (cmd === "xadd" && args[3] === "r") {
        const rows = JSON.parse(String(args[4])) as Array<{ routingKeyId: string }>;
        if (rows.some((r) => r.routingKeyId === k.id)) entries.push(rows.length);
      } else if (cmd === "evalsha" && args.length === 12 && String(args[3]).includes(k.id)) {
        settlements.push(String(args[10]).split("\n").filter(Boolean).length);
      }
    };
    monitor.on("monitor", onCommand);
    try {
      expect((await tryPost(gw.url, k.raw, body))!.status).toBe(200);
      // Ten clients, a hundred requests each: a thousand settle within about a second.
      const statuses: number[] = [];
      await Promise.all(Array.from({ length: 10 }, async () => {
        for (let i = 0; i < 100; i++) statuses.push((await tryPost(gw.url, k.raw, body))?.status ?? 0);
      }));
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      const rows = await until("1,001 records", async () => {
        const r = await recordsOf(k.id);
        return r.length >= 1001 ? r : null;
      });
      expect(rows.length).toBe(1001);
      await until("the lease given back", async () => (Object.keys(await watch.hgetall(inflightKey(k.id))).length === 0 ? true : null));
      expect(entries.reduce((a, n) => a + n, 0)).toBe(1001);
      expect(Math.max(...entries)).toBeLessThanOrEqual(500);
      expect(settlements.reduce((a, n) => a + n, 0)).toBeGreaterThanOrEqual(1001);
      expect(Math.max(...settlements)).toBeLessThanOrEqual(500);
      const spent = rows.reduce((a, r) => a + r.costUsd, 0);
      expect((await monthSpendUsd(gw.ctx, await keyContextOf(gw, k.raw))).usd).toBeCloseTo(spent, 9);
    } finally {
      monitor.off("monitor", onCommand);
    }
  }, 90_000);

  test("CONTRACT §7 leases: 200 concurrent requests over 3 instances holding leases never pass the budget", async () => {
    // Answers as long as the model allows: each real cost is close to the reserved worst case.
    const body = chatBody({ mock: { completion_tokens: 16_384, latency_ms: 50 } });
    const est = await estimateOf(body);
    // Large enough for leases (a slice is a tenth of the budget shared by 3 instances, and holds
    // at least 4 requests), small enough that 200 requests run it out.
    const budget = est * 150;
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: budget });
    const kids = [await child(), await child()];
    const urls = [gw.url, ...kids.map((c) => c.url)];
    // Two requests each make the key hot on every instance.
    for (const url of urls) for (let i = 0; i < 2; i++) expect((await tryPost(url, k.raw, body))!.status).toBe(200);
    const before = admissions.get(k.id) ?? 0;
    const res = await Promise.all(Array.from({ length: 200 }, (_, i) => tryPost(urls[i % 3]!, k.raw, body)));
    const statuses = res.map((r) => r?.status ?? 0);
    expect(statuses.filter((s) => s !== 200 && s !== 402)).toEqual([]);
    const ok = statuses.filter((s) => s === 200).length + 6;
    expect(ok).toBeGreaterThanOrEqual(100);
    // Served from leases: fewer Redis admissions than requests (one admission per request without
    // leases, refusals included; with them, refusals near the end are still one each).
    expect((admissions.get(k.id) ?? 0) - before).toBeLessThan(200);
    for (const c of kids) expect(await c.terminate()).toBe(0);
    await until("every lease given back", async () => (Object.keys(await watch.hgetall(inflightKey(k.id))).length === 0 ? true : null));
    const rows = await until("a record per served request", async () => {
      const r = await recordsOf(k.id);
      return r.length >= ok ? r : null;
    });
    expect(rows.length).toBe(ok);
    // The prompt estimate (a token per byte) is an upper bound here, so no estimate error to allow.
    const spent = rows.reduce((a, r) => a + r.costUsd, 0);
    expect(spent).toBeLessThanOrEqual(budget + 1e-12);
    expect((await monthSpendUsd(gw.ctx, await keyContextOf(gw, k.raw))).usd).toBeCloseTo(spent, 9);
  }, 90_000);

  test("CONTRACT §7 leases: a SIGKILLed lease holder's requests each get one interrupted record at their worst case, and the rest of its slice goes back; counter = Σ records", async () => {
    const fast = chatBody({ max_tokens: 50 });
    const slow = chatBody({ max_tokens: 50, mock: { latency_ms: 30_000 } });
    const est = await estimateOf(slow);
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    const c = await child();
    const start = A.received.length;
    for (let i = 0; i < 5; i++) expect((await tryPost(c.url, k.raw, fast))!.status).toBe(200);
    const held = Array.from({ length: 10 }, () => tryPost(c.url, k.raw, slow));
    await until("10 requests at the upstream", async () => (A.received.length - start >= 15 ? true : null));
    await c.kill();
    await Promise.all(held);
    const rows = await until("15 records", async () => {
      const r = await recordsOf(k.id);
      return r.length >= 15 && (await watch.hlen(inflightKey(k.id))) === 0 ? r : null;
    });
    // One record per upstream call: the five finished ones (their batch reached Redis, or their
    // entries are written off in their place) and one per request held at the upstream.
    expect(rows.length).toBe(A.received.length - start);
    expect(new Set(rows.map((r) => r.recordKey)).size).toBe(rows.length);
    const lost = rows.filter((r) => r.outcome === "interrupted");
    expect(lost.length).toBeGreaterThanOrEqual(10);
    expect(lost.every((r) => r.requestId !== null && r.errorCode === "gateway_instance_lost")).toBe(true);
    // Each at its own worst case, not the lease's slice: the crash charged what was in flight.
    for (const r of lost) expect(r.costUsd).toBeLessThanOrEqual(est + 1e-9);
    const spent = rows.reduce((a, r) => a + r.costUsd, 0);
    expect(spent).toBeLessThanOrEqual(rows.filter((r) => r.outcome === "ok").reduce((a, r) => a + r.costUsd, 0) + lost.length * est + 1e-9);
    expect((await monthSpendUsd(gw.ctx, await keyContextOf(gw, k.raw))).usd).toBeCloseTo(spent, 9);
  }, 60_000);

  test("CONTRACT §7 leases: three instances, a $10 key at 60 req/s, one SIGKILLed at 4 s → records = upstream calls, the crash charged at most the worst case in flight, counter = Σ records", async () => {
    const body = chatBody({ max_tokens: 50, mock: { latency_ms: 400 } });
    const est = await estimateOf(body);
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 10 });
    const kids = [await child(), await child()];
    const victim = kids[0]!;
    const urls = [gw.url, ...kids.map((c) => c.url)];
    const start = A.received.length;
    // Every instance knows the key (a cold key's first requests read Postgres) and sees it hot.
    for (const url of urls) for (let i = 0; i < 2; i++) expect((await tryPost(url, k.raw, body))!.status).toBe(200);
    const began = Date.now();
    const sent: Array<Promise<Response | null>> = [];
    let killed = false;
    // 60 requests a second, round robin over the three instances, for 6 s; the first at 4 s dies.
    for (let i = 0; Date.now() - began < 6000; i++) {
      if (!killed && Date.now() - began >= 4000) {
        killed = true;
        await victim.kill();
      }
      const url = urls[i % 3]!;
      if (!(killed && url === victim.url)) sent.push(tryPost(url, k.raw, body));
      await Bun.sleep(Math.max(0, began + (i + 1) * (1000 / 60) - Date.now()));
    }
    const answers = await Promise.all(sent);
    expect(answers.filter((r) => r !== null && r.status !== 200).map((r) => r!.status)).toEqual([]);
    await kids[1]!.terminate();
    const upstream = () => A.received.length - start;
    const rows = await until("a record per upstream call and no entry left", async () => {
      const r = await recordsOf(k.id);
      return r.length >= upstream() && (await watch.hlen(inflightKey(k.id))) === 0 ? r : null;
    });
    expect(rows.length).toBe(upstream());
    expect(new Set(rows.map((r) => r.recordKey)).size).toBe(rows.length);
    const lost = rows.filter((r) => r.outcome === "interrupted");
    expect(lost.length).toBeGreaterThan(0);
    // Each interrupted record is one request's worst case; the lease's unused slice is not charged.
    for (const r of lost) expect(r.costUsd).toBeLessThanOrEqual(est + 1e-9);
    expect(lost.reduce((a, r) => a + r.costUsd, 0)).toBeLessThanOrEqual(lost.length * est + 1e-9);
    const spent = rows.reduce((a, r) => a + r.costUsd, 0);
    expect((await monthSpendUsd(gw.ctx, await keyContextOf(gw, k.raw))).usd).toBeCloseTo(spent, 9);
  }, 90_000);
});
