// REDIS_CLUSTER_NODES on a real three-master Redis Cluster (CONTRACT §2): the gateway reaches it
// through ioredis Cluster from one seed node, runs the whole money path (every script on one
// routing key's slot; test/relay/redis-cluster.test.ts proves no CROSSSLOT on a one-node cluster),
// keeps the ledger's own keys and stream on whichever nodes they hash to, follows MOVED when a
// slot changes owner behind its back, and carries pub/sub across nodes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import Redis from "ioredis";
import { counterKey } from "../../src/money/counters.ts";
import { monthKey } from "../../src/lib/time.ts";
import { RedisKV } from "../../src/store/kv/redis.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startPrivateCluster, type PrivateCluster } from "../helpers/private-redis.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "../relay/fixtures.ts";
import { BullJobQueue } from "../../src/blitz/jobs/bullmq-queue.ts";

const HAVE = Boolean(Bun.which("redis-server") && Bun.which("redis-cli"));
const label = HAVE ? storesLabel : "SKIPPED: redis-server or redis-cli is missing (apt-get install redis-server)";

describe.if(HAVE)(`REDIS_CLUSTER_NODES: a three-master Redis Cluster (${label})`, () => {
  let cluster: PrivateCluster;
  let mock: MockUpstream;
  let gw: TestGateway;
  const node = (port: number) => {
    const c = new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: 0 });
    c.on("error", () => {});
    return c;
  };
  const errorstats = async () => {
    let all = "";
    for (const p of cluster.ports) {
      const c = node(p);
      all += String(await c.info("errorstats"));
      c.disconnect();
    }
    return all;
  };
  /** The port of the node that owns `slot`. */
  const ownerOf = async (slot: number) => {
    const c = node(cluster.ports[0]!);
    try {
      const slots = (await c.call("CLUSTER", "SLOTS")) as Array<[number, number, [string, number]]>;
      return slots.find(([a, b]) => slot >= a && slot <= b)![2][1];
    } finally {
      c.disconnect();
    }
  };

  beforeAll(async () => {
    cluster = await startPrivateCluster(3);
    mock = await startMockOpenAI();
    // One seed node is enough: the client learns the others from it.
    gw = await startTestGateway({ REDIS_URL: "", REDIS_CLUSTER_NODES: `127.0.0.1:${cluster.ports[0]}`, PROVIDER_OPENAI_BASE_URL: mock.url });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await mock?.stop();
    await cluster?.stop();
  }, 60_000);

  test("CONTRACT §2 + §7: budget + limits admission, streamed and plain answers, /blitz and a 429 across keys on different masters; every record reaches Postgres; no CROSSSLOT", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const keys = await Promise.all(Array.from({ length: 6 }, () => addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 5, rpmLimit: 4, maxConcurrentRequests: 3 })));
    const c = node(cluster.ports[0]!);
    const owners = new Set<number>();
    for (const k of keys) owners.add(await ownerOf(Number(await c.call("CLUSTER", "KEYSLOT", counterKey(k.id, monthKey())))));
    c.disconnect();
    expect(owners.size).toBeGreaterThan(1); // the keys really live on different masters
    for (const k of keys) {
      for (const stream of [false, true, false]) {
        const r = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody({ stream, ...(stream ? { stream_options: { include_usage: true } } : {}) }) });
        expect(r.status).toBe(200);
      }
      const b = await gw.call("/blitz", { token: k.raw, body: { model: "gpt-4o-mini", prompts: ["a"] } });
      expect(b.status).toBe(200);
      const over = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody() });
      expect(over.status).toBe(429);
    }
    let n = 0;
    for (let i = 0; i < 100 && n < 24; i++) {
      await Bun.sleep(100);
      await gw.ctx.services.usage.flush();
      n = 0;
      for (const k of keys) n += (await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, k.id))).length;
    }
    expect(n).toBe(24);
    expect(await errorstats()).not.toContain("CROSSSLOT");
    expect((await gw.call("/readyz")).status).toBe(200);
  }, 60_000);

  test("CONTRACT §2: a slot moved to another master behind the client's back is followed (MOVED)", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 5 });
    const c = node(cluster.ports[0]!);
    const slot = Number(await c.call("CLUSTER", "KEYSLOT", counterKey(k.id, monthKey())));
    c.disconnect();
    const from = await ownerOf(slot);
    const to = cluster.ports.find((p) => p !== from)!;
    // The slot holds no key yet: it can change owner by decree on every node.
    const target = node(to);
    const toId = String(await target.call("CLUSTER", "MYID"));
    target.disconnect();
    // The new owner first (it bumps its config epoch, so gossip cannot hand the slot back), then the others.
    for (const p of [to, ...cluster.ports.filter((p) => p !== to)]) {
      const n = node(p);
      await n.call("CLUSTER", "SETSLOT", String(slot), "NODE", toId);
      n.disconnect();
    }
    const agreed = async () => {
      for (const p of cluster.ports) {
        const n = node(p);
        const slots = (await n.call("CLUSTER", "SLOTS")) as Array<[number, number, [string, number]]>;
        n.disconnect();
        if (slots.find(([a, b]) => slot >= a && slot <= b)?.[2][1] !== to) return false;
      }
      return true;
    };
    for (let i = 0; i < 100 && !(await agreed()); i++) await Bun.sleep(50);
    expect(await agreed()).toBe(true);
    const movedBefore = (await errorstats()).match(/errorstat_MOVED:count=(\d+)/g)?.join() ?? "";
    const r = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody() });
    expect(r.status).toBe(200);
    const t = node(to);
    expect(Number(await t.get(counterKey(k.id, monthKey())))).toBeGreaterThan(0); // written on the new owner
    t.disconnect();
    expect((await errorstats()).match(/errorstat_MOVED:count=(\d+)/g)?.join() ?? "").not.toBe(movedBefore); // a MOVED was answered, and followed
  }, 30_000);

  // The job queue is shared only over a shared database: with the embedded one it stays in process.
  test.if(Boolean(process.env.DATABASE_URL))("CONTRACT §2 + §8: /blitz jobs run on BullMQ in the Cluster (REDIS_CLUSTER_NODES, not REDIS_URL); every queue key carries the {gw-blitz} hash tag, so BullMQ's scripts never cross slots", async () => {
    expect(gw.ctx.services.blitzJobs.queue).toBeInstanceOf(BullJobQueue);
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 5 });
    const r = await gw.call("/blitz/jobs", { token: k.raw, body: { model: "gpt-4o-mini", prompts: Array.from({ length: 40 }, (_, i) => `cluster job ${i}`) } });
    expect(r.status).toBe(202);
    let job = r.body;
    for (let i = 0; i < 600 && job.progress.remaining > 0; i++) {
      await Bun.sleep(100);
      job = (await gw.call(`/blitz/jobs/${r.body.id}?limit=1`, { token: k.raw })).body;
    }
    expect([job.status, job.progress.succeeded]).toEqual(["completed", 40]);
    // BullMQ's keys: all in the hash tag's slot, on its one owner.
    const c = node(cluster.ports[0]!);
    const slot = Number(await c.call("CLUSTER", "KEYSLOT", "{gw-blitz}"));
    c.disconnect();
    const owner = await ownerOf(slot);
    for (const p of cluster.ports) {
      const n = node(p);
      const keys = await n.keys("*gw-blitz*");
      n.disconnect();
      if (p === owner) expect(keys.length).toBeGreaterThan(0);
      else expect(keys).toEqual([]);
      for (const key of keys) expect(key.startsWith("{gw-blitz}:")).toBe(true);
    }
    expect(await errorstats()).not.toContain("CROSSSLOT");
  }, 90_000);

  test("pub/sub (cache invalidation) reaches a subscriber connected through another node", async () => {
    const seeds = (i: number) => ({ mode: "cluster" as const, nodes: [{ host: "127.0.0.1", port: cluster.ports[i]! }] });
    const a = new RedisKV(seeds(1));
    const b = new RedisKV(seeds(2));
    try {
      await a.ping();
      await b.ping();
      const got: string[] = [];
      await b.subscribe("gw:test-channel", (m) => got.push(m));
      await a.publish("gw:test-channel", "hello");
      for (let i = 0; i < 50 && !got.length; i++) await Bun.sleep(50);
      expect(got).toEqual(["hello"]);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
