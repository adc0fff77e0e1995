// Durability of the money path (CONTRACT §7), with real child gateway processes over the test's own
// redis-server (no persistence, restarted by PID) and the shared Postgres: a request that reached an
// upstream has exactly one usage record even if its gateway is SIGKILLed mid-request (the in-flight
// ledger and a reconciler on another instance), the budget counter equals the sum of the records,
// and a Redis restart with requests in flight does not let spend pass the budget.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { inArray } from "drizzle-orm";
import Redis from "ioredis";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { keyContextOf, usageRows } from "../helpers/relay-world.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { monitorRedis, type RedisMonitor } from "../helpers/redis-monitor.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { monthSpendUsd, reserve } from "../../src/money/counters.ts";
import type { Ledger } from "../../src/money/ledger/index.ts";
import { monthKey } from "../../src/lib/time.ts";
import { estimateCostUsd } from "../../src/money/estimate.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { inflightKey } from "../../src/money/counters.ts";
import { interruptedRow } from "../../src/money/ledger/facts.ts";
import { GROUP } from "../../src/money/ledger/types.ts";
import { post, spawnSibling, tryPost, type ChildGateway } from "./child-gateway.ts";
import { addCredential, addRoutingKey, chatBody, lane, bytesOf } from "./fixtures.ts";
import { until as waitUntil } from "../helpers/until.ts";

const name = REAL_STORES
  ? "money durability (child gateways, own redis-server)"
  : "money durability: skipped in embedded mode (needs real Redis and several processes; embedded mode is one process, see README)";

const until = <T>(what: string, fn: () => Promise<T | null>, ms = 20_000) => waitUntil(what, fn, ms);

