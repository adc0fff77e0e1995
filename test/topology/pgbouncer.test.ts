// Postgres through a transaction-mode pooler (CONTRACT §2 DATABASE_DIRECT_URL): a real PgBouncer
// of the test's own in front of the shared Postgres (a fresh database). The pooled URL gets no
// named prepared statements; migrations, their lock and LISTEN take the direct URL. Two gateway
// instances share the pooler; their Redis is a private one the test kills, so a revocation has
// only Postgres NOTIFY (on the direct session) to reach the other instance.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { eq, inArray } from "drizzle-orm";
import postgres from "postgres";
import { randomToken } from "../../src/lib/crypto.ts";
import { routingKeys } from "../../src/store/db/schema/index.ts";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { findBinary, startPrivatePgBouncer, type PrivatePgBouncer } from "../helpers/private-pgbouncer.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "../relay/fixtures.ts";

const HAVE = Boolean(findBinary("pgbouncer"));
const name = !REAL_STORES
  ? "PgBouncer: skipped in embedded mode (needs the real Postgres)"
  : HAVE
    ? "CONTRACT §2 DATABASE_DIRECT_URL: the gateway through PgBouncer in transaction mode"
    : "PgBouncer: SKIPPED, the pgbouncer binary is missing (apt-get install pgbouncer; .ci/run installs it)";

