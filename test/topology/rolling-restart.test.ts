// The deployment topology as processes on loopback: three gateway processes behind HAProxy
// (health-checking /readyz), Redis with a replica and a Sentinel, Postgres behind PgBouncer in
// transaction mode; each on a private port, stopped by PID. A rolling restart of every instance
// under streaming load loses no request and no usage record.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import postgres from "postgres";
import { randomToken } from "../../src/lib/crypto.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { findBinary, startPrivatePgBouncer, type PrivatePgBouncer } from "../helpers/private-pgbouncer.ts";
import { freePort } from "../helpers/private-postgres.ts";
import { SENTINEL_MASTER, startPrivateSentinelRedis, type PrivateSentinelRedis } from "../helpers/private-sentinel.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "../relay/fixtures.ts";
import { spawnGateway, type ChildGateway } from "../relay/child-gateway.ts";

const missing = ["pgbouncer", "haproxy", "redis-server"].filter((b) => !findBinary(b));
const name = !REAL_STORES
  ? "rolling restart topology: skipped in embedded mode (needs the real Postgres)"
  : missing.length
    ? `rolling restart topology: SKIPPED, missing ${missing.join(", ")} (apt-get install pgbouncer haproxy redis-server; .ci/run installs them)`
    : "deployment topology on loopback: 3 gateways, HAProxy on /readyz, Sentinel with a replica, PgBouncer";

describe.if(REAL_STORES && missing.length === 0)(name, () => {
  let dir: string;
  let dbName: string;
  let direct: string;
  let bouncer: PrivatePgBouncer;
  let sentinel: PrivateSentinelRedis;
  let mock: MockUpstream;
  let setup: TestGateway;
  let haproxy: ReturnType<typeof Bun.spawn>;
  let lbUrl: string;
  const ports: number[] = [];
  const gws: Array<ChildGateway | null> = [null, null, null];
  let env: Record<string, string>;

  const waitReady = async (url: string) => {
    for (let i = 0; i < 300; i++) {
      if ((await fetch(url + "/readyz").then((r) => r.status, () => 0)) === 200) return;
      await Bun.sleep(50);
    }
    throw new Error(`${url} never became ready`);
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "gw-topo-"));
    dbName = `gwt_topo_${randomToken(8).toLowerCase()}`;
    const admin = postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${dbName}`);
    await admin.end();
    const u = new URL(process.env.DATABASE_URL!);
    u.pathname = `/${dbName}`;
    direct = u.toString();
    [bouncer, sentinel, mock] = await Promise.all([startPrivatePgBouncer(direct), startPrivateSentinelRedis(), startMockOpenAI()]);
    env = {
      DATABASE_URL: bouncer.url, DATABASE_DIRECT_URL: direct, REDIS_URL: "",
      REDIS_SENTINELS: sentinel.sentinels, REDIS_SENTINEL_MASTER: SENTINEL_MASTER, REDIS_PASSWORD: sentinel.password,
      GATEWAY_SECRET_KEY: randomBytes(32).toString("hex"), PROVIDER_OPENAI_BASE_URL: mock.url, DATA_DIR: dir,
      ALLOW_PRIVATE_UPSTREAMS: "true", SHUTDOWN_TIMEOUT_SECONDS: "30",
    };
    setup = await startTestGateway(env);
    for (let i = 0; i < 3; i++) ports.push(await freePort());
    await Promise.all(ports.map(async (p, i) => { gws[i] = await spawnGateway({ ...env, PORT: String(p) }); }));
    const lb = await freePort();
    lbUrl = `http://127.0.0.1:${lb}`;
    const cfg = join(dir, "haproxy.cfg");
    writeFileSync(cfg, [
      "defaults", "  mode http", "  timeout connect 1s", "  timeout client 60s", "  timeout server 60s", "  retries 3", "  option redispatch",
      "frontend gw", `  bind 127.0.0.1:${lb}`, "  default_backend gws",
      "backend gws", "  balance roundrobin", "  option httpchk GET /readyz", "  http-check expect status 200",
      "  default-server check inter 200ms fall 1 rise 1",
      ...ports.map((p, i) => `  server g${i} 127.0.0.1:${p}`), "",
    ].join("\n"));
    haproxy = Bun.spawn([findBinary("haproxy")!, "-db", "-f", cfg], { stdout: "ignore", stderr: "ignore" });
    await waitReady(lbUrl);
  }, 90_000);

  afterAll(async () => {
    haproxy?.kill("SIGKILL");
    await haproxy?.exited;
    for (const g of gws) await g?.kill().catch(() => {});
    await setup?.stop();
    await mock?.stop();
    await sentinel?.stop();
    await bouncer?.stop();
    const admin = postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} });
    await admin.unsafe(`drop database if exists ${dbName} with (force)`).catch(() => {});
    await admin.end();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  test("CONTRACT §7: a rolling restart of every instance under streaming load loses no request and no record", async () => {
    const acct = await createAccount(setup);
    const cred = await addCredential(setup, acct.id, "openai");
    const k = await addRoutingKey(setup, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 50 });
    const upstream0 = mock.received.length;
    const failures: string[] = [];
    let answered = 0;
    let stop = false;
    const worker = async (w: number) => {
      for (let i = 0; !stop; i++) {
        const stream = (w + i) % 3 !== 0;
        try {
          const r = await fetch(lbUrl + "/v1/chat/completions", {
            method: "POST", headers: { authorization: `Bearer ${k.raw}`, "content-type": "application/json" },
            body: JSON.stringify(chatBody({ stream, max_tokens: 50, mock: { latency_ms: 150 } })), signal: AbortSignal.timeout(30_000),
          });
          const text = await r.text();
          if (r.status !== 200 || (stream && !text.includes("[DONE]"))) failures.push(`${r.status} ${text.slice(0, 200)}`);
          else answered++;
        } catch (e) {
          failures.push(String(e));
        }
      }
    };
    const load = Promise.all(Array.from({ length: 6 }, (_, w) => worker(w)));
    for (let i = 0; i < 3; i++) {
      await Bun.sleep(500);
      expect(await gws[i]!.terminate()).toBe(0);
      gws[i] = await spawnGateway({ ...env, PORT: String(ports[i]) });
      await waitReady(`http://127.0.0.1:${ports[i]}`);
    }
    await Bun.sleep(500);
    stop = true;
    await load;
    expect(failures).toEqual([]);
    expect(answered).toBeGreaterThan(20);
    const upstream = mock.received.length - upstream0;
    expect(upstream).toBe(answered);
    let rows = 0;
    for (let i = 0; i < 150 && rows < upstream; i++) {
      await Bun.sleep(100);
      await setup.ctx.services.usage.flush();
      rows = (await setup.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, k.id))).length;
    }
    expect(rows).toBe(upstream);
  }, 120_000);
});
