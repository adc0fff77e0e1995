// The usage read endpoints the dashboard is built on, open to scripts too:
// GET /v1/organizations/usage/groups?by=day|key|lane|model[&month=YYYY-MM] and
// GET /v1/organizations/usage/records?limit&key&provider&outcome&before. Rows are inserted
// directly the way the inference path records attempts (CONTRACT §7: one record per attempt).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { addToken, createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { usageRecordsPage } from "../../src/management/usage/records.ts";

let gw: TestGateway;
beforeAll(async () => { gw = await startTestGateway(); }, 60_000);
afterAll(async () => { await gw?.stop(); }, 60_000);

const DAY = 86400_000;

/** An account with two keys and a month of attempts: a fallback, seat traffic, an old record, another account's. */
async function seeded() {
  const a = await createAccount(gw);
  const other = await createAccount(gw);
  const k1 = (await gw.call("/v1/organizations/routing-keys", { method: "POST", token: a.token, body: { label: "alpha" } })).body.routing_key;
  const k2 = (await gw.call("/v1/organizations/routing-keys", { method: "POST", token: a.token, body: { label: "beta" } })).body.routing_key;
  const now = new Date();
  // Request ids are unique per database (one record per request and attempt): each seeding gets its own.
  const tag = crypto.randomUUID().slice(0, 8);
  const R = (id: string) => `${tag}:${id}`;
  const t = (msAgo: number) => new Date(now.getTime() - msAgo);
  // Record keys are `<money call>.<attempt>`, as the relay writes them: a request's attempts share a call.
  const row = (o: Partial<typeof usageRecords.$inferInsert>) => ({ accountId: a.id, endpoint: "chat", status: 200, outcome: "ok", provider: "openai", laneIndex: 0, attempt: 1, recordKey: `${o.requestId}.${o.attempt ?? 1}`, ...o });
  await gw.ctx.db.insert(usageRecords).values([
    // Outside the 30-day window (written first, as the queue would have), and below another account's: neither counts.
    row({ requestId: R("req-old"), routingKeyId: k1.id, promptTokens: 9999, costUsd: 99, createdAt: t(31 * DAY) }),
    // req-1: anthropic fails (529), the request falls back to openai.
    row({ requestId: R("req-1"), attempt: 1, routingKeyId: k1.id, provider: "anthropic", laneIndex: 0, status: 529, outcome: "error", errorCode: "upstream_error", latencyMs: 40, createdAt: t(5000) }),
    row({ requestId: R("req-1"), attempt: 2, routingKeyId: k1.id, provider: "openai", laneIndex: 1, promptTokens: 100, completionTokens: 20, costUsd: 0.01, latencyMs: 300, ttfbMs: 100, createdAt: t(4000) }),
    // req-2: served by anthropic directly.
    row({ requestId: R("req-2"), routingKeyId: k1.id, provider: "anthropic", promptTokens: 50, completionTokens: 10, costUsd: 0.002, ttfbMs: 300, createdAt: t(3000) }),
    // req-3: a failure with no later lane is an error, not a fallback.
    row({ requestId: R("req-3"), routingKeyId: k2.id, provider: "openai", status: 500, outcome: "error", createdAt: t(2000) }),
    // req-4: seat traffic on the sub lane.
    row({ requestId: R("req-4"), routingKeyId: k2.id, provider: "sub", model: "gpt-5", promptTokens: 300, completionTokens: 30, costUsd: 0.05, seat: true, ttfbMs: 200, createdAt: t(1000) }),
    { ...row({ requestId: R("req-x"), promptTokens: 7777, costUsd: 77 }), accountId: other.id },
  ]);
  return { a, k1, k2, R };
}