describe.if(REAL_STORES && HAVE)(name, () => {
  let bouncer: PrivatePgBouncer;
  let redis: PrivateRedis;
  let mock: MockUpstream;
  let a: TestGateway;
  let b: TestGateway;
  let direct: string;
  let dbName: string;

  beforeAll(async () => {
    dbName = `gwt_pgb_${randomToken(8).toLowerCase()}`;
    const admin = postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${dbName}`);
    await admin.end();
    const u = new URL(process.env.DATABASE_URL!);
    u.pathname = `/${dbName}`;
    direct = u.toString();
    bouncer = await startPrivatePgBouncer(direct, { poolSize: 3 });
    redis = await startPrivateRedis();
    mock = await startMockOpenAI();
    const env = { DATABASE_URL: bouncer.url, DATABASE_DIRECT_URL: direct, REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: mock.url, GATEWAY_SECRET_KEY: randomBytes(32).toString("hex") };
    // Both start at once: their migrations meet on the direct URL's advisory lock.
    [a, b] = await Promise.all([startTestGateway(env), startTestGateway(env)]);
  }, 60_000);

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await mock?.stop();
    await redis?.stop();
    await bouncer?.stop();
    const admin = postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} });
    await admin.unsafe(`drop database if exists ${dbName} with (force)`).catch(() => {});
    await admin.end();
  }, 60_000); // the gateways' shutdown waits out their dead Redis

  test("the pooler really is in transaction mode: a transaction using a statement prepared by an earlier one fails, unnamed statements do not (the test can fail)", async () => {
    // The holder keeps the server connection of the first run in a transaction, so the prepared
    // client's transaction lands on another one, where its statement does not exist. (Outside a
    // transaction postgres.js re-prepares and retries; inside one the error aborts it: the
    // failed commits that lost writes before prepared statements were turned off.)
    const named = postgres(bouncer.url, { max: 1, onnotice: () => {} });
    const unnamed = postgres(bouncer.url, { max: 1, prepare: false, onnotice: () => {} });
    const holder = postgres(bouncer.url, { max: 1, prepare: false, onnotice: () => {} });
    try {
      const q = (c: typeof named) => c`select ${1}::int + 1 as two, pg_backend_pid() as pid`;
      const first = await q(named);
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const tx = holder.begin(async (t) => {
        await t`select pg_backend_pid()`;
        await held;
      });
      await Bun.sleep(100);
      const err = await named.begin((t) => q(t as unknown as typeof named)).then(() => null, (e: Error) => e);
      await q(unnamed);
      const again = await unnamed.begin((t) => q(t as unknown as typeof named));
      release();
      await tx;
      expect(first[0]!.two).toBe(2);
      expect(String(err?.message)).toMatch(/prepared statement .* does not exist/);
      expect(again[0]!.two).toBe(2);
    } finally {
      await Promise.all([named.end(), unnamed.end(), holder.end()]);
    }
  });

  test("CONTRACT §7 + §2: 100 routing-key PATCHes through the pooler all persist (read back on the direct connection)", async () => {
    const acct = await createAccount(a);
    const cred = await addCredential(a, acct.id, "openai");
    const keys = await Promise.all(Array.from({ length: 20 }, () => addRoutingKey(a, acct.id, { lanes: [lane("openai", cred.id)] })));
    const last = new Map<string, string>();
    // 100 PATCHes, 10 at a time, spread over both instances (5 rounds over 20 keys).
    const jobs = Array.from({ length: 100 }, (_, i) => ({ key: keys[i % 20]!, label: `p-${i}`, gw: i % 2 ? a : b }));
    for (let i = 0; i < jobs.length; i += 10) {
      const batch = jobs.slice(i, i + 10);
      const res = await Promise.all(batch.map((j) => j.gw.call(`/v1/organizations/routing-keys?id=${j.key.id}`, { method: "PATCH", token: acct.token, body: { label: j.label, rpm_limit: i + 1 } })));
      for (const [n, r] of res.entries()) {
        expect(r.status).toBe(200);
        expect(r.body.label ?? r.body.routing_key?.label).toBe(batch[n]!.label);
        last.set(batch[n]!.key.id, batch[n]!.label);
      }
    }
    const check = postgres(direct, { max: 1, onnotice: () => {} });
    try {
      const rows = await check<{ id: string; label: string }[]>`select id, label from routing_keys where id in ${check(keys.map((k) => k.id))}`;
      expect(rows).toHaveLength(20);
      for (const r of rows) expect(r.label).toBe(last.get(r.id)!);
    } finally {
      await check.end();
    }
    // And through drizzle on the pooled client too.
    const pooled = await a.ctx.db.select({ id: routingKeys.id, label: routingKeys.label }).from(routingKeys).where(inArray(routingKeys.id, keys.map((k) => k.id)));
    for (const r of pooled) expect(r.label).toBe(last.get(r.id)!);
  }, 60_000);

  test("CONTRACT §7: with Redis down, revocations through the pooler reach the other instance within 5 s (NOTIFY on the direct session) and stick", async () => {
    const acct = await createAccount(a);
    const cred = await addCredential(a, acct.id, "openai");
    const keys = await Promise.all(Array.from({ length: 5 }, () => addRoutingKey(a, acct.id, { lanes: [lane("openai", cred.id)] })));
    // Warm both instances' caches.
    for (const k of keys) for (const g of [a, b]) expect((await g.call("/v1/chat/completions", { token: k.raw, body: chatBody() })).status).toBe(200);
    await redis.kill();
    for (const [i, k] of keys.entries()) {
      const by = i % 2 ? a : b;
      const other = i % 2 ? b : a;
      const r = await by.call(`/v1/organizations/routing-keys?id=${k.id}`, { method: "PATCH", token: acct.token, body: { revoked: true } });
      expect(r.status).toBe(200);
      const t0 = Date.now();
      let status = 0;
      while (Date.now() - t0 < 5000) {
        status = (await other.call("/v1/chat/completions", { token: k.raw, body: chatBody() })).status;
        if (status === 401) break;
        await Bun.sleep(50);
      }
      expect(status).toBe(401);
    }
    // Stuck: the rows say revoked, read on the direct connection, and neither instance serves them.
    const rows = await a.ctx.db.select({ id: routingKeys.id, revokedAt: routingKeys.revokedAt }).from(routingKeys).where(eq(routingKeys.accountId, acct.id));
    expect(rows.filter((r) => r.revokedAt !== null)).toHaveLength(5);
    for (const k of keys) for (const g of [a, b]) expect((await g.call("/v1/chat/completions", { token: k.raw, body: chatBody() })).status).toBe(401);
  }, 60_000);
});
