// CONTRACT §7 budget and durability, the month counter rebuilt across instances: after Redis
// restarts empty, the counter a key's budget is checked against is rebuilt from Postgres by
// whichever instance needs it first. A settlement in flight on ANOTHER instance, whose usage record
// already reached Postgres but whose cost has not been added to the counter yet, must not be
// counted by that rebuild AND added by the settlement: the counter stays equal to the sum of the
// key's records, exactly. Instance A is this process's gateway (its settlement script held on the
// wire, as a slow link would, across the restart); instance B is a child gateway process over the
// same Redis and Postgres, which rebuilds the counter when it admits the next request.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { inArray } from "drizzle-orm";
import Redis from "ioredis";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { keyContextOf, usageRows } from "../helpers/relay-world.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addingKey, counterKey, fromNano, reserve, toNano } from "../../src/money/counters.ts";
import type { Ledger } from "../../src/money/ledger/index.ts";
import { monthKey } from "../../src/lib/time.ts";
import type { Cmds } from "../../src/store/kv/redis.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { spawnGateway, type ChildGateway } from "./child-gateway.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "./fixtures.ts";
import { until as waitUntil } from "../helpers/until.ts";

const name = REAL_STORES
  ? "counter rebuilt by another instance (child gateway, own redis-server)"
  : "counter rebuilt by another instance: skipped in embedded mode (needs real Redis and two processes; embedded mode is one process)";

const until = <T>(what: string, fn: () => Promise<T | null>, ms = 20_000) => waitUntil(what, fn, ms, 50);

describe.if(REAL_STORES)(name, () => {
  let redis: PrivateRedis;
  let up: MockUpstream;
  let gw: TestGateway;
  let child: ChildGateway | null = null;
  let peek: Redis;

  beforeAll(async () => {
    redis = await startPrivateRedis();
    up = await startMockOpenAI();
    gw = await startTestGateway({ REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: up.url });
    peek = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    peek.on("error", () => {});
  }, 30_000);
  afterAll(async () => {
    peek?.disconnect();
    await child?.kill().catch(() => {});
    await gw?.stop();
    await up?.stop();
    await redis?.stop();
  }, 60_000);

  const post = (url: string, raw: string) =>
    fetch(url + "/v1/chat/completions", { method: "POST", headers: { authorization: `Bearer ${raw}`, "content-type": "application/json" }, body: JSON.stringify(chatBody({ max_tokens: 50 })) }).catch(() => null);
  const recordsOf = async (keyId: string) => {
    return usageRows(gw, inArray(usageRecords.routingKeyId, [keyId]));
  };

  test("CONTRACT §7 budget: a counter rebuilt by another instance leaves out this instance's settlements in flight (their records already in Postgres), so counter = Σ records exactly", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    // B admits each request on its own (no budget lease): what it holds is only what is in flight.
    child = await spawnGateway({
      DATABASE_URL: gw.env.DATABASE_URL!, REDIS_URL: redis.url, GATEWAY_SECRET_KEY: gw.env.GATEWAY_SECRET_KEY!,
      DATA_DIR: gw.env.DATA_DIR!, PROVIDER_OPENAI_BASE_URL: up.url, BUDGET_LEASES: "false",
    });
    const B = child;
    expect((await post(B.url, k.raw))!.status).toBe(200); // warm: B knows the key, the counter exists
    await until("B's first record in Postgres", async () => ((await recordsOf(k.id)).length === 1 ? true : null));

    // On A: a money call admitted, its attempt recorded (through the usage stream into Postgres),
    // and its settlement sent, but held on the wire.
    const key = await keyContextOf(gw, k.raw);
    const ledger = gw.ctx.services.ledger as Ledger;
    const client = (gw.ctx.kv as unknown as { client: Cmds }).client;
    const month = monthKey();
    const uid = `${gw.ctx.instanceId}.race`;
    const facts = ledger.facts(key, "chat", "gpt-4o-mini", month);
    const res = await reserve(gw.ctx, key, 1, 1, ledger.admission(key.id, uid, facts));
    expect(res).not.toBeNull();
    ledger.admitted(key, uid, month, facts, res!.nano);
    const cost = 0.3125;
    ledger.record({
      requestId: "req-race", attempt: 1, recordKey: `${uid}.1`, accountId: acct.id, routingKeyId: k.id, endpoint: "chat",
      laneIndex: 0, provider: "openai", model: "gpt-4o-mini", status: 200, outcome: "ok", errorCode: null,
      promptTokens: 10, completionTokens: 10, cachedTokens: 0, cacheWriteTokens: 0, costUsd: cost, priceEstimated: false,
      latencyMs: 5, ttfbMs: 5, seat: false, createdAt: new Date().toISOString(),
    });
    await until("A's record in Postgres", async () => ((await recordsOf(k.id)).some((r) => r.recordKey === `${uid}.1`) ? true : null));
    // The ledger's writes go through a view of the client whose settlement script waits for
    // `release` before it is sent (every other command passes straight through).
    const writes = (ledger as unknown as { writes: { r: Cmds } }).writes;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let sent = 0;
    writes.r = new Proxy(client, {
      get(target, prop) {
        if (prop === "gwLedger") {
          return async (...args: Parameters<Cmds["gwLedger"]>) => {
            sent++;
            await held;
            return await target.gwLedger(...args);
          };
        }
        const v = Reflect.get(target, prop, target);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    try {
      ledger.settle(key, uid, month, res!.nano, toNano(cost));
    await until("A's settlement on the wire", async () => (sent > 0 ? true : null));

      // Redis loses everything: counter, in-flight ledger, settled markers.
    await redis.restart();

      // B rebuilds the counter from Postgres when it admits its next budgeted request: A's record
      // is there, A's settlement has not been applied.
      let status = 0;
      for (let i = 0; i < 60 && status !== 200; i++) {
        status = (await post(B.url, k.raw))?.status ?? 0;
        if (status !== 200) await Bun.sleep(200);
      }
    expect(status).toBe(200);
      expect(await peek.exists(counterKey(k.id, month))).toBe(1);
    } finally {
      // A's settlement goes through now, on top of the counter B rebuilt.
      release();
    }
    await until("A's settlement applied", async () => ((await peek.scard(addingKey(k.id, month))) === 0 && !ledger.gate ? true : null));
    const rows = await until("B's second record", async () => {
      const r = await recordsOf(k.id);
      return r.length === 3 ? r : null;
    });
    writes.r = client;
    await Bun.sleep(300); // B's settlement goes out with the turn that wrote its record
    const spent = rows.reduce((a, r) => a + r.costUsd, 0);
    const counter = fromNano(Number(await peek.get(counterKey(k.id, month))));
    // Counted once: the rebuild left A's call out and A's settlement added it (not counter = spent + cost).
    expect(counter).toBeCloseTo(spent, 9);
    expect(await peek.scard(addingKey(k.id, month))).toBe(0);
  }, 60_000);
});
