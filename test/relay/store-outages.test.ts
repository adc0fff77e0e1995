// Store outages (CONTRACT §7), on a Postgres cluster and a redis-server of this test's own, stopped
// and started again by PID (never the machine's shared ones):
// - Postgres stopped: a key already known keeps being served from the cache, unknown keys and
//   management answer 500 server_error fast, usage is buffered and written once Postgres is back;
// - Redis stopped: management writes still succeed (POST returns its raw key, PATCH revoked
//   answers 200) and a revocation reaches another gateway process over Postgres NOTIFY.
// These tests bring their own stores, so they run once, with the real-stores suite.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq, sql } from "drizzle-orm";
import postgres from "postgres";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startPrivatePostgres, type PrivatePostgres } from "../helpers/private-postgres.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { jobWhenEnded, promptsSent } from "../helpers/blitz-jobs.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { post, spawnSibling, type ChildGateway } from "./child-gateway.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "./fixtures.ts";
import { openDb } from "../../src/store/db/client.ts";
import { openKv } from "../../src/store/kv/index.ts";
import { notifyStatement, onInvalidation, type Invalidation } from "../../src/store/invalidation.ts";
import { createLogger } from "../../src/logger.ts";
import { until } from "../helpers/until.ts";

const run = REAL_STORES ? describe : describe.skip;
const label = REAL_STORES ? "own Postgres and Redis processes" : "skipped on the embedded suite: these tests start their own Postgres and run once, with the real-stores suite";

let pg: PrivatePostgres;
let mock: MockUpstream;

async function createDatabase(name: string): Promise<string> {
  const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  return pg.url.replace(/\/postgres$/, `/${name}`);
}

const chat = (url: string, raw: string) => post(url, raw, chatBody());

/**
 * A gateway on a fresh database of the private cluster (no Redis), with an account, a saved key and
 * a routing key on the mock; keys are fresh for 1 s and then served stale for `staleSeconds`.
 */
async function outageGateway(db: string, staleSeconds: number) {
  const url = await createDatabase(db);
  const gw = await startTestGateway({ DATABASE_URL: url, REDIS_URL: "", PROVIDER_OPENAI_BASE_URL: mock.url, KEY_CACHE_TTL_SECONDS: "1", KEY_CACHE_STALE_SECONDS: String(staleSeconds) });
  const acct = await createAccount(gw);
  const cred = await addCredential(gw, acct.id, "openai");
  const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
  return { gw, acct, cred, key };
}

async function timed<T>(f: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const t = performance.now();
  const value = await f();
  return { value, ms: performance.now() - t };
}

