// Budget alerts: thresholds in percent of each key's monthly budget, delivered as signed
// `budget.threshold_reached` webhooks and/or mails; each threshold fires once per key and month,
// under 200 concurrent requests spread over three instances (one in the embedded mode, whose
// database belongs to one process).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { addToken, createAccount, REAL_STORES, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { outboxMails } from "../helpers/signup.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "../relay/fixtures.ts";
import { budgetAlertFirings } from "../../src/store/db/schema/index.ts";
import { counterKey, toNano } from "../../src/store/spend-counters.ts";
import { estimateRequest } from "../../src/money/estimate.ts";
import { loadKeyContext } from "../../src/relay/key-context.ts";
import { monthKey } from "../../src/lib/time.ts";
import { independentlyVerified, startReceiver, type Receiver } from "./receiver.ts";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const INSTANCES = REAL_STORES ? 3 : 1;

describe(`budget alerts (${storesLabel}, ${INSTANCES} instance${INSTANCES > 1 ? "s" : ""})`, () => {
  const gws: TestGateway[] = [];
  let A: MockUpstream;
  let rx: Receiver;
  let acct: { id: string; token: string; email: string };
  let credId: string;

  beforeAll(async () => {
    A = await startMockOpenAI();
    rx = startReceiver();
    const env = { PROVIDER_OPENAI_BASE_URL: A.url, BUDGET_ALERT_CHECK_SECONDS: "0.2", WEBHOOK_RETRY_BASE_SECONDS: "0.2" };
    gws.push(await startTestGateway(env));
    for (let i = 1; i < INSTANCES; i++) gws.push(await startTestGateway(env, { shareWith: gws[0] }));
    acct = await createAccount(gws[0]!);
    credId = (await addCredential(gws[0]!, acct.id, "openai")).id;
  }, 60_000);
  afterAll(async () => {
    for (const g of gws.reverse()) await g.stop();
    await A?.stop();
    await rx?.stop();
  }, 60_000);

  test("budget alert settings: GET (null until set), POST validates (1–100 %, a destination, the webhook URL's SSRF check), rk_ cannot write, DELETE turns them off", async () => {
    const gw = gws[0]!;
    expect((await gw.call("/v1/organizations/budget-alerts", { token: acct.token })).body).toEqual({ budget_alerts: null });
    const bad: Array<[unknown, string]> = [
      [{ thresholds_percent: [0], email: "a@example.com" }, "thresholds_percent[0]"],
      [{ thresholds_percent: [101], email: "a@example.com" }, "thresholds_percent[0]"],
      [{ thresholds_percent: [], email: "a@example.com" }, "thresholds_percent"],
      [{ thresholds_percent: [50] }, "webhook_url"],
      [{ thresholds_percent: [50], webhook_url: "ftp://x.example.com/" }, "webhook_url must use http or https"],
      [{ thresholds_percent: [50], email: "not-an-address" }, "email"],
      [{ thresholds_percent: [50], email: "a@example.com", extra: 1 }, "extra"],
    ];
    for (const [body, words] of bad) {
      const r = await gw.call("/v1/organizations/budget-alerts", { token: acct.token, method: "POST", body });
      expect({ status: r.status, code: r.body.code }).toEqual({ status: 400, code: "bad_request" });
      expect(r.body.error).toContain(words);
    }
    const cfg = gw.ctx.config as { ALLOW_PRIVATE_UPSTREAMS: boolean };
    cfg.ALLOW_PRIVATE_UPSTREAMS = false;
    try {
      const r = await gw.call("/v1/organizations/budget-alerts", { token: acct.token, method: "POST", body: { thresholds_percent: [50], webhook_url: rx.url } });
      expect(r.status).toBe(400);
      expect(r.body.error).toContain("loopback");
    } finally {
      cfg.ALLOW_PRIVATE_UPSTREAMS = true;
    }
    const rk = await addToken(gw, acct.id, "read_only");
    expect((await gw.call("/v1/organizations/budget-alerts", { token: rk, method: "POST", body: { thresholds_percent: [50], email: "a@example.com" } })).status).toBe(403);
    const set = await gw.call("/v1/organizations/budget-alerts", { token: acct.token, method: "POST", body: { thresholds_percent: [50], email: "a@example.com" } });
    expect(set.status).toBe(200);
    expect((await gw.call("/v1/organizations/budget-alerts", { token: rk })).body.budget_alerts).toMatchObject({ thresholds_percent: [50], webhook_url: null, email: "a@example.com" });
    expect((await gw.call("/v1/organizations/budget-alerts", { token: acct.token, method: "DELETE" })).body).toEqual({ deleted: true });
    expect((await gw.call("/v1/organizations/budget-alerts", { token: acct.token })).body).toEqual({ budget_alerts: null });
  });

  test("CONTRACT §8 (webhooks, budget alerts): each threshold fires once per key and month — 200 concurrent requests over every instance give one signed webhook and one mail per threshold, and no more afterwards", async () => {
    const gw = gws[0]!;
    const secret = (await gw.call("/v1/organizations/webhook-secret", { token: acct.token })).body.secret as string;
    // 1000 prompt + 100 output tokens of gpt-4o-mini ≈ $0.00021 a request: 100 requests fill the budget.
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credId)], monthlyBudgetUsd: 0.021, label: "nightly evals" });
    const email = `alerts-${acct.id.toLowerCase()}@example.com`;
    const set = await gw.call("/v1/organizations/budget-alerts", { token: acct.token, method: "POST", body: { thresholds_percent: [100, 50, 80, 80], webhook_url: rx.url, email } });
    expect(set.status).toBe(200);
    expect(set.body.budget_alerts).toMatchObject({ thresholds_percent: [50, 80, 100], webhook_url: rx.url, email });

    const body = chatBody({ max_tokens: 100, mock: { prompt_tokens: 1000, completion_tokens: 100 } });
    const statuses = await Promise.all(Array.from({ length: 200 }, (_, i) =>
      gws[i % INSTANCES]!.req("/v1/chat/completions", { token: key.raw, body }).then(async (r) => (await r.arrayBuffer(), r.status))));
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(100);
    expect(statuses.every((s) => s === 200 || s === 402)).toBe(true);

    const alerts = () => rx.got.filter((d) => JSON.parse(d.body).data?.routing_key?.id === key.id);
    for (const end = Date.now() + 30_000; alerts().length < 3 && Date.now() < end;) await sleep(100);
    // Past several checks on every instance, and more (refused) requests: still one each.
    await Promise.all(gws.map((g) => g.req("/v1/chat/completions", { token: key.raw, body }).then((r) => r.arrayBuffer())));
    await sleep(2000);
    const got = alerts();
    expect(got).toHaveLength(3);
    const events = got.map((d) => JSON.parse(d.body));
    expect(events.map((e) => e.data.threshold_percent).sort((a: number, b: number) => a - b)).toEqual([50, 80, 100]);
    for (const [i, e] of events.entries()) {
      expect(e).toMatchObject({ object: "event", type: "budget.threshold_reached" });
      expect(e.data).toMatchObject({ routing_key: { id: key.id, label: "nightly evals", key_prefix: key.raw.slice(0, 10) }, month: new Date().toISOString().slice(0, 7), monthly_budget_usd: 0.021 });
      expect(e.data.spend_usd).toBeGreaterThanOrEqual((0.021 * e.data.threshold_percent) / 100 - 1e-9);
      expect(e.data.message).toContain(`${e.data.threshold_percent} %`);
      expect(await independentlyVerified(secret, got[i]!.body, got[i]!.headers.get("gateway-signature"))).toBe(true);
    }
    const mails = () => outboxMails(gw, email);
    for (const end = Date.now() + 10_000; mails().length < 3 && Date.now() < end;) await sleep(100);
    expect(mails()).toHaveLength(3);
    for (const t of [50, 80, 100]) expect(mails().some((m) => m.includes(`has used ${t} %`))).toBe(true);
    expect(await gw.ctx.db.select().from(budgetAlertFirings).where(eq(budgetAlertFirings.routingKeyId, key.id))).toHaveLength(3);
  }, 120_000);

  test("CONTRACT §8 (budget alerts): the 100 % alert fires no later than the key's first 402, also when reservations in flight refuse it below 100 %", async () => {
    const gw = gws[0]!;
    const other = await createAccount(gw);
    const cred = (await addCredential(gw, other.id, "openai")).id;
    const body = chatBody({ max_tokens: 100, mock: { prompt_tokens: 1000, completion_tokens: 100 } });
    const probe = await addRoutingKey(gw, other.id, { lanes: [lane("openai", cred)], monthlyBudgetUsd: 1 });
    const min = estimateRequest(gw.ctx, (await loadKeyContext(gw.ctx, probe.hash))!, body, JSON.stringify(body).length)!.minUsd;
    const budget = min * 20;
    const key = await addRoutingKey(gw, other.id, { lanes: [lane("openai", cred)], monthlyBudgetUsd: budget, label: "held" });
    const set = await gw.call("/v1/organizations/budget-alerts", { token: other.token, method: "POST", body: { thresholds_percent: [50, 100], webhook_url: rx.url } });
    expect(set.status).toBe(200);
    // 97.5 % of the budget spent or held by requests in flight: what is left is less than any
    // request's smallest cost, so the key refuses while its counter never reads 100 %.
    await gw.ctx.kv.set(counterKey(key.id, monthKey()), String(toNano(budget - min / 2)), 3600);
    const r = await gw.req("/v1/chat/completions", { token: key.raw, body });
    expect(r.status).toBe(402);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("budget_exceeded");
    // Queued before the 402 went out: 100 % (refused) and 50 % (reached).
    const fired = await gw.ctx.db.select().from(budgetAlertFirings).where(eq(budgetAlertFirings.routingKeyId, key.id));
    expect(fired.map((f) => f.thresholdPercent).sort((a, b) => a - b)).toEqual([50, 100]);
    const alerts = () => rx.got.filter((d) => JSON.parse(d.body).data?.routing_key?.id === key.id).map((d) => JSON.parse(d.body));
    for (const end = Date.now() + 10_000; alerts().length < 2 && Date.now() < end;) await sleep(50);
    const full = alerts().find((e) => e.data.threshold_percent === 100);
    expect(full).toBeDefined();
    expect(full.data.message).toContain("402 budget_exceeded");
    expect(full.data.spend_usd).toBeLessThan(budget);
    // More refusals send nothing more.
    for (let i = 0; i < 3; i++) expect((await gw.req("/v1/chat/completions", { token: key.raw, body })).status).toBe(402);
    await sleep(1000);
    expect(alerts()).toHaveLength(2);
  }, 60_000);

  test.if(REAL_STORES)("one check per interval for the whole fleet: three instances read a key's spend about once per BUDGET_ALERT_CHECK_SECONDS, not once each", async () => {
    const key = await addRoutingKey(gws[0]!, acct.id, { lanes: [lane("openai", credId)], monthlyBudgetUsd: 5, label: "idle" });
    const set = await gws[0]!.call("/v1/organizations/budget-alerts", { token: acct.token, method: "POST", body: { thresholds_percent: [90], webhook_url: rx.url } });
    expect(set.status).toBe(200);
    const counter = counterKey(key.id, monthKey());
    // Every counter read of the key, on each instance (a spy on the real store client).
    let reads = 0;
    const restore = gws.map((g) => {
      const kv = g.ctx.kv;
      const getNumber = kv.getNumber.bind(kv);
      kv.getNumber = (k: string) => {
        if (k === counter) reads++;
        return getNumber(k);
      };
      return () => Reflect.deleteProperty(kv, "getNumber");
    });
    try {
      const started = Date.now();
      await sleep(3000);
      const intervals = (Date.now() - started) / 200;
      // Every instance ticks every 0.2 s; before, each tick read every key (three reads an interval).
      expect(reads).toBeGreaterThan(intervals * 0.5);
      expect(reads).toBeLessThan(intervals * 1.5);
    } finally {
      for (const r of restore) r();
    }
  }, 30_000);
});