describe.if(REAL_STORES)(name, () => {
  let redis: PrivateRedis;
  let A: MockUpstream;
  let gw: TestGateway;
  let acct: { id: string };
  let cred: { id: string };
  const children: ChildGateway[] = [];

  beforeAll(async () => {
    redis = await startPrivateRedis();
    A = await startMockOpenAI();
    // This in-process instance provisions, reads the database, and is the surviving reconciler.
    gw = await startTestGateway({ REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: A.url, INSTANCE_DEAD_AFTER_SECONDS: "3" });
    acct = await createAccount(gw);
    cred = await addCredential(gw, acct.id, "openai");
  }, 30_000);
  afterEach(() => A.setDefault({}), 60_000);
  afterAll(async () => {
    for (const c of children) await c.kill().catch(() => {});
    await gw?.stop();
    await A?.stop();
    await redis?.stop();
  }, 60_000);

  const child = async () => {
    const c = await spawnSibling(gw, { PROVIDER_OPENAI_BASE_URL: A.url, INSTANCE_DEAD_AFTER_SECONDS: "3" });
    children.push(c);
    return c;
  };
  const recordsOf = async (keyIds: string[]) => {
    return usageRows(gw, inArray(usageRecords.routingKeyId, keyIds));
  };

  // With budget leases (on by default) the budgeted key's requests after the first are admitted
  // from this instance's lease, without a round trip for their admission; each still has an
  // in-flight entry of its own, so one whose instance dies gets its own `interrupted` record and
  // the lease's unused rest goes back (CONTRACT §7, leases).
  test("CONTRACT §7 durability: SIGKILL with 60 requests in flight → every upstream request has exactly one usage record after reconciliation, leased or not, counter = Σ records", async () => {
    const budgeted = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    const free = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    const c = await child();
    const start = A.received.length;
    // Some finished requests (their records in the usage stream or already in Postgres)…
    for (let i = 0; i < 5; i++) {
      expect((await tryPost(c.url, budgeted.raw, chatBody()))!.status).toBe(200);
      expect((await tryPost(c.url, free.raw, chatBody()))!.status).toBe(200);
    }
    // …and 60 held by the upstream when the process dies, streams and plain requests.
    const slow = { mock: { latency_ms: 30_000 } };
    const inflight = Array.from({ length: 60 }, (_, i) =>
      tryPost(c.url, i % 2 ? budgeted.raw : free.raw, chatBody({ ...slow, stream: i % 3 === 0, max_tokens: 500 })));
    await until("60 requests at the upstream", async () => (A.received.length - start >= 70 ? true : null));
    await c.kill();
    await Promise.all(inflight);
    const upstream = A.received.length - start;
    expect(upstream).toBe(70);
    // The surviving instance sees the dead one's silence and writes its requests off as interrupted:
    // the key without a budget has one record per upstream request…
    const freeRows = await until("one record per upstream request of the key without a budget", async () => {
      const r = await recordsOf([free.id]);
      return r.length >= 35 ? r : null;
    });
    expect(freeRows.length).toBe(35);
    expect(freeRows.filter((r) => r.outcome === "interrupted").length).toBe(30);
    expect(new Set(freeRows.map((r) => r.requestId)).size).toBe(35);
    // …and so has the budgeted key, each held request at its worst case, none for its leases.
    const kc = await keyContextOf(gw, budgeted.raw);
    const worst = Math.max(...[false, true].map((stream) => estimateCostUsd(gw.ctx, kc, chatBody({ ...slow, stream, max_tokens: 500 }), bytesOf(chatBody({ ...slow, stream, max_tokens: 500 })))!));
    const rows = await until("the budgeted key's in-flight requests written off", async () => {
      const r = await recordsOf([budgeted.id, free.id]);
      return r.filter((x) => x.routingKeyId === budgeted.id).length >= 35 ? r : null;
    });
    const mine = rows.filter((r) => r.routingKeyId === budgeted.id);
    expect(mine.length).toBe(35);
    expect(mine.filter((r) => r.outcome === "ok").length).toBe(5);
    expect(mine.filter((r) => r.outcome === "interrupted").length).toBe(30);
    expect(new Set(mine.map((r) => r.requestId)).size).toBe(35);
    for (const r of mine.filter((x) => x.outcome === "interrupted")) expect(r.costUsd).toBeLessThanOrEqual(worst + 1e-9);
    // The killed requests' reservations stay as their interrupted records' cost: counter = Σ records.
    const spent = rows.filter((r) => r.routingKeyId === budgeted.id).reduce((a, r) => a + r.costUsd, 0);
    const counter = await monthSpendUsd(gw.ctx, await keyContextOf(gw, budgeted.raw));
    expect(counter.usd).toBeCloseTo(spent, 9);
    expect(rows.filter((r) => r.routingKeyId === budgeted.id && r.outcome === "interrupted").every((r) => r.costUsd > 0)).toBe(true);
  }, 60_000);

  test("CONTRACT §9: a tagged request whose instance died: its `interrupted` record carries the request's tags, budgeted (leased or not) and not", async () => {
    const budgeted = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    const free = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    const c = await child();
    const start = A.received.length;
    const slow = { mock: { latency_ms: 30_000 }, metadata: { tags: ["fleet:7", "night"] } };
    const inflight = Array.from({ length: 6 }, (_, i) => tryPost(c.url, i % 2 ? budgeted.raw : free.raw, chatBody({ ...slow, max_tokens: 200 })));
    await until("6 requests at the upstream", async () => (A.received.length - start >= 6 ? true : null));
    await c.kill();
    await Promise.all(inflight);
    const rows = await until("the dead instance's requests written off", async () => {
      const r = await recordsOf([budgeted.id, free.id]);
      return r.length >= 6 ? r : null;
    });
    expect(rows.map((r) => r.outcome)).toEqual(Array(6).fill("interrupted"));
    for (const r of rows) expect(r.tags).toEqual(["fleet:7", "night"]);
  }, 60_000);

  /** A fresh key and a usage stream entry for it: one $0.001 record of request `<prefix>-<now>`, as an instance writes them. */
  const streamedRecord = async (prefix: string) => {
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    const now = Date.now();
    const uid = `${prefix}-${now}`;
    const facts = { i: "gone-instance", m: monthKey(new Date(now)), t: now - 1_000, a: acct.id, e: "chat", p: "openai", md: "gpt-4o-mini", s: false, r: uid };
    return { k, uid, entry: JSON.stringify([interruptedRow(k.id, uid, facts, 1_000_000, now)]) };
  };

  test("CONTRACT §7 durability: usage records an instance read from the stream and died before writing are taken over by a live instance's drain, written once, and acknowledged", async () => {
    const ledger = gw.ctx.services.ledger!;
    const { k, uid, entry } = await streamedRecord("dead-consumer");
    const admin = new Redis(redis.url);
    try {
      // Added and delivered to a consumer that never acknowledges (an instance killed between its
      // read and its INSERT), in one transaction: the live drain never sees it as new.
      const replies = await admin.multi()
        .xadd(ledger.k.stream, "*", "r", entry)
        .xreadgroup("GROUP", GROUP, "gone-instance", "COUNT", 1000, "STREAMS", ledger.k.stream, ">")
        .exec();
      const id = replies![0]![1] as string;
      const pendingOf = async () => ((await admin.xpending(ledger.k.stream, GROUP, "-", "+", 1000)) as Array<[string, string]>).filter(([e]) => e === id);
      expect((await pendingOf()).map(([, consumer]) => consumer)).toEqual(["gone-instance"]);
      // Taken over once it has waited 15 s unacknowledged, looked for every 5 s: within about 20 s.
      const rows = await until("the dead consumer's record written by the live drain", async () => {
        const r = await recordsOf([k.id]);
        return r.length ? r : null;
      }, 40_000);
      expect(rows.map((r) => [r.requestId, r.outcome, r.costUsd])).toEqual([[uid, "interrupted", 0.001]]);
      await until("the entry acknowledged", async () => ((await pendingOf()).length === 0 ? true : null), 10_000);
      expect(await recordsOf([k.id])).toHaveLength(1);
    } finally {
      admin.disconnect();
    }
  }, 60_000);

  test("a drain called while another drain is writing what it read returns only once those rows are in Postgres (the usage pipeline's flush sees every streamed record)", async () => {
    const ledger = gw.ctx.services.ledger!;
    const { k, uid, entry } = await streamedRecord("concurrent-drain");
    const admin = new Redis(redis.url);
    try {
      await admin.xadd(ledger.k.stream, "*", "r", entry);
      // The first drain reads the entry; the second, sent right behind it, finds the stream empty.
      // Before drains were serialised the second returned then, ahead of the first one's INSERT.
      const first = ledger.drain();
      await ledger.drain();
      const rows = (await gw.ctx.db.select().from(usageRecords).where(inArray(usageRecords.routingKeyId, [k.id])));
      expect(rows.map((r) => r.requestId)).toEqual([uid]);
      await first;
    } finally {
      admin.disconnect();
    }
  });

  test("the reconcile lock lasts INSTANCE_DEAD_AFTER_SECONDS (at least 5 s): a reconciler that dies holding it delays the next by no more than a death is noticed", async () => {
    const ledger = gw.ctx.services.ledger!;
    // An instance silent for longer than INSTANCE_DEAD_AFTER_SECONDS (3 s here), so the reconcile takes the lock.
    const admin = new Redis(redis.url);
    let monitor: RedisMonitor | undefined;
    try {
      await admin.hset(ledger.k.instances, "gone-instance", Date.now() - 60_000);
      const seen: string[][] = [];
      monitor = await monitorRedis(redis.url);
      monitor.on("monitor", (_t: string, args: string[]) => { if (String(args[1]) === ledger.k.lock && /^set$/i.test(String(args[0]))) seen.push(args.map(String)); });
      // The heartbeat's own reconcile may hold the lock at first: call again until one takes it.
      await until("a reconcile that takes the lock", async () => {
        await ledger.reconcile();
        return seen.length ? true : null;
      }, 10_000);
      monitor.close();
      const px = seen[0]!.findIndex((a) => /^px$/i.test(a));
      expect(Number(seen[0]![px + 1])).toBe(5_000);
      await until("the silent instance reconciled", async () => ((await admin.hexists(ledger.k.instances, "gone-instance")) === 0 ? true : null), 10_000);
    } finally {
      admin.disconnect();
      monitor?.close();
    }
  });

  test("CONTRACT §7 reconcile at fleet scale: a dead instance's entry among 3,000 routing keys with nothing in flight is written off as interrupted, the key set read a page per round trip", async () => {
    const ledger = gw.ctx.services.ledger!;
    const admin = new Redis(redis.url);
    try {
      const tag = crypto.randomUUID().slice(0, 8);
      const idle = Array.from({ length: 3000 }, (_, i) => `rkey_idle_${tag}_${i}`);
      for (let i = 0; i < idle.length; i += 1000) await admin.sadd(ledger.k.keyset, ...idle.slice(i, i + 1000));
      // An entry of an instance silent for a minute, on a key of its own, as the admission script writes one.
      const keyId = `rkey_lost_${tag}`;
      const lost = `lost-${tag}`;
      const t = Date.now() - 60_000;
      const facts = { i: lost, m: monthKey(), a: acct.id, e: "chat", p: "openai", s: false, t, md: "gpt-4o-mini", r: `req-${tag}` };
      await admin.sadd(ledger.k.keyset, keyId);
      await admin.hset(inflightKey(keyId), `call-${tag}`, `${JSON.stringify(facts)}|2500000`);
      await admin.hset(ledger.k.instances, lost, t);
      const reads = async () => Number(/total_reads_processed:(\d+)/.exec(await admin.info("stats"))![1]);
      const before = await reads();
      await until("the lost instance's entry written off", async () => {
        await ledger.reconcile();
        return (await admin.hlen(inflightKey(keyId))) === 0 ? true : null;
      }, 15_000);
      // One reconcile (the heartbeat's, or this test's) read 3,001 ledgers: a round trip each
      // before, a page of 500 per round trip now. The margin covers the gateway's other work meanwhile.
      expect((await reads()) - before).toBeLessThan(300);
      const rows = await until("the interrupted record", async () => {
        const r = await recordsOf([keyId]);
        return r.length ? r : null;
      });
      expect(rows.map((r) => [r.outcome, r.errorCode, r.costUsd])).toEqual([["interrupted", "gateway_instance_lost", 0.0025]]);
      expect(await admin.hexists(ledger.k.instances, lost)).toBe(0);
    } finally {
      admin.disconnect();
    }
  });

  test("CONTRACT §7 durability: reservations and settlements are idempotent by request id (a resent command never charges twice)", async () => {
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 10 });
    const key = await keyContextOf(gw, k.raw);
    const ledger = gw.ctx.services.ledger as Ledger;
    const spend = async () => (await monthSpendUsd(gw.ctx, key)).usd;
    const entry = (id: string) => ledger.admission(key.id, id, ledger.facts(key, "chat", "gpt-4o-mini", monthKey()));
    // The same reservation sent twice (as ioredis resends after a reconnect) is made once.
    const a = await reserve(gw.ctx, key, 1, 1, entry("req-idem-1"));
    const b = await reserve(gw.ctx, key, 1, 1, entry("req-idem-1"));
    expect(a!.nano).toBe(b!.nano);
    expect(await spend()).toBeCloseTo(1, 9);
    // The same settlement twice: applied once (real cost 0.25 replaces the 1 reserved).
    ledger.settle(key, "req-idem-1", a!.month, a!.nano, 250_000_000);
    await ledger.flush();
    ledger.settle(key, "req-idem-1", a!.month, a!.nano, 250_000_000);
    await ledger.flush();
    expect(await spend()).toBeCloseTo(0.25, 9);
    // A settlement whose reservation is gone (Redis lost it) adds its full cost, once.
    ledger.settle(key, "req-idem-2", a!.month, 500_000_000, 300_000_000);
    await ledger.flush();
    ledger.settle(key, "req-idem-2", a!.month, 500_000_000, 300_000_000);
    await ledger.flush();
    expect(await spend()).toBeCloseTo(0.55, 9);
  });

  test("CONTRACT §7 durability: Redis restarted empty with records still in the usage stream → the instance that sent them writes them from its copy, once each, and counter = Σ records", async () => {
    const budgeted = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    const free = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    const usage = gw.ctx.services.usage;
    const ledger = gw.ctx.services.ledger as Ledger;
    const streamed = async () => {
      const c = new Redis(redis.url);
      try {
        const entries = (await c.xrange(ledger.k.stream, "-", "+")) as Array<[string, string[]]>;
        return entries.reduce((n, [, f]) => n + (JSON.parse(f[1]!) as unknown[]).length, 0);
      } finally {
        c.disconnect();
      }
    };
    // No drain runs while the usage pipeline is held: the records wait in the stream, in Redis only.
    const release = usage.hold();
    try {
      for (let i = 0; i < 4; i++) {
        expect((await tryPost(gw.url, budgeted.raw, chatBody()))!.status).toBe(200);
        expect((await tryPost(gw.url, free.raw, chatBody()))!.status).toBe(200);
      }
      await until("8 records in the stream", async () => ((await streamed()) >= 8 ? true : null));
      expect((await gw.ctx.db.select().from(usageRecords).where(inArray(usageRecords.routingKeyId, [budgeted.id, free.id]))).length).toBe(0);
      await redis.restart(); // empty: the stream and its 8 records are gone from Redis
    } finally {
      release();
    }
    const rows = await until("the 8 records in Postgres", async () => {
      const r = await recordsOf([budgeted.id, free.id]);
      return r.length >= 8 ? r : null;
    });
    await Bun.sleep(1500); // a second heartbeat must not write them again
    const again = await recordsOf([budgeted.id, free.id]);
    expect(again.length).toBe(8);
    expect(new Set(again.map((r) => r.recordKey)).size).toBe(8);
    expect(rows.every((r) => r.outcome === "ok")).toBe(true);
    // Their settlement went to the counter Redis lost; the rebuilt counter holds each once.
    for (const k of [budgeted, free]) {
      const spent = again.filter((r) => r.routingKeyId === k.id).reduce((a, r) => a + r.costUsd, 0);
      expect(spent).toBeGreaterThan(0);
      expect((await monthSpendUsd(gw.ctx, await keyContextOf(gw, k.raw))).usd).toBeCloseTo(spent, 9);
    }
    // Once a drain has committed what this instance streams, its copies go (memory stays flat).
    for (let i = 0; i < 3; i++) expect((await tryPost(gw.url, free.raw, chatBody()))!.status).toBe(200);
    await until("the copies dropped after the drain", async () => (ledger.unackedRecords === 0 ? true : null), 10_000);
  }, 60_000);

  test("CONTRACT §7 durability: records written straight to Postgres while Redis was down are counted once, even when the counter is rebuilt before their settlement comes back", async () => {
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    const usage = gw.ctx.services.usage;
    expect((await tryPost(gw.url, k.raw, chatBody()))!.status).toBe(200); // warm: key cached, counter made
    await until("the first record drained", async () => ((await recordsOf([k.id])).length === 1 ? true : null));
    await redis.kill();
    try {
      // Served without a budget: the usage stream is away, so the records go straight to Postgres
      // and their settlements wait in this instance for Redis.
      for (let i = 0; i < 3; i++) expect((await tryPost(gw.url, k.raw, chatBody()))!.status).toBe(200);
      await until("the 3 records written straight to Postgres", async () => {
        // A full flush pulls the usage stream first: with Redis away that read is dropped (the
        // stream waits for Redis) and what this instance holds is written, never a rejection.
        await usage.flush();
        return (await gw.ctx.db.select().from(usageRecords).where(inArray(usageRecords.routingKeyId, [k.id]))).length === 4 ? true : null;
      });
    } finally {
      await redis.restart(); // empty
    }
    // A reader rebuilds the counter from Postgres as soon as the gateway's connection is back,
    // before the settlements' retry timer fires.
    for (let i = 0; i < 200; i++) {
      if (await gw.ctx.kv.getNumber("probe").then(() => true, () => false)) break;
      await Bun.sleep(5);
    }
    const key = await keyContextOf(gw, k.raw);
    const rows = await gw.ctx.db.select().from(usageRecords).where(inArray(usageRecords.routingKeyId, [k.id]));
    expect(rows.length).toBe(4);
    const spent = rows.reduce((a, r) => a + r.costUsd, 0);
    expect((await monthSpendUsd(gw.ctx, key)).usd).toBeCloseTo(spent, 9);
    await Bun.sleep(2500); // the retried settlements have gone through by now
    expect((await monthSpendUsd(gw.ctx, key)).usd).toBeCloseTo(spent, 9);
  }, 30_000);

  for (const capped of [true, false]) {
    test(`CONTRACT §7 durability: Redis restarted empty with requests in flight → spend ≤ budget (${capped ? "with" : "without"} output limits)`, async () => {
      const body = capped ? chatBody({ max_tokens: 100, mock: { completion_tokens: 100, latency_ms: 1500 } }) : chatBody({ mock: { completion_tokens: 16_384, latency_ms: 1500 } });
      const probe = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 1 });
      const est = estimateCostUsd(gw.ctx, await keyContextOf(gw, probe.raw), body, bytesOf(body))!;
      const budget = est * 10.5;
      const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: budget });
      const c = await child();
      const first = Array.from({ length: 15 }, () => tryPost(c.url, k.raw, body));
      const start = A.received.length;
      await until("the first wave at the upstream", async () => (A.received.length - start >= 10 ? true : null));
      await Bun.sleep(100);
      await redis.restart(); // empty: counters, ledger and stream are gone
      const second = Array.from({ length: 15 }, () => tryPost(c.url, k.raw, body));
      const all = await Promise.all([...first, ...second]);
      const ids = all.filter((r) => r?.status === 200).map((r) => r!.headers.get("x-request-id")!);
      const statuses = all.map((r) => r?.status ?? "no answer");
      expect(statuses.filter((s) => s !== 200 && s !== 402 && s !== 503)).toEqual([]);
      expect(ids.length).toBeGreaterThanOrEqual(10);
      await c.terminate(); // drains its records
      const rows = await until("the records", async () => {
        const r = await recordsOf([k.id]);
        return r.length >= ids.length ? r : null;
      });
      const spent = rows.reduce((a, r) => a + r.costUsd, 0);
      // On failure, the story: each answer, and each record in units of the worst-case estimate.
      if (spent > budget + 1e-12) console.error(JSON.stringify({ statuses, budgetInEstimates: budget / est, records: rows.map((r) => [r.outcome, r.costUsd / est]) }), c.output().slice(-4000));
      // The prompt estimate (a token per byte) is an upper bound here, so no estimate error to allow.
      expect(spent).toBeLessThanOrEqual(budget + 1e-12);
    }, 60_000);
  }
});

