// The budget is a ceiling (CONTRACT §7): the worst case is reserved before forwarding (the
// client's output limit, else the model's maximum output from the catalog); near the end of the
// budget the upstream output limit is lowered to what remains instead of refusing, and 402 comes
// only when the prompt and a useful answer do not fit; a model the pricing catalog does not know
// is priced at the operator's fallback and the record says so.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { inArray } from "drizzle-orm";
import { storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { addKeyWithContext, type RelayWorld, startRelayWorld, usageRows } from "../helpers/relay-world.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { monthSpendUsd } from "../../src/money/counters.ts";
import { estimateRequest } from "../../src/money/estimate.ts";
import { MIN_USEFUL_OUTPUT_TOKENS } from "../../src/money/output-limits.ts";
import { unitPrices } from "../../src/money/pricing.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { addRoutingKey, chatBody, lane, bytesOf } from "./fixtures.ts";

describe(`budget as a ceiling (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream;
  let acct: { id: string; token: string };
  let cred: { id: string };

  let w: RelayWorld<"openai">;
  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["openai"], env: { UNKNOWN_MODEL_PRICE_USD_PER_MTOK_INPUT: "100", UNKNOWN_MODEL_PRICE_USD_PER_MTOK_OUTPUT: "400" } });
    ({ gw, acct, up: { openai: A }, cred: { openai: cred } } = w);
  }, 60_000);
  afterEach(() => A.setDefault({}), 60_000);
  afterAll(() => w?.stop(), 60_000);

  async function key(usd: number, model: string | null = null) {
    return addKeyWithContext(gw, acct.id, { lanes: [lane("openai", cred.id, { model })], monthlyBudgetUsd: usd });
  }
  async function records(ids: string[]) {
    return usageRows(gw, inArray(usageRecords.requestId, ids));
  }

  test("CONTRACT §7: without max_tokens the model's maximum output is reserved", async () => {
    const body = chatBody();
    const k = await key(1);
    const est = estimateRequest(gw.ctx, k.ctx, body, bytesOf(body))!;
    const p = unitPrices("openai", "gpt-4o-mini")!;
    expect(est.usd).toBeCloseTo(bytesOf(body) * p.input + 16384 * p.output, 12);
  });

  test("CONTRACT §7: near the end of the budget the upstream output limit is lowered to what remains, then 402", async () => {
    const body = chatBody({ max_tokens: 4000, mock: { completion_tokens: 4000 } });
    const probe = await key(1);
    const est = estimateRequest(gw.ctx, probe.ctx, body, bytesOf(body))!;
    const k = await key(est.usd * 1.5);
    const ids: string[] = [];
    const send = async () => {
      const r = await gw.call("/v1/chat/completions", { token: k.raw, body });
      ids.push(r.headers.get("x-request-id")!);
      await Bun.sleep(30); // settlements that release go out in a few ms
      return r;
    };
    expect((await send()).status).toBe(200);
    expect(A.received.at(-1)!.body.max_tokens).toBe(4000);
    // Half a worst case remains: served, with the limit lowered to what it pays for.
    const second = await send();
    expect(second.status).toBe(200);
    const lowered = A.received.at(-1)!.body.max_tokens as number;
    expect(lowered).toBeLessThan(4000);
    expect(lowered).toBeGreaterThanOrEqual(MIN_USEFUL_OUTPUT_TOKENS);
    expect(second.body.usage.completion_tokens).toBe(lowered);
    // Nothing useful remains: refused before any upstream call.
    const before = A.received.length;
    const third = await send();
    expect(third.status).toBe(402);
    expect(third.body.error.code).toBe("budget_exceeded");
    expect(A.received.length).toBe(before);
    const spent = (await records(ids)).reduce((a, r) => a + r.costUsd, 0);
    expect(spent).toBeLessThanOrEqual(est.usd * 1.5 + 1e-12);
  });

  test("CONTRACT §7: the Responses shape gets its own lowered max_output_tokens", async () => {
    const body = { model: "gpt-4o-mini", input: "Say hello.", mock: { completion_tokens: 20_000 } };
    const probe = await key(1);
    const est = estimateRequest(gw.ctx, probe.ctx, body, bytesOf(body))!;
    const k = await key(est.usd * 0.5);
    const r = await gw.call("/v1/responses", { token: k.raw, body });
    expect(r.status).toBe(200);
    const sent = A.received.at(-1)!.body.max_output_tokens as number;
    expect(sent).toBeGreaterThanOrEqual(MIN_USEFUL_OUTPUT_TOKENS);
    expect(sent).toBeLessThan(est.outTokens);
  });

  test("CONTRACT §7: a model the catalog does not know is priced at the fallback on a budgeted key, marked estimated, and refused when over", async () => {
    const body = chatBody({ model: "mystery-model-1", mock: { prompt_tokens: 1000, completion_tokens: 1000 } });
    const k = await key(0.6, "mystery-model-1");
    const est = estimateRequest(gw.ctx, k.ctx, body, bytesOf(body))!;
    // Priced at the operator's fallback: nothing unknown is free.
    expect(est.prices[0]).toEqual({ input: 100 / 1e6, output: 400 / 1e6 });
    const r = await gw.call("/v1/chat/completions", { token: k.raw, body: { ...body, max_tokens: 1000 } });
    expect(r.status).toBe(200);
    const [row] = await records([r.headers.get("x-request-id")!]);
    expect(row!.priceEstimated).toBe(true);
    expect(row!.costUsd).toBeCloseTo(1000 * 100 / 1e6 + 1000 * 400 / 1e6, 12);
    await Bun.sleep(30);
    // $0.5 spent of $0.6: the prompt and a useful answer (256 tokens at $400/M ≈ $0.10) no longer fit.
    const again = await gw.call("/v1/chat/completions", { token: k.raw, body: { ...body, max_tokens: 1000 } });
    expect(again.status).toBe(402);
    expect(again.body.error.code).toBe("budget_exceeded");
  });

  test("CONTRACT §7: two requests sending the same x-request-id each get their record and both count", async () => {
    const k = await key(10);
    const id = `reused-${Date.now()}`;
    for (let i = 0; i < 2; i++) {
      const r = await gw.req("/v1/chat/completions", { token: k.raw, body: chatBody({ mock: { prompt_tokens: 1000, completion_tokens: 100 } }), headers: { "x-request-id": id } });
      expect(r.status).toBe(200);
      await r.text();
    }
    const rows = await records([id]);
    expect(rows.length).toBe(2);
    const total = rows.reduce((a, r) => a + r.costUsd, 0);
    let spend = 0;
    for (let i = 0; i < 50 && Math.abs(spend - total) > 1e-9; i++) {
      await Bun.sleep(20);
      spend = (await monthSpendUsd(gw.ctx, k.ctx)).usd;
    }
    expect(spend).toBeCloseTo(total, 9);
  });

  test("CONTRACT §7: on a key without a budget an unknown model is recorded at 0, not estimated", async () => {
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id, { model: "mystery-model-2" })] });
    const r = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody({ model: "mystery-model-2" }) });
    expect(r.status).toBe(200);
    const [row] = await records([r.headers.get("x-request-id")!]);
    expect(row!.costUsd).toBe(0);
    expect(row!.priceEstimated).toBe(false);
  });
});