describe(`usage read endpoints (${storesLabel})`, () => {
  test("usage/groups?by=lane: client requests (in the lane of their last attempt), attempts, errors, fallbacks (in the lane that failed), seat share and TTFB p50/p95 per lane, adding up to GET /v1/organizations/usage", async () => {
    const { a } = await seeded();
    const rk = await addToken(gw, a.id, "read_only");
    const r = await gw.call("/v1/organizations/usage/groups?by=lane", { token: rk });
    expect(r.status).toBe(200);
    expect(r.body.by).toBe("lane");
    const lanes = Object.fromEntries(r.body.groups.map((g: any) => [g.provider, g]));
    // req-1 failed on anthropic and was served by openai: one request (openai's), one fallback (anthropic's).
    expect(lanes.anthropic).toMatchObject({ requests: 1, attempts: 2, errors: 0, failed_attempts: 1, fallbacks: 1, seat_requests: 0, cost_usd: 0.002 });
    expect(lanes.openai).toMatchObject({ requests: 2, attempts: 2, errors: 1, failed_attempts: 1, fallbacks: 0, prompt_tokens: 100, cost_usd: 0.01 });
    expect(lanes.sub).toMatchObject({ requests: 1, errors: 0, fallbacks: 0, seat_requests: 1, seat_cost_usd: 0.05 });
    // TTFB percentiles come from a histogram: within the bucket of the exact value (300–400 ms, 100–150 ms).
    expect(lanes.anthropic.ttfb_p50_ms).toBeGreaterThanOrEqual(300);
    expect(lanes.anthropic.ttfb_p95_ms).toBeLessThan(400);
    expect(lanes.openai.ttfb_p50_ms).toBeGreaterThanOrEqual(100);
    expect(lanes.openai.ttfb_p50_ms).toBeLessThan(150);
    const rollup = (await gw.call("/v1/organizations/usage", { token: rk })).body;
    expect(r.body.since).toBe(rollup.since); // the rollup's window
    for (const p of rollup.by_provider) {
      expect({ requests: lanes[p.provider].requests, errors: lanes[p.provider].errors, cost_usd: lanes[p.provider].cost_usd })
        .toEqual({ requests: p.requests, errors: p.errors, cost_usd: p.cost_usd });
    }
  });

  test("usage/groups?by=key|model|day: per routing key (with label), per provider+model, per UTC day of a month", async () => {
    const { a, k1, k2 } = await seeded();
    const keys = (await gw.call("/v1/organizations/usage/groups?by=key", { token: a.token })).body.groups;
    expect(keys.map((g: any) => [g.routing_key_id, g.label, g.requests, g.fallbacks, g.cost_usd])).toEqual([
      [k2.id, "beta", 2, 0, 0.05],
      [k1.id, "alpha", 2, 1, 0.012],
    ]);
    const models = (await gw.call("/v1/organizations/usage/groups?by=model", { token: a.token })).body.groups;
    expect(models.find((g: any) => g.provider === "sub")).toMatchObject({ model: "gpt-5", requests: 1 });
    const month = new Date().toISOString().slice(0, 7);
    const days = (await gw.call(`/v1/organizations/usage/groups?by=day&month=${month}`, { token: a.token })).body;
    expect(days.month).toBe(month);
    expect(days.since).toBe(`${month}-01T00:00:00.000Z`);
    const total = days.groups.reduce((s: number, g: any) => s + g.requests, 0);
    // The records 1-5 s old are in this month unless the month began within the last 5 seconds.
    expect(total).toBeGreaterThanOrEqual(days.groups.length ? 1 : 0);
    expect(days.groups.every((g: any) => g.date.startsWith(month))).toBe(true);
    const past = (await gw.call("/v1/organizations/usage/groups?by=day&month=2001-01", { token: a.token })).body;
    expect(past).toMatchObject({ since: "2001-01-01T00:00:00.000Z", until: "2001-02-01T00:00:00.000Z", groups: [] });
  });

  test("usage/records: newest first, each attempt with lanes tried, tokens, cost, latency and TTFB; filters by key, lane and outcome; pages with before", async () => {
    const { a, k1 } = await seeded();
    const rid = (r: any) => r.request_id.split(":")[1];
    const all = (await gw.call("/v1/organizations/usage/records", { token: a.token })).body;
    expect(all.records.map(rid)).toEqual(["req-4", "req-3", "req-2", "req-1", "req-1", "req-old"]);
    const served = all.records[3];
    expect(rid(served)).toBe("req-1");
    expect(served).toMatchObject({ provider: "openai", lanes_tried: ["anthropic", "openai"], prompt_tokens: 100, completion_tokens: 20, cost_usd: 0.01, latency_ms: 300, ttfb_ms: 100, outcome: "ok", seat: false });
    expect(all.records[4].lanes_tried).toEqual(["anthropic"]);
    expect(all.next_before).toBeNull();

    const byKey = (await gw.call(`/v1/organizations/usage/records?key=${k1.id}&provider=anthropic&outcome=error`, { token: a.token })).body.records;
    expect(byKey.map((r: any) => [rid(r), r.status, r.error_code])).toEqual([["req-1", 529, "upstream_error"]]);

    const p1 = (await gw.call("/v1/organizations/usage/records?limit=2", { token: a.token })).body;
    expect(p1.records.map(rid)).toEqual(["req-4", "req-3"]);
    const p2 = (await gw.call(`/v1/organizations/usage/records?limit=2&before=${p1.next_before}`, { token: a.token })).body;
    expect(p2.records.map(rid)).toEqual(["req-2", "req-1"]);
  });

  test("a records page is one statement: the page and its lanes together, no fence transaction unless a provider or outcome filter can make the walk unbounded", async () => {
    const { a, k1 } = await seeded();
    const statements = async (q: Parameters<typeof usageRecordsPage>[2]) => {
      const q0 = gw.ctx.dbh.queries();
      const page = await usageRecordsPage(gw.ctx.db, a.id, q);
      return [gw.ctx.dbh.queries() - q0, page.records.length];
    };
    expect(await statements({})).toEqual([1, 6]);
    expect(await statements({ key: k1.id, limit: 2 })).toEqual([1, 2]);
    // Fenced: SET LOCAL statement_timeout, then the same one statement.
    expect(await statements({ outcome: "error" })).toEqual([2, 2]);
  });

  test("CONTRACT §8 order of checks on the usage read endpoints: 405 → 401 → 402 → 400 with a sentence naming the parameter", async () => {
    const paid = await createAccount(gw);
    const unpaid = await createAccount(gw, { plan: "free" });
    for (const path of ["/v1/organizations/usage/groups?by=day", "/v1/organizations/usage/records"]) {
      const m = await gw.call(path, { method: "POST", token: paid.token, body: {} });
      expect([m.status, m.body.code]).toEqual([405, "method_not_allowed"]);
      const none = await gw.call(path, {});
      expect(none.status).toBe(401);
      expect(none.body.code).toBeUndefined();
      expect((await gw.call(path, { token: "sk_unknown" })).body.code).toBe("invalid_account_token");
      // Unpaid comes before validation: even a bad query gets 402.
      const gate = await gw.call(`${path}&bogus=1`.replace("records&", "records?"), { token: unpaid.token });
      expect([gate.status, gate.body.code]).toEqual([402, "payment_required"]);
    }
    const bad: Array<[string, string]> = [
      ["/v1/organizations/usage/groups", "`by` must be one of"],
      ["/v1/organizations/usage/groups?by=week", "`by` must be one of"],
      ["/v1/organizations/usage/groups?by=day&month=2026-13", "`month` must be a calendar month"],
      ["/v1/organizations/usage/groups?by=day&days=7", "`days`"],
      ["/v1/organizations/usage/records?limit=0", "`limit` must be a whole number from 1 to 200."],
      ["/v1/organizations/usage/records?limit=201", "`limit` must be a whole number from 1 to 200."],
      ["/v1/organizations/usage/records?outcome=fine", "`outcome` must be one of"],
      ["/v1/organizations/usage/records?provider=acme", "`provider` must be one of"],
      ["/v1/organizations/usage/records?before=-1", "`before` must be a whole number"],
      ["/v1/organizations/usage/records?limit=1&limit=2", "more than once"],
    ];
    for (const [path, sentence] of bad) {
      const r = await gw.call(path, { token: paid.token });
      expect([path, r.status, r.body.code]).toEqual([path, 400, "bad_request"]);
      expect(r.body.error).toContain(sentence);
    }
  });

  test("another account's key id filters to nothing: records are always the caller's", async () => {
    const { k1 } = await seeded();
    const stranger = await createAccount(gw);
    const r = await gw.call(`/v1/organizations/usage/records?key=${k1.id}`, { token: stranger.token });
    expect([r.status, r.body.records]).toEqual([200, []]);
  });
});
