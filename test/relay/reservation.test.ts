// The reservation covers what goes upstream, exactly (CONTRACT §7): the output limit the lane
// receives after translation, times `n`; limit fields that contradict each other are refused;
// near the end of a budget what remains is shared by the choices. And what the gateway cannot
// observe it refuses (CONTRACT §8): Responses `background`, and stored context on budgeted keys.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { inArray } from "drizzle-orm";
import { storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { addKeyWithContext, type RelayWorld, startRelayWorld, usageRows } from "../helpers/relay-world.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import type { MockAnthropic } from "../mocks/anthropic-upstream.ts";
import { monthSpendUsd } from "../../src/money/counters.ts";
import { estimateRequest } from "../../src/money/estimate.ts";
import { unitPrices } from "../../src/money/pricing.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { addRoutingKey, chatBody, lane, bytesOf } from "./fixtures.ts";

describe(`reservations after translation (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream;
  let M: MockAnthropic;
  let acct: { id: string; token: string };
  let openai: { id: string };
  let anthropic: { id: string };

  let w: RelayWorld<"openai" | "anthropic">;
  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["openai", "anthropic"] });
    ({ gw, acct, up: { openai: A, anthropic: M }, cred: { openai, anthropic } } = w);
  }, 60_000);
  afterEach(() => A.setDefault({}), 60_000);
  afterAll(() => w?.stop(), 60_000);

  async function key(usd: number | null, provider = "openai") {
    return addKeyWithContext(gw, acct.id, { lanes: [lane(provider, provider === "openai" ? openai.id : anthropic.id)], monthlyBudgetUsd: usd });
  }
  async function records(ids: string[]) {
    return usageRows(gw, inArray(usageRecords.requestId, ids));
  }
  async function settledSpend(k: Awaited<ReturnType<typeof key>>, want: number) {
    let spend = -1;
    for (let i = 0; i < 100 && Math.abs(spend - want) > 1e-9; i++) {
      if (i) await Bun.sleep(20);
      spend = (await monthSpendUsd(gw.ctx, k.ctx)).usd;
    }
    return spend;
  }

  test("CONTRACT §7: n choices are reserved (n × the output limit), so {n:100, max_tokens:1000} cannot pass a $0.10 or $0.50 budget", async () => {
    const body = chatBody({ model: "gpt-4o", n: 100, max_tokens: 1000, mock: { completion_tokens: 1000 } });
    const small = await key(0.1);
    const est = estimateRequest(gw.ctx, small.ctx, body, bytesOf(body))!;
    const p = unitPrices("openai", "gpt-4o")!;
    expect(est.choices).toBe(100);
    expect(est.usd).toBeCloseTo(bytesOf(body) * p.input + 100 * 1000 * p.output, 12);
    // $0.10 does not pay for 100 useful answers (256 tokens each): refused before any upstream call.
    const before = A.received.length;
    const refused = await gw.call("/v1/chat/completions", { token: small.raw, body });
    expect(refused.status).toBe(402);
    expect(A.received.length).toBe(before);
    const k = await key(0.5);
    const r = await gw.call("/v1/chat/completions", { token: k.raw, body });
    expect(r.status).toBe(200);
    // What remained was shared by the 100 choices: the upstream got a lowered per-choice limit.
    const sent = A.received.at(-1)!.body;
    expect(sent.n).toBe(100);
    expect(sent.max_tokens).toBeLessThan(1000);
    expect(r.body.choices.length).toBe(100);
    expect(r.body.usage.completion_tokens).toBe(100 * sent.max_tokens);
    const [row] = await records([r.headers.get("x-request-id")!]);
    expect(row!.completionTokens).toBe(A.bills.at(-1)!.completion);
    expect(await settledSpend(k, row!.costUsd)).toBeLessThanOrEqual(0.5);
  });


  test("CONTRACT §7: /blitz reserves each prompt's n choices (5 prompts × n: 20 do not fit where 5 × 1 would)", async () => {
    const one = estimateRequest(gw.ctx, (await key(1)).ctx, chatBody({ max_tokens: 1000 }))!;
    const k = await key(one.usd * 5 * 3);
    const prompts = ["a", "b", "c", "d", "e"];
    const r = await gw.call("/blitz", { token: k.raw, body: { model: "gpt-4o-mini", max_tokens: 1000, n: 20, prompts } });
    expect(r.status).toBe(402);
    expect(r.body.code).toBe("budget_exceeded");
    const ok = await gw.call("/blitz", { token: k.raw, body: { model: "gpt-4o-mini", max_tokens: 1000, n: 1, prompts } });
    expect(ok.status).toBe(200);
  });

  test("CONTRACT §7: contradicting output limits are refused with 400 naming the field (a decoy max_tokens beside max_output_tokens)", async () => {
    const k = await key(0.02, "anthropic");
    const before = M.received.length;
    const r = await gw.call("/v1/responses", { token: k.raw, body: { model: "claude-haiku-4-5", input: "hi", max_output_tokens: 64000, max_tokens: 1 } });
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe("max_tokens");
    expect(r.body.error.message).toContain("max_output_tokens");
    expect(M.received.length).toBe(before);
    const chat = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody({ max_tokens: 10, max_completion_tokens: 5000 }) });
    expect(chat.status).toBe(400);
    expect(chat.body.error.param).toBe("max_tokens");
    const n = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody({ n: 0 }) });
    expect(n.status).toBe(400);
    expect(n.body.error.param).toBe("n");
    const blitz = await gw.call("/blitz", { token: k.raw, body: { model: "gpt-4o-mini", prompts: [{ messages: [{ role: "user", content: "x" }], max_tokens: 1, max_output_tokens: 900 }] } });
    expect(blitz.status).toBe(400);
    expect(blitz.body.error).toContain("prompts[0]");
  });

  test("CONTRACT §7: the Anthropic lane receives the Responses client's limit as max_tokens, never more than was reserved", async () => {
    const k = await key(1, "anthropic");
    const r = await gw.call("/v1/responses", { token: k.raw, body: { model: "claude-haiku-4-5", input: "hi", max_output_tokens: 300, max_tokens: 300 } });
    expect(r.status).toBe(200);
    expect(M.served.at(-1)!.body.max_tokens).toBe(300);
  });

  test("CONTRACT §8: Responses background: true is refused with 400 bad_request naming background", async () => {
    for (const budget of [null, 1]) {
      const k = await key(budget);
      const before = A.received.length;
      const r = await gw.call("/v1/responses", { token: k.raw, body: { model: "gpt-4o-mini", input: "hi", background: true } });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("bad_request");
      expect(r.body.error.param).toBe("background");
      expect(A.received.length).toBe(before);
    }
  });

  test("CONTRACT §8: previous_response_id and conversation are refused on a budgeted key (send the context) and pass through without a budget", async () => {
    const budgeted = await key(1);
    for (const f of ["previous_response_id", "conversation"]) {
      const r = await gw.call("/v1/responses", { token: budgeted.raw, body: { model: "gpt-4o-mini", input: "hi", [f]: "resp_abc" } });
      expect(r.status).toBe(400);
      expect(r.body.error.param).toBe(f);
      expect(r.body.error.message).toContain("Send the context instead");
    }
    const free = await key(null);
    const r = await gw.call("/v1/responses", { token: free.raw, body: { model: "gpt-4o-mini", input: "hi", previous_response_id: "resp_abc" } });
    expect(r.status).toBe(200);
    expect(A.received.at(-1)!.body.previous_response_id).toBe("resp_abc");
  });
});