run(`store outages (${label})`, () => {
  beforeAll(async () => {
    [pg, mock] = await Promise.all([startPrivatePostgres(), startMockOpenAI()]);
  }, 60_000);
  // The postmaster gets 5 s to shut down before it is killed: more than the default hook timeout.
  afterAll(async () => {
    await pg?.destroy();
    await mock?.stop();
  }, 15_000);

  test("CONTRACT §7 Postgres stopped: a known key is served from the cache, unknown keys and management get 500 server_error within 2 s, usage is written once Postgres is back", async () => {
    // Fresh for 1 s, then served stale for up to 3 s after its last read while Postgres is down.
    const { gw, acct, key } = await outageGateway("outage_pg", 3);
    try {
      const unknownKey = `gw_${"x".repeat(40)}`;
      expect((await chat(gw.url, key.raw)).status).toBe(200); // the key is now known (cached)
      await gw.ctx.services.usage.flush();

      await pg.stopServer();
      await Bun.sleep(1200); // past the fresh period: the key would be re-read now
      const warm = await timed(() => chat(gw.url, key.raw));
      expect(warm.value.status).toBe(200);
      expect(((await warm.value.json()) as any).choices[0].message.content).toBeString();
      expect(warm.ms).toBeLessThan(2000);

      const unknown = await timed(() => gw.call("/v1/chat/completions", { token: unknownKey, body: chatBody() }));
      expect(unknown.value.status).toBe(500);
      expect(unknown.value.body.error.type).toBe("server_error");
      expect(unknown.value.body.error.code).toBe("server_error");
      expect(unknown.ms).toBeLessThan(2000);

      const mgmt = await timed(() => gw.call("/v1/organizations/routing-keys", { token: acct.token }));
      expect(mgmt.value.status).toBe(500);
      expect(mgmt.value.body.code).toBe("server_error");
      expect(mgmt.ms).toBeLessThan(2000);

      // A second request while down is served too (no new attempt to reach Postgres in between).
      expect((await chat(gw.url, key.raw)).status).toBe(200);

      // Past KEY_CACHE_STALE_SECONDS since the last read: the cached copy is no longer served.
      await Bun.sleep(2000);
      const expired = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
      expect(expired.status).toBe(500);
      expect(expired.body.error.code).toBe("server_error");

      await pg.startServer();
      // The two answers served while Postgres was down reach it (the usage queue kept them).
      const deadline = Date.now() + 5_000;
      let rows = 0;
      while (Date.now() < deadline) {
        rows = (await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, key.id)).catch(() => [])).length;
        if (rows >= 3) break;
        await Bun.sleep(200);
      }
      expect(rows).toBe(3);
      expect((await chat(gw.url, key.raw)).status).toBe(200);
      expect((await gw.call("/v1/organizations/routing-keys", { token: acct.token })).status).toBe(200);
    } finally {
      await pg.startServer().catch(() => {});
      await gw.stop();
    }
  }, 60_000);

  test("CONTRACT §7 Postgres frozen (SIGSTOP, connections open, no answer): a known key is served, unknown keys and management get 500 server_error within 2.5 s and no management write is started; all answer again after SIGCONT", async () => {
    const { gw, acct, cred, key } = await outageGateway("outage_pg_frozen", 30);
    try {
      expect((await chat(gw.url, key.raw)).status).toBe(200);
      const before = (await gw.call("/v1/organizations/routing-keys", { token: acct.token })).body.routing_keys.length as number;
      // Every pooled connection open before the freeze: a query then waits on a live socket to a
      // stopped backend (a new connection would fail on its own connect timeout instead).
      await Promise.all(Array.from({ length: 24 }, () => gw.call("/v1/organizations/routing-keys", { token: acct.token })));

      pg.freeze();
      await Bun.sleep(1200); // past the fresh period: the key would be re-read now
      const warm = await timed(() => chat(gw.url, key.raw));
      expect(warm.value.status).toBe(200);
      expect(warm.ms).toBeLessThan(2500);

      const unknown = await timed(() => gw.call("/v1/chat/completions", { token: `gw_${"y".repeat(40)}`, body: chatBody() }));
      expect(unknown.value.status).toBe(500);
      expect(unknown.value.body.error.code).toBe("server_error");
      expect(unknown.ms).toBeLessThan(2500);

      const read = await timed(() => gw.call("/v1/organizations/me", { token: acct.token }));
      expect(read.value.status).toBe(500);
      expect(read.value.body).toMatchObject({ code: "server_error" });
      expect(read.ms).toBeLessThan(2500);

      const write = await timed(() => gw.call("/v1/organizations/routing-keys", { method: "POST", token: acct.token, body: { label: "while frozen", providers: [lane("openai", cred.id)] } }));
      expect(write.value.status).toBe(500);
      expect(write.value.body).toMatchObject({ code: "server_error" });
      expect(write.ms).toBeLessThan(2500);

      pg.thaw();
      const back = await gw.call("/v1/organizations/routing-keys", { token: acct.token });
      expect(back.status).toBe(200);
      // The write refused while frozen was never started, so it cannot have committed late.
      await Bun.sleep(300);
      expect((await gw.call("/v1/organizations/routing-keys", { token: acct.token })).body.routing_keys.length).toBe(before);
      expect((await chat(gw.url, key.raw)).status).toBe(200);
    } finally {
      pg.thaw();
      await gw.stop();
    }
  }, 60_000);

  // The job queue of each store mode: in process (no Redis), and BullMQ on the machine's Redis (the
  // queue's name is derived from this cluster's database, so it is this test's alone).
  for (const [mode, redisUrl] of [["the in-process queue", ""], ["BullMQ", process.env.REDIS_URL ?? ""]] as const) {
    test(`CONTRACT §8 Postgres stopped for 2 s while a /blitz job runs (${mode}): the items it failed under are tried again; the job completes with every prompt sent once and recorded once`, async () => {
      const url = await createDatabase(`outage_blitz_${redisUrl ? "bullmq" : "memory"}`);
      const gw = await startTestGateway({ DATABASE_URL: url, REDIS_URL: redisUrl, PROVIDER_OPENAI_BASE_URL: mock.url, BLITZ_JOB_CONCURRENCY: "6", KEY_CACHE_STALE_SECONDS: "120" });
      try {
        const acct = await createAccount(gw);
        const cred = await addCredential(gw, acct.id, "openai");
        const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
        const n = 90;
        const tag = `PGO${redisUrl ? "b" : "m"}`;
        const prompts = Array.from({ length: n }, (_, i) => ({ messages: [{ role: "user", content: `${tag} p${i}.` }], mock: { latency_ms: 60 } }));
        const sentOf = () => promptsSent(mock, tag);
        const made = await gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 20, prompts } });
        expect(made.status).toBe(202);
        const id = String(made.body.id);
        while (sentOf().size < 12) await Bun.sleep(10);

        await pg.stopServer();
        await Bun.sleep(2000);
        // The outage fell inside the job: prompts were left to run, each of which reads Postgres first.
        expect(sentOf().size).toBeLessThan(n);
        await pg.startServer();

        const job = await jobWhenEnded(gw, key.raw, id);
        expect(job.status).toBe("completed");
        expect(job.progress).toEqual({ done: n, remaining: 0, succeeded: n, failed: 0, not_run: 0, interrupted: 0 });
        const sent = sentOf();
        expect(sent.size).toBe(n);
        expect([...sent.values()].every((c) => c === 1)).toBe(true);
        await gw.ctx.services.usage.flush();
        const rows = await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, key.id));
        expect(rows).toHaveLength(n);
        expect(new Set(rows.map((r) => r.requestId)).size).toBe(n);
        expect(job.cost_usd).toBeCloseTo(rows.reduce((a, r) => a + r.costUsd, 0), 9);
      } finally {
        await pg.startServer().catch(() => {});
        await gw.stop();
      }
    }, 90_000);
  }

  describe("Redis stopped", () => {
    let redis: PrivateRedis;
    let gw: TestGateway;
    let peer: ChildGateway;
    let acct: { id: string; token: string };
    let providers: unknown[];

    beforeAll(async () => {
      redis = await startPrivateRedis();
      const url = await createDatabase("outage_redis");
      gw = await startTestGateway({ DATABASE_URL: url, REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: mock.url });
      peer = await spawnSibling(gw, { PROVIDER_OPENAI_BASE_URL: mock.url });
      acct = await createAccount(gw);
      providers = [lane("openai", (await addCredential(gw, acct.id, "openai")).id)];
    }, 60_000);
    afterAll(async () => {
      await peer?.terminate();
      await gw?.stop();
      await redis?.stop();
    }, 60_000);

    test("CONTRACT §7 a management write is all or nothing: with Redis down, POST routing-keys returns its raw key and PATCH revoked answers 200; the revocation reaches another gateway process within 5 s over Postgres NOTIFY", async () => {
      const made = await gw.call("/v1/organizations/routing-keys", { method: "POST", token: acct.token, body: { label: "before", providers } });
      expect(made.status).toBe(200);
      for (const url of [gw.url, peer.url]) expect((await chat(url, made.body.raw_key)).status).toBe(200); // cached on both

      await redis.kill();
      const created = await gw.call("/v1/organizations/routing-keys", { method: "POST", token: acct.token, body: { label: "during", providers } });
      expect(created.status).toBe(200);
      expect(created.body.raw_key).toStartWith("gw_");
      expect((await chat(peer.url, created.body.raw_key)).status).toBe(200);

      const revoked = await gw.call(`/v1/organizations/routing-keys?id=${made.body.routing_key.id}`, { method: "PATCH", token: acct.token, body: { revoked: true } });
      expect(revoked.status).toBe(200);
      expect(revoked.body.routing_key.revoked_at).not.toBeNull();
      const t0 = performance.now();
      let status = 0;
      while (performance.now() - t0 < 5000) {
        status = (await chat(peer.url, made.body.raw_key)).status;
        if (status === 401) break;
        await Bun.sleep(25);
      }
      expect(status).toBe(401);
      expect((await chat(gw.url, made.body.raw_key)).status).toBe(401);
    }, 30_000);
  });

  test("CONTRACT §7 boot: the migrations' session, refused a timely connection (Postgres answering late), is retried and the database opens", async () => {
    const url = await createDatabase("migrate_boot");
    const dir = mkdtempSync(join(tmpdir(), "gw-migrate-"));
    pg.freeze();
    const thaw = setTimeout(() => pg.thaw(), 1_600);
    try {
      // Without the retry, openDb rejects with CONNECT_TIMEOUT after 1 s.
      const dbh = await openDb({ databaseUrl: url, dataDir: dir });
      const rows = (await dbh.db.execute(sql`select count(*)::int as n from usage_records`)) as unknown as Array<{ n: number }>;
      expect(rows[0]!.n).toBe(0); // migrated: the schema is there
      await dbh.close();
    } finally {
      clearTimeout(thaw);
      pg.thaw();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  test("CONTRACT §7 invalidations: a LISTEN connection that times out at boot (Postgres answering late) is retried, and NOTIFYs reach the instance once it connects", async () => {
    const url = await createDatabase("listen_boot");
    const dir = mkdtempSync(join(tmpdir(), "gw-listen-"));
    const dbh = await openDb({ databaseUrl: url, dataDir: dir });
    const kv = await openKv(null);
    const heard: Invalidation[] = [];
    try {
      // The pool holds no connection yet: LISTEN opens one, which gets no answer for 1.6 s, past
      // the 1 s connection timeout. Without the retry, onInvalidation rejects with CONNECT_TIMEOUT.
      pg.freeze();
      const thaw = setTimeout(() => pg.thaw(), 1_600);
      try {
        await onInvalidation({ db: dbh.db, dbh, kv, log: createLogger("silent") }, (m) => heard.push(m));
      } finally {
        clearTimeout(thaw);
        pg.thaw();
      }
      await dbh.db.execute(notifyStatement({ kind: "key", hash: "after-boot" }));
      await until("the NOTIFY heard", async () => (heard.some((m) => m.kind === "key" && m.hash === "after-boot") ? true : null), 5_000);
    } finally {
      pg.thaw();
      await dbh.close();
      await kv.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