describe.if(REAL_STORES)(REAL_STORES ? "budget ceiling across instances (3 gateway processes)" : "budget ceiling across instances: skipped in embedded mode (one process)", () => {
  test("CONTRACT §7 budget: 200 concurrent requests over 3 instances without max_tokens never pass the budget", async () => {
    const A = await startMockOpenAI();
    const gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: A.url });
    const kids: ChildGateway[] = [];
    try {
      const acct = await createAccount(gw);
      const cred = await addCredential(gw, acct.id, "openai");
      // Answers as long as the model allows: each real cost is close to the reserved worst case.
      const body = chatBody({ mock: { completion_tokens: 16_384, latency_ms: 150 } });
      const probe = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 1 });
      const probeCtx = await keyContextOf(gw, probe.raw);
      const est = estimateCostUsd(gw.ctx, probeCtx, body, bytesOf(body))!;
      const budget = est * 10.5;
      const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: budget });
      const env = { PROVIDER_OPENAI_BASE_URL: A.url };
      kids.push(...(await Promise.all([spawnSibling(gw, env), spawnSibling(gw, env)])));
      const urls = [gw.url, ...kids.map((c) => c.url)];
      for (const url of urls) expect((await fetch(url + "/v1/key", { headers: { authorization: `Bearer ${k.raw}` } })).status).toBe(200);
      const res = await Promise.all(Array.from({ length: 200 }, (_, i) =>
        post(urls[i % 3]!, k.raw, body)));
      expect(res.map((r) => r.status).filter((s) => s !== 200 && s !== 402)).toEqual([]);
      const ok = res.filter((r) => r.status === 200);
      expect(ok.length).toBeGreaterThanOrEqual(10);
      for (const c of kids) expect(await c.terminate()).toBe(0);
      kids.length = 0;
      const rows = await usageRows(gw, inArray(usageRecords.routingKeyId, [k.id]));
      expect(rows.length).toBe(ok.length);
      expect(rows.reduce((a, r) => a + r.costUsd, 0)).toBeLessThanOrEqual(budget + 1e-12);
    } finally {
      for (const c of kids) await c.kill();
      await gw.stop();
      await A.stop();
    }
  }, 60_000);
});
