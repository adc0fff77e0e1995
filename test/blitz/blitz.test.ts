// POST /blitz end to end over real HTTP: concurrency, order, per-prompt failures, the batch budget,
// usage records, limits, auth and cancellation. Lanes: openai → mock A, groq → mock B.
import { afterEach, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { storesLabel } from "../helpers/gateway.ts";
import { useBlitzWorld } from "../helpers/relay-world.ts";
import { addRoutingKey, lane, revokeKey } from "../relay/fixtures.ts";
import { Semaphore } from "../../src/blitz/pool.ts";
import { parseBlitzBody } from "../../src/blitz/validate.ts";
import { estimateCostUsd } from "../../src/relay/pipeline.ts";
import { loadKeyContext } from "../../src/relay/key-context.ts";
import { monthSpendUsd } from "../../src/money/counters.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";

const LATENCY_MS = 300;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const user = (content: string) => ({ messages: [{ role: "user", content }] });

describe(`POST /blitz (${storesLabel})`, () => {
  const w = useBlitzWorld();
  afterEach(() => {
    w.A.setDefault({});
    w.B.setDefault({});
  }, 60_000);

  const recordsOf = (keyId: string) => w.records(eq(usageRecords.routingKeyId, keyId));

  test("concurrency: 50 prompts against a 300 ms upstream finish in about one upstream latency, results in prompt order", async () => {
    const key = await w.oneLane();
    // Warm the key cache and the connection pool so the timing measures the batch alone.
    expect((await w.gw.call("/blitz", { token: key.raw, body: { model: "gpt-4o-mini", prompts: ["warm"] } })).status).toBe(200);
    const a0 = w.A.received.length;
    const prompts = Array.from({ length: 50 }, (_, i) => ({ ...user(`prompt ${i}`), mock: { latency_ms: LATENCY_MS, content: `answer ${i}` } }));
    const t0 = performance.now();
    const r = await w.gw.call("/blitz", { token: key.raw, body: { model: "gpt-4o-mini", temperature: 0.3, prompts } });
    const elapsed = performance.now() - t0;
    expect(r.status).toBe(200);
    expect(r.body.object).toBe("blitz.result");
    expect(w.A.received.length - a0).toBe(50);
    // Sequential would be 50 × 300 ms = 15 s; concurrent is about 300 ms. The bound is generous.
    expect(elapsed).toBeLessThan(5 * LATENCY_MS);
    expect(r.body.results).toHaveLength(50);
    r.body.results.forEach((res: any, i: number) => {
      expect(res.index).toBe(i);
      expect(res.status).toBe(200);
      expect(res.completion.object).toBe("chat.completion");
      expect(res.completion.choices[0].message.content).toBe(`answer ${i}`);
    });
  });

  test("shared chat parameters reach every prompt; the batch usage is the sum of the prompts' usage", async () => {
    const key = await w.oneLane();
    const a0 = w.A.received.length;
    const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: {} } } }];
    const r = await w.gw.call("/blitz", {
      token: key.raw,
      body: { model: "gpt-4o-mini", temperature: 0.3, max_tokens: 20, tools, prompts: ["a", user("b"), { ...user("c"), max_tokens: 5 }] },
    });
    expect(r.status).toBe(200);
    const got = w.A.received.slice(a0).map((x) => x.body);
    expect(got).toHaveLength(3);
    for (const b of got) {
      expect(b.model).toBe("gpt-4o-mini");
      expect(b.temperature).toBe(0.3);
      expect(b.tools).toEqual(tools);
      expect(b.stream).not.toBe(true);
      expect(b.prompts).toBeUndefined();
    }
    expect(got.map((b) => b.max_tokens).sort()).toEqual([20, 20, 5].sort());
    const sum = { prompt_tokens: 0, completion_tokens: 0 };
    for (const res of r.body.results) {
      sum.prompt_tokens += res.completion.usage.prompt_tokens;
      sum.completion_tokens += res.completion.usage.completion_tokens;
    }
    expect(sum.prompt_tokens).toBeGreaterThan(0);
    expect(r.body.usage).toEqual({ ...sum, total_tokens: sum.prompt_tokens + sum.completion_tokens });
  });

  test("per-prompt failure: a prompt failing on every lane is its own error entry; the others succeed", async () => {
    const key = await w.twoLanes();
    const prompts = Array.from({ length: 6 }, (_, i) => ({ ...user(`p${i}`), mock: i === 3 ? { status: 503 } : { content: `ok ${i}` } }));
    const r = await w.gw.call("/blitz", { token: key.raw, body: { model: "gpt-4o-mini", prompts } });
    expect(r.status).toBe(200);
    expect(r.body.results).toHaveLength(6);
    const failed = r.body.results[3];
    expect(failed).toEqual({ index: 3, status: 502, error: { message: expect.stringContaining("Every provider lane failed (2 tried)"), code: "upstream_error" } });
    expect(failed.completion).toBeUndefined();
    for (const i of [0, 1, 2, 4, 5]) expect(r.body.results[i].completion.choices[0].message.content).toBe(`ok ${i}`);
    // One usage record per attempt, endpoint blitz: the failed prompt tried both lanes.
    const rows = await recordsOf(key.id);
    expect(rows).toHaveLength(7);
    expect(rows.every((row) => row.endpoint === "blitz")).toBe(true);
    const rid = r.headers.get("x-request-id")!;
    const p3 = rows.filter((row) => row.requestId === `${rid}.3`);
    expect(p3.map((row) => row.provider).sort()).toEqual(["groq", "openai"]);
    expect(p3.every((row) => row.outcome === "error" && row.status === 503)).toBe(true);
  });

  test("budget: a batch the budget cannot cover is 402 budget_exceeded (flat) and nothing reaches the upstream", async () => {
    // One prompt's worst case (~1000 output tokens of gpt-4o-mini ≈ $0.0006) fits; fifty do not.
    const key = await w.oneLane({ monthlyBudgetUsd: 0.005 });
    const a0 = w.A.received.length;
    const prompts = Array.from({ length: 50 }, (_, i) => `prompt ${i}`);
    const r = await w.gw.call("/blitz", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 1000, prompts } });
    expect(r.status).toBe(402);
    expect(r.body.code).toBe("budget_exceeded");
    expect(typeof r.body.error).toBe("string");
    expect(w.A.received.length).toBe(a0);
    // All or nothing: no part of the refused batch stays reserved.
    const info = await w.gw.call("/v1/key", { token: key.raw });
    expect(info.body.budget.current_month_spend_usd).toBe(0);
    // The same prompt alone fits.
    const one = await w.gw.call("/blitz", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 1000, prompts: ["prompt 0"] } });
    expect(one.status).toBe(200);
    expect(w.A.received.length).toBe(a0 + 1);
  });

  test("budget: the batch is reserved at once, so two concurrent batches cannot overshoot", async () => {
    const body = { model: "gpt-4o-mini", max_tokens: 2000, prompts: Array.from({ length: 10 }, (_, i) => ({ ...user(`q${i}`), mock: { latency_ms: LATENCY_MS } })) };
    // Size the budget between one and two batches' reserved estimate (same lanes, same prices).
    const probe = (await loadKeyContext(w.gw.ctx, (await w.oneLane()).hash))!;
    const estimate = parseBlitzBody(body).requests.reduce((a, r) => a + estimateCostUsd(w.gw.ctx, probe, r, JSON.stringify(r).length)!, 0);
    const key = await w.oneLane({ monthlyBudgetUsd: estimate * 1.5 });
    const a0 = w.A.received.length;
    const [r1, r2] = await Promise.all([w.gw.call("/blitz", { token: key.raw, body }), w.gw.call("/blitz", { token: key.raw, body })]);
    expect([r1.status, r2.status].sort()).toEqual([200, 402]);
    expect(w.A.received.length - a0).toBe(10);
  });

  test("budget: each prompt settles its real cost, so the key's spend equals the sum of the usage records", async () => {
    const key = await w.oneLane({ monthlyBudgetUsd: 10 });
    const prompts = Array.from({ length: 12 }, (_, i) => ({ ...user(`s${i}`), mock: { prompt_tokens: 100 + i, completion_tokens: 40 + i } }));
    const r = await w.gw.call("/blitz", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 500, prompts } });
    expect(r.status).toBe(200);
    expect(r.body.usage.prompt_tokens).toBe(12 * 100 + 66);
    const rows = await recordsOf(key.id);
    expect(rows).toHaveLength(12);
    const recorded = rows.reduce((a, row) => a + row.costUsd, 0);
    expect(recorded).toBeGreaterThan(0);
    // The live counter holds the settled real cost (nano-dollar exact), not the worst-case reservation
    // (releases are batched for a few milliseconds: flush them).
    await (w.gw.ctx.services.settleBatcher as { flush(): Promise<void> }).flush();
    const counter = await monthSpendUsd(w.gw.ctx, { id: key.id, monthlyBudgetUsd: 10, budgetExcludesSeats: true });
    expect(counter.usd).toBeCloseTo(recorded, 9);
    const info = await w.gw.call("/v1/key", { token: key.raw });
    expect(Math.abs(info.body.budget.current_month_spend_usd - recorded)).toBeLessThanOrEqual(1e-6);
  });

  test("limits: 51 prompts → 400 bad_request; 0 prompts → 400 bad_request; nothing is sent upstream", async () => {
    const key = await w.oneLane();
    const a0 = w.A.received.length;
    const many = await w.gw.call("/blitz", { token: key.raw, body: { model: "gpt-4o-mini", prompts: Array.from({ length: 51 }, () => "x") } });
    expect(many.status).toBe(400);
    expect(many.body).toEqual({ error: expect.stringContaining("at most 50"), code: "bad_request" });
    const none = await w.gw.call("/blitz", { token: key.raw, body: { model: "gpt-4o-mini", prompts: [] } });
    expect(none.status).toBe(400);
    expect(none.body.code).toBe("bad_request");
    expect(w.A.received.length).toBe(a0);
  });

  test("validation: each refusal is 400 bad_request in the flat shape naming the field; a bad stream says why", async () => {
    const key = await w.oneLane();
    const cases: Array<[unknown, string]> = [
      [{ model: "gpt-4o-mini", prompts: ["a", "b", "c", { messages: [] }] }, "prompts[3].messages must be a non-empty array"],
      [{ prompts: ["a"] }, "model is required"],
      [{ model: "gpt-4o-mini", prompts: ["a"], stream: "yes" }, "stream must be a boolean"],
      [{ model: "gpt-4o-mini", prompts: "a" }, "prompts must be an array"],
      [{ model: "gpt-4o-mini", prompts: ["a"], temperature: "warm" }, "temperature must be a number"],
      ["not json", "not valid JSON"],
      [[1, 2], "must be a JSON object"],
    ];
    for (const [body, words] of cases) {
      const r = await w.gw.call("/blitz", { token: key.raw, body });
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("bad_request");
      expect(r.body.error).toContain(words);
    }
  });

  test("auth: no token → 401 auth_required; unknown or revoked key → invalid_api_key; all flat", async () => {
    const body = { model: "gpt-4o-mini", prompts: ["a"] };
    const none = await w.gw.call("/blitz", { body });
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ error: expect.any(String), code: "auth_required" });
    const unknown = await w.gw.call("/blitz", { token: "gw_unknownunknownunknown", body });
    expect(unknown.status).toBe(401);
    expect(unknown.body).toEqual({ error: expect.any(String), code: "invalid_api_key" });
    const key = await w.oneLane();
    await revokeKey(w.gw, key);
    await sleep(50);
    const revoked = await w.gw.call("/blitz", { token: key.raw, body });
    expect(revoked.status).toBe(401);
    expect(revoked.body.code).toBe("invalid_api_key");
    const account = await w.gw.call("/blitz", { token: w.acct.token, body });
    expect(account.body.code).toBe("invalid_api_key");
    const provider = await w.gw.call("/blitz", { token: "sk-proj-abcdefabcdef", body });
    expect(provider.body.code).toBe("signup_required");
  });

  test("order of checks: 401 before 400, 400 before 402; a key without lanes is 400 no_providers", async () => {
    expect((await w.gw.call("/blitz", { body: { prompts: [] } })).status).toBe(401);
    const key = await w.oneLane({ monthlyBudgetUsd: 0.000001 });
    const bad = await w.gw.call("/blitz", { token: key.raw, body: { model: "gpt-4o-mini", prompts: [] } });
    expect(bad.status).toBe(400);
    const poor = await w.gw.call("/blitz", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 100000, prompts: ["a"] } });
    expect(poor.status).toBe(402);
    const bare = await addRoutingKey(w.gw, w.acct.id, { lanes: [] });
    const r = await w.gw.call("/blitz", { token: bare.raw, body: { model: "gpt-4o-mini", prompts: ["a"] } });
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("no_providers");
  });

  test("405: a wrong method is the flat shape without code", async () => {
    for (const method of ["GET", "PUT", "DELETE"]) {
      const r = await w.gw.call("/blitz", { method });
      expect(r.status).toBe(405);
      expect(r.body).toEqual({ error: expect.any(String) });
      expect(r.headers.get("allow")).toBe("POST");
    }
  });

  test("instance cap: prompts over the cap across concurrent batches queue and all succeed", async () => {
    const key = await w.oneLane();
    const original = w.gw.ctx.services.blitzSlots;
    const small = new Semaphore(8);
    w.gw.ctx.services.blitzSlots = small;
    try {
      const batch = (b: number) => ({ model: "gpt-4o-mini", prompts: Array.from({ length: 12 }, (_, i) => ({ ...user(`b${b}p${i}`), mock: { latency_ms: 50, content: `${b}:${i}` } })) });
      const answers = await Promise.all([0, 1, 2].map((b) => w.gw.call("/blitz", { token: key.raw, body: batch(b) })));
      answers.forEach((r, b) => {
        expect(r.status).toBe(200);
        r.body.results.forEach((res: any, i: number) => expect(res.completion.choices[0].message.content).toBe(`${b}:${i}`));
      });
      expect(small.highWater).toBe(8);
      expect(small.inUse).toBe(0);
    } finally {
      w.gw.ctx.services.blitzSlots = original;
    }
  });

  test("disconnect: a client that goes away cancels the prompts still running and those still queued", async () => {
    const key = await w.oneLane();
    const original = w.gw.ctx.services.blitzSlots;
    const small = new Semaphore(3);
    w.gw.ctx.services.blitzSlots = small;
    try {
      const a0 = w.A.received.length;
      const aborted0 = w.A.aborted;
      const ac = new AbortController();
      const prompts = Array.from({ length: 6 }, (_, i) => ({ ...user(`h${i}`), mock: { hang: true } }));
      const pending = fetch(`${w.gw.url}/blitz`, {
        method: "POST", signal: ac.signal,
        headers: { authorization: `Bearer ${key.raw}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-4o-mini", prompts }),
      }).catch((e) => e);
      for (let i = 0; i < 100 && w.A.received.length - a0 < 3; i++) await sleep(20);
      expect(w.A.received.length - a0).toBe(3);
      expect(small.waiting).toBe(3);
      ac.abort();
      await pending;
      // The three running upstream calls are aborted; the three queued never start.
      await w.A.waitForAborts(aborted0 + 3);
      for (let i = 0; i < 100 && (small.inUse > 0 || small.waiting > 0); i++) await sleep(20);
      expect(small.inUse).toBe(0);
      expect(small.waiting).toBe(0);
      await sleep(100);
      expect(w.A.received.length - a0).toBe(3);
      const rows = await recordsOf(key.id);
      expect(rows.filter((r) => r.outcome === "aborted")).toHaveLength(3);
    } finally {
      w.gw.ctx.services.blitzSlots = original;
    }
  });

  test("budget: a cancelled batch releases its reservation down to what the upstream did (CONTRACT §7: each accepted prompt pays its prompt)", async () => {
    const key = await w.oneLane({ monthlyBudgetUsd: 5 });
    const a0 = w.A.received.length;
    const aborted0 = w.A.aborted;
    const ac = new AbortController();
    const pending = fetch(`${w.gw.url}/blitz`, {
      method: "POST", signal: ac.signal,
      headers: { authorization: `Bearer ${key.raw}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", max_tokens: 1000, prompts: Array.from({ length: 4 }, (_, i) => ({ ...user(`c${i}`), mock: { hang: true } })) }),
    }).catch((e) => e);
    for (let i = 0; i < 100 && w.A.received.length - a0 < 4; i++) await sleep(20);
    const during = await w.gw.call("/v1/key", { token: key.raw });
    expect(during.body.budget.current_month_spend_usd).toBeGreaterThan(0);
    ac.abort();
    await pending;
    await w.A.waitForAborts(aborted0 + 4);
    let rows = await recordsOf(key.id);
    for (let i = 0; i < 50 && rows.length < 4; i++) {
      await sleep(20);
      rows = await recordsOf(key.id);
    }
    expect(rows).toHaveLength(4);
    // Each hung prompt reached the upstream: it pays its estimated prompt, never $0, and nothing more.
    expect(rows.every((r) => r.outcome === "aborted" && r.errorCode === "client_closed_tokens_estimated" && r.costUsd > 0 && r.completionTokens === 0)).toBe(true);
    const paid = rows.reduce((a, r) => a + r.costUsd, 0);
    let after = during;
    for (let i = 0; i < 50; i++) {
      after = await w.gw.call("/v1/key", { token: key.raw });
      if (Math.abs(after.body.budget.current_month_spend_usd - paid) < 1e-6) break;
      await sleep(20);
    }
    expect(after.body.budget.current_month_spend_usd).toBeCloseTo(paid, 6);
    expect(after.body.budget.current_month_spend_usd).toBeLessThan(during.body.budget.current_month_spend_usd);
  });
});
