// GET /v1/organizations/usage (CONTRACT §6): the 30-day summary, read from the daily rollup of usage_records, with rows
// inserted directly the way the inference path records attempts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { addToken, createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";

let gw: TestGateway;
beforeAll(async () => { gw = await startTestGateway(); }, 60_000);
afterAll(async () => { await gw?.stop(); }, 60_000);

const DAY = 86400_000;
const dayOf = (d: Date) => d.toISOString().slice(0, 10);

describe(`usage rollup (${storesLabel})`, () => {
  test("usage answers {window_days: 30, since, until, totals, by_day, by_key, by_provider} over the last 30 days only", async () => {
    const a = await createAccount(gw);
    const other = await createAccount(gw);
    const k1 = (await gw.call("/v1/organizations/routing-keys", { method: "POST", token: a.token, body: { label: "alpha" } })).body.routing_key;
    const k2 = (await gw.call("/v1/organizations/routing-keys", { method: "POST", token: a.token, body: { label: "beta" } })).body.routing_key;
    const now = Date.now();
    const today = new Date(now - 60_000);
    const twoDaysAgo = new Date(now - 2 * DAY);
    const row = (o: Partial<typeof usageRecords.$inferInsert>) => ({ accountId: a.id, endpoint: "chat", status: 200, outcome: "ok", provider: "openai", attempt: 1, ...o });
    await gw.ctx.db.insert(usageRecords).values([
      row({ routingKeyId: k1.id, provider: "openai", promptTokens: 100, completionTokens: 20, costUsd: 0.01, createdAt: today }),
      row({ routingKeyId: k1.id, provider: "anthropic", status: 529, outcome: "error", promptTokens: 0, completionTokens: 0, costUsd: 0, createdAt: today }),
      row({ routingKeyId: k1.id, provider: "anthropic", promptTokens: 50, completionTokens: 10, costUsd: 0.002, createdAt: today }),
      row({ routingKeyId: k2.id, provider: "sub", promptTokens: 300, completionTokens: 30, costUsd: 0.05, seat: true, createdAt: twoDaysAgo }),
      row({ routingKeyId: k2.id, provider: "sub", status: 0, outcome: "broken", promptTokens: 10, completionTokens: 1, costUsd: 0.0001, createdAt: twoDaysAgo }),
      row({ routingKeyId: k2.id, provider: "openai", outcome: "aborted", promptTokens: 5, completionTokens: 0, costUsd: 0, createdAt: twoDaysAgo }),
      // Outside the window, and another account's: neither counts.
      row({ routingKeyId: k1.id, provider: "openai", promptTokens: 9999, completionTokens: 9999, costUsd: 99, createdAt: new Date(now - 31 * DAY) }),
      { ...row({ provider: "openai", promptTokens: 7777, costUsd: 77 }), accountId: other.id },
    ]);

    const r = await gw.call("/v1/organizations/usage", { token: await addToken(gw, a.id, "read_only") });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["by_day", "by_key", "by_provider", "since", "totals", "until", "window_days"]);
    expect(r.body.window_days).toBe(30);
    const since = Date.parse(r.body.since);
    const until = Date.parse(r.body.until);
    // 30 UTC calendar days, today included (the rollup is daily).
    const todayStart = Date.UTC(new Date(until).getUTCFullYear(), new Date(until).getUTCMonth(), new Date(until).getUTCDate());
    expect(since).toBe(todayStart - 29 * DAY);
    expect(Math.abs(until - Date.now())).toBeLessThan(60_000);

    expect(r.body.totals).toEqual({ requests: 6, errors: 2, prompt_tokens: 465, completion_tokens: 61, cost_usd: 0.0621, cache_hits: 0, saved_usd: 0, attempts: 6, fallbacks: 0, budget_refusals: 0, rate_limit_refusals: 0 });

    expect(r.body.by_day).toEqual([
      { date: dayOf(twoDaysAgo), requests: 3, errors: 1, prompt_tokens: 315, completion_tokens: 31, cost_usd: 0.0501, cache_hits: 0, saved_usd: 0 },
      { date: dayOf(today), requests: 3, errors: 1, prompt_tokens: 150, completion_tokens: 30, cost_usd: 0.012, cache_hits: 0, saved_usd: 0 },
    ]);

    const byKey = Object.fromEntries(r.body.by_key.map((k: any) => [k.routing_key_id, k]));
    expect(byKey[k1.id]).toEqual({ routing_key_id: k1.id, label: "alpha", key_prefix: k1.key_prefix, requests: 3, errors: 1, prompt_tokens: 150, completion_tokens: 30, cost_usd: 0.012, cache_hits: 0, saved_usd: 0 });
    expect(byKey[k2.id]).toEqual({ routing_key_id: k2.id, label: "beta", key_prefix: k2.key_prefix, requests: 3, errors: 1, prompt_tokens: 315, completion_tokens: 31, cost_usd: 0.0501, cache_hits: 0, saved_usd: 0 });
    expect(r.body.by_key.map((k: any) => k.routing_key_id)).toEqual([k2.id, k1.id]); // highest cost first

    const byProvider = Object.fromEntries(r.body.by_provider.map((p: any) => [p.provider, p]));
    expect(Object.keys(byProvider).sort()).toEqual(["anthropic", "openai", "sub"]);
    expect(byProvider.sub).toEqual({ provider: "sub", requests: 2, errors: 1, prompt_tokens: 310, completion_tokens: 31, cost_usd: 0.0501, cache_hits: 0, saved_usd: 0 });
    expect(byProvider.anthropic).toEqual({ provider: "anthropic", requests: 2, errors: 1, prompt_tokens: 50, completion_tokens: 10, cost_usd: 0.002, cache_hits: 0, saved_usd: 0 });
    expect(byProvider.openai).toEqual({ provider: "openai", requests: 2, errors: 0, prompt_tokens: 105, completion_tokens: 20, cost_usd: 0.01, cache_hits: 0, saved_usd: 0 });
  });

  test("an account without usage gets zero totals and empty lists", async () => {
    const a = await createAccount(gw);
    const r = await gw.call("/v1/organizations/usage", { token: a.token });
    expect(r.status).toBe(200);
    expect(r.body.totals).toEqual({ requests: 0, errors: 0, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0, cache_hits: 0, saved_usd: 0, attempts: 0, fallbacks: 0, budget_refusals: 0, rate_limit_refusals: 0 });
    expect([r.body.by_day, r.body.by_key, r.body.by_provider]).toEqual([[], [], []]);
  });

  test("usage takes no query parameters (unknown ones are 400 naming them) and only GET (405 method_not_allowed)", async () => {
    const a = await createAccount(gw);
    const q = await gw.call("/v1/organizations/usage?days=90", { token: a.token });
    expect(q.status).toBe(400);
    expect(q.body.error).toContain("`days`");
    const m = await gw.call("/v1/organizations/usage", { method: "POST", token: a.token, body: {} });
    expect(m.status).toBe(405);
    expect(m.body.code).toBe("method_not_allowed");
  });

  test("usage is behind the plan gate: an unpaid account gets 402 payment_required", async () => {
    const a = await createAccount(gw, { plan: "free" });
    const r = await gw.call("/v1/organizations/usage", { token: a.token });
    expect(r.status).toBe(402);
    expect(r.body.code).toBe("payment_required");
  });
});
