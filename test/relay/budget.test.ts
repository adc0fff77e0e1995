// Budgets (CONTRACT §7): reserve an estimate before forwarding, settle the real cost after,
// 402 budget_exceeded once spend reaches the budget; max_tokens makes the estimate a worst case;
// under concurrency (one process or two sharing Redis) the overshoot is bounded by what was in
// flight; seat traffic is left out while budget_excludes_seats.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { eq, inArray } from "drizzle-orm";
import { REAL_STORES, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { addKeyWithContext, type RelayWorld, startRelayWorld, usageRows } from "../helpers/relay-world.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { estimateCostUsd } from "../../src/relay/pipeline.ts";
import { costUsd } from "../../src/money/pricing.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { connectSub, createKey, startSubWorld, type SubWorld } from "../lanes/helpers.ts";
import { post, spawnSibling } from "./child-gateway.ts";
import { addRoutingKey, chatBody, lane, bytesOf } from "./fixtures.ts";

describe(`budgets (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream;
  let acct: { id: string; token: string };
  let cred: { id: string };

  let w: RelayWorld<"openai">;
  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["openai"] });
    ({ gw, acct, up: { openai: A }, cred: { openai: cred } } = w);
  }, 60_000);
  afterEach(() => A.setDefault({}), 60_000);
  afterAll(() => w?.stop(), 60_000);

  async function keyWithBudget(usd: number) {
    return addKeyWithContext(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: usd });
  }

  async function spendOf(requestIds: string[]): Promise<number> {
    const rows = await usageRows(gw, inArray(usageRecords.requestId, requestIds));
    return rows.reduce((s, r) => s + r.costUsd, 0);
  }

  test("a key without a budget costs no KV round trip on admission, and its month's spend is still counted", async () => {
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    const kv = gw.ctx.kv;
    const original = kv.reserve.bind(kv);
    let reserves = 0;
    kv.reserve = (...args: Parameters<typeof kv.reserve>) => { reserves++; return original(...args); };
    try {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await gw.req("/v1/chat/completions", { token: k.raw, body: chatBody({ mock: { prompt_tokens: 1000, completion_tokens: 100 } }) });
        expect(r.status).toBe(200);
        ids.push(r.headers.get("x-request-id")!);
        await r.text();
      }
      expect(reserves).toBe(0);
      const spent = await spendOf(ids);
      expect(spent).toBeGreaterThan(0);
      // Settlements go out in the next event-loop turns; on a loaded machine give them a moment.
      let info = await gw.call("/v1/key", { token: k.raw });
      for (let i = 0; i < 40 && Math.abs(info.body.budget.current_month_spend_usd - spent) > 1e-9; i++) {
        await Bun.sleep(50);
        info = await gw.call("/v1/key", { token: k.raw });
      }
      expect(info.body.budget.monthly_budget_usd).toBeNull();
      expect(info.body.budget.current_month_spend_usd).toBeCloseTo(spent, 9);
    } finally {
      kv.reserve = original;
    }
  });

  test("402 budget_exceeded on a budget smaller than one request's smallest cost says it does not fit, with the numbers, not 'used up'", async () => {
    const k = await keyWithBudget(0.000001);
    const r = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody() });
    expect(r.status).toBe(402);
    expect(r.body.error.code).toBe("budget_exceeded");
    const m: string = r.body.error.message;
    expect(m).not.toContain("used up");
    expect(m).toContain("does not fit");
    expect(m).toContain("budget of $0.000001 for");
    expect(m).toContain("$0.000001 left ($0 spent");
    expect(m).toMatch(/smallest possible cost, \$0\.\d*[1-9]\d* \(/);
    expect(m).toContain(`PATCH /v1/organizations/routing-keys?id=${k.id}`);
  });

  test("402 budget_exceeded once spend reaches the budget, and /v1/key shows it exhausted", async () => {
    const k = await keyWithBudget(0.002);
    // Each answer costs more than the whole budget: the first is admitted (its estimate fits), the rest are refused.
    const body = chatBody({ mock: { prompt_tokens: 20_000, completion_tokens: 2_000 } });
    expect((await gw.call("/v1/chat/completions", { token: k.raw, body })).status).toBe(200);
    await Bun.sleep(50);
    const r = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody() });
    expect(r.status).toBe(402);
    expect(r.body.error.code).toBe("budget_exceeded");
    expect(r.body.error.message).toContain("monthly_budget_usd");
    expect(r.body.error.message).toContain("budget of $0.002 for");
    expect(r.body.error.message).toContain("is used up");
    const info = await gw.call("/v1/key", { token: k.raw });
    expect(info.status).toBe(200);
    expect(info.body.budget.exhausted).toBe(true);
    expect(info.body.budget.remaining_usd).toBe(0);
    expect(info.body.budget.current_month_spend_usd).toBeGreaterThanOrEqual(0.002);
  });

  test("max_tokens: the estimate is the worst case, so spend never passes the budget", async () => {
    const body = chatBody({ max_tokens: 300 });
    const probe = await keyWithBudget(1);
    const worst = estimateCostUsd(gw.ctx, probe.ctx, body, bytesOf(body))!;
    // The worst case exactly: every prompt byte a token, max_tokens of output.
    expect(worst).toBeCloseTo(costUsd("openai", "gpt-4o-mini", { prompt_tokens: bytesOf(body), completion_tokens: 300, cached_tokens: 0, cache_write_tokens: 0 }), 12);
    const k = await keyWithBudget(worst * 3.5);
    const mock = { prompt_tokens: bytesOf(body), completion_tokens: 300 };
    const ids: string[] = [];
    let admitted = 0;
    for (let i = 0; i < 6; i++) {
      const r = await gw.call("/v1/chat/completions", { token: k.raw, body: { ...body, mock } });
      if (r.status === 200) admitted++;
      else expect(r.body.error.code).toBe("budget_exceeded");
      ids.push(r.headers.get("x-request-id")!);
      await Bun.sleep(20);
    }
    expect(admitted).toBe(3);
    expect(await spendOf(ids)).toBeLessThanOrEqual(worst * 3.5);
  });

  test("reservations are released on error, disconnect and fallback; an abandoned request keeps only its prompt's cost", async () => {
    const body = chatBody({ max_tokens: 200 });
    const probe = await keyWithBudget(1);
    const est = estimateCostUsd(gw.ctx, probe.ctx, body, bytesOf(body))!;
    const k = await keyWithBudget(est * 1.5); // room for exactly one request in flight
    const spend = async () => (await gw.call("/v1/key", { token: k.raw })).body.budget.current_month_spend_usd as number;
    A.setDefault({ status: 500 });
    expect((await gw.call("/v1/chat/completions", { token: k.raw, body })).status).toBe(502);
    await Bun.sleep(30);
    expect(await spend()).toBe(0);
    A.setDefault({ hang: true });
    const ac = new AbortController();
    const p = fetch(gw.url + "/v1/chat/completions", { method: "POST", headers: { authorization: `Bearer ${k.raw}` }, body: JSON.stringify(body), signal: ac.signal }).catch(() => null);
    await Bun.sleep(100);
    expect(await spend()).toBeGreaterThan(0); // reserved while in flight
    ac.abort();
    await p;
    await Bun.sleep(100);
    // CONTRACT §7: the reservation is released; the body had gone upstream, so the abandoned
    // request costs its prompt (estimated: no usage arrived), far below its worst case.
    const abandoned = await spend();
    expect(abandoned).toBeGreaterThan(0);
    expect(abandoned).toBeLessThan(est / 2);
    A.setDefault({});
    expect((await gw.call("/v1/chat/completions", { token: k.raw, body: { ...body, mock: { prompt_tokens: 10, completion_tokens: 10 } } })).status).toBe(200);
  });

  test("CONTRACT §7: 200 concurrent requests, with and without max_tokens, never pass the budget", async () => {
    A.setDefault({ latency_ms: 150 });
    // With max_tokens: the worst case is reserved, so spend stays within the budget itself.
    const capped = chatBody({ max_tokens: 100, mock: { completion_tokens: 100 } });
    const probe = await keyWithBudget(1);
    const est = estimateCostUsd(gw.ctx, probe.ctx, capped, bytesOf(capped))!;
    const k1 = await keyWithBudget(est * 10.5);
    const res1 = await Promise.all(Array.from({ length: 200 }, () => post(gw.url, k1.raw, capped)));
    const ok1 = res1.filter((r) => r.status === 200).length;
    expect(res1.every((r) => r.status === 200 || r.status === 402)).toBe(true);
    expect(ok1).toBeGreaterThanOrEqual(10);
    expect(await spendOf(res1.map((r) => r.headers.get("x-request-id")!))).toBeLessThanOrEqual(est * 10.5);

    // CONTRACT §7: without a cap the model's maximum output (catalog) is the worst case, and the last
    // admitted request gets a lowered output limit: spend stays within the budget itself.
    const uncapped = chatBody({ mock: { completion_tokens: 16_384 } }); // the most gpt-4o-mini can answer
    const est2 = estimateCostUsd(gw.ctx, probe.ctx, uncapped, bytesOf(uncapped))!;
    const k2 = await keyWithBudget(est2 * 10.5);
    const res2 = await Promise.all(Array.from({ length: 200 }, () => post(gw.url, k2.raw, uncapped)));
    const ok2 = res2.filter((r) => r.status === 200).length;
    expect(ok2).toBeGreaterThanOrEqual(10);
    expect(ok2).toBeLessThanOrEqual(11);
    const spend2 = await spendOf(res2.map((r) => r.headers.get("x-request-id")!));
    expect(spend2).toBeLessThanOrEqual(est2 * 10.5);
  }, 30_000);

  test.if(REAL_STORES)("200 concurrent requests split across two gateway processes sharing Redis and Postgres stay within the budget", async () => {
    A.setDefault({ latency_ms: 150 });
    const body = chatBody({ max_tokens: 100, mock: { completion_tokens: 100 } });
    const probe = await keyWithBudget(1);
    const est = estimateCostUsd(gw.ctx, probe.ctx, body, bytesOf(body))!;
    const k = await keyWithBudget(est * 10.5);
    const child = await spawnSibling(gw, { PROVIDER_OPENAI_BASE_URL: A.url });
    let res: Response[];
    try {
      // Both instances resolve (and cache) the key first, so neither starts the race cold.
      for (const url of [gw.url, child.url]) expect((await fetch(url + "/v1/key", { headers: { authorization: `Bearer ${k.raw}` } })).status).toBe(200);
      res = await Promise.all(Array.from({ length: 200 }, (_, i) => post(i % 2 ? child.url : gw.url, k.raw, body)));
    } finally {
      expect(await child.terminate()).toBe(0); // drains the child's usage records
    }
    const ok = res.filter((r) => r.status === 200);
    expect(res.every((r) => r.status === 200 || r.status === 402)).toBe(true);
    expect(ok.length).toBeGreaterThanOrEqual(10);
    // Each process got 100 requests and alone would admit at least 10 (20 answers cost more than
    // the budget): spend within the budget means the two shared one counter.
    expect(res.filter((_, i) => i % 2 === 1).every((r) => r.status === 200 || r.status === 402)).toBe(true);
    expect(await spendOf(res.map((r) => r.headers.get("x-request-id")!))).toBeLessThanOrEqual(est * 10.5);
  }, 60_000);

  describe("seat traffic", () => {
    let w: SubWorld;
    beforeAll(async () => { w = await startSubWorld(); }, 60_000);
    afterAll(async () => { await w?.stop(); }, 60_000);

    test("seat traffic is left out of the budget while budget_excludes_seats, and counts when it is false", async () => {
      const { sessionId } = await connectSub(w);
      const lanes = [{ provider: "sub", sub_session_id: sessionId }];
      const excluded = await createKey(w.gw, w.account.token, { providers: lanes, monthly_budget_usd: 0.0000001 });
      for (let i = 0; i < 3; i++) {
        const r = await w.gw.call("/v1/chat/completions", { token: excluded.rawKey, body: chatBody({ model: "flagship" }) });
        expect(r.status).toBe(200);
      }
      // Counted, the same request's worst case does not fit such a budget: refused before any upstream call.
      const counted = await createKey(w.gw, w.account.token, { providers: lanes, monthly_budget_usd: 0.0000001, budget_excludes_seats: false });
      const r = await w.gw.call("/v1/chat/completions", { token: counted.rawKey, body: chatBody({ model: "flagship" }) });
      expect(r.status).toBe(402);
      expect(r.body.error.code).toBe("budget_exceeded");
      const rows = await usageRows(w.gw, eq(usageRecords.routingKeyId, excluded.key.id));
      expect(rows.length).toBe(3);
      expect(rows.every((x) => x.seat && x.costUsd > 0)).toBe(true);
    });
  });
});
