// An abandoned request costs what the upstream did (CONTRACT §7): a client that disconnects, or
// a gateway timeout, after the upstream accepted the request pays its prompt (the upstream's
// count when it arrived, else the estimate) plus every output token already received, never $0;
// the record says `aborted` and whether its tokens are the upstream's count or the gateway's.
// The mock upstreams bill like the vendors: the prompt of every accepted request and each token
// generated before the disconnect (MockUpstream.bills, MockAnthropic.bills).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { inArray } from "drizzle-orm";
import { storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { addKeyWithContext, type RelayWorld, startRelayWorld, usageRows } from "../helpers/relay-world.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import type { MockAnthropic } from "../mocks/anthropic-upstream.ts";
import { monthSpendUsd } from "../../src/money/counters.ts";
import { costUsd } from "../../src/money/pricing.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { addRoutingKey, chatBody, lane } from "./fixtures.ts";

const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(" ");

describe(`abandoned requests are charged (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream;
  let M: MockAnthropic;
  let acct: { id: string; token: string };
  let openai: { id: string };
  let anthropic: { id: string };

  let w: RelayWorld<"openai" | "anthropic">;
  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["openai", "anthropic"], env: { UPSTREAM_TIMEOUT_SECONDS: "1" } });
    ({ gw, acct, up: { openai: A, anthropic: M }, cred: { openai, anthropic } } = w);
  }, 60_000);
  afterAll(() => w?.stop(), 60_000);

  async function key(provider = "openai") {
    return addKeyWithContext(gw, acct.id, { lanes: [lane(provider, provider === "openai" ? openai.id : anthropic.id)], monthlyBudgetUsd: 100 });
  }
  async function rowOf(requestId: string) {
    for (let i = 0; i < 100; i++) {
      const rows = await usageRows(gw, inArray(usageRecords.requestId, [requestId]));
      if (rows.length) return rows;
      await Bun.sleep(20);
    }
    throw new Error(`no usage record for ${requestId}`);
  }
  async function spendOf(k: Awaited<ReturnType<typeof key>>, want: number) {
    let spend = -1;
    for (let i = 0; i < 100 && Math.abs(spend - want) > 1e-9; i++) {
      if (i) await Bun.sleep(20);
      spend = (await monthSpendUsd(gw.ctx, k.ctx)).usd;
    }
    return spend;
  }

  /** Streams `body` to `path`, reads until `enough(text so far)`, then disconnects. */
  async function leaveStream(path: string, k: { raw: string }, body: unknown, enough: (text: string) => boolean, headers: Record<string, string> = {}) {
    const ac = new AbortController();
    const res = await fetch(gw.url + path, {
      method: "POST", signal: ac.signal,
      headers: { authorization: `Bearer ${k.raw}`, "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    const requestId = res.headers.get("x-request-id")!;
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let text = "";
    while (!enough(text)) {
      const r = await reader.read();
      if (r.done) break;
      text += dec.decode(r.value, { stream: true });
    }
    ac.abort();
    return { requestId, text };
  }

  test("CONTRACT §7: a chat stream the client leaves mid-answer pays its prompt and every chunk received (counted from the deltas)", async () => {
    const k = await key();
    const a0 = A.aborted;
    const { requestId, text } = await leaveStream("/v1/chat/completions", k, chatBody({ model: "gpt-4o", stream: true, mock: { chunks: 400, chunk_delay_ms: 20 } }), (t) => (t.match(/"content"/g) ?? []).length >= 13);
    await A.waitForAborts(a0 + 1);
    const received = (text.match(/"content"/g) ?? []).length;
    const [row] = await rowOf(requestId);
    expect(row!.outcome).toBe("aborted");
    expect(row!.errorCode).toBe("client_closed_tokens_estimated");
    expect(row!.promptTokens).toBeGreaterThan(0);
    expect(row!.completionTokens).toBeGreaterThanOrEqual(received);
    const bill = A.bills.at(-1)!;
    // Never less than the vendor's bill for the same request.
    expect(row!.promptTokens).toBeGreaterThanOrEqual(bill.prompt);
    expect(row!.completionTokens).toBeGreaterThanOrEqual(bill.completion);
    expect(row!.costUsd).toBeGreaterThanOrEqual(costUsd("openai", "gpt-4o", { prompt_tokens: bill.prompt, completion_tokens: bill.completion, cached_tokens: 0, cache_write_tokens: 0 }));
    expect(await spendOf(k, row!.costUsd)).toBeCloseTo(row!.costUsd, 9);
  });

  test("CONTRACT §7: leaving right after finish_reason, before the usage chunk, still pays the whole answer", async () => {
    const k = await key();
    const a0 = A.aborted;
    const body = chatBody({ model: "gpt-4o", stream: true, stream_options: { include_usage: true }, mock: { chunks: 20, usage_delay_ms: 3000 } });
    const { requestId } = await leaveStream("/v1/chat/completions", k, body, (t) => t.includes('"finish_reason":"stop"'));
    await A.waitForAborts(a0 + 1);
    const [row] = await rowOf(requestId);
    expect(row!.outcome).toBe("aborted");
    expect(row!.completionTokens).toBeGreaterThanOrEqual(20);
    expect(row!.costUsd).toBeGreaterThan(0);
    const bill = A.bills.at(-1)!;
    expect(row!.costUsd).toBeGreaterThanOrEqual(costUsd("openai", "gpt-4o", { prompt_tokens: bill.prompt, completion_tokens: bill.completion, cached_tokens: 0, cache_write_tokens: 0 }));
  });

  test("CONTRACT §7: a Responses stream the client leaves pays its prompt and the deltas received", async () => {
    const k = await key();
    const a0 = A.aborted;
    const { requestId, text } = await leaveStream("/v1/responses", k, { model: "gpt-4o", input: "hi", stream: true, mock: { chunks: 400, chunk_delay_ms: 20 } }, (t) => (t.match(/output_text\.delta/g) ?? []).length >= 20);
    await A.waitForAborts(a0 + 1);
    const received = (text.match(/"delta"/g) ?? []).length;
    const [row] = await rowOf(requestId);
    expect(row!.outcome).toBe("aborted");
    expect(row!.errorCode).toBe("client_closed_tokens_estimated");
    expect(row!.completionTokens).toBeGreaterThanOrEqual(received);
    const bill = A.bills.at(-1)!;
    expect(row!.promptTokens).toBeGreaterThanOrEqual(bill.prompt);
    expect(row!.completionTokens).toBeGreaterThanOrEqual(bill.completion);
  });

  test("CONTRACT §7: a Messages stream the client leaves pays Anthropic's own input count and the text deltas received", async () => {
    const k = await key("anthropic");
    M.enqueue({ eventDelayMs: 20 });
    const body = { model: "claude-haiku-4-5", max_tokens: 2000, stream: true, messages: [{ role: "user", content: words(300) }] };
    const { requestId, text } = await leaveStream("/v1/messages", k, body, (t) => (t.match(/text_delta/g) ?? []).length >= 15, { "anthropic-version": "2023-06-01" });
    const received = (text.match(/text_delta/g) ?? []).length;
    const [row] = await rowOf(requestId);
    const bill = M.bills.at(-1)!;
    expect(row!.outcome).toBe("aborted");
    // The input count came with message_start; the output is the gateway's count of the deltas.
    expect(row!.promptTokens).toBe(bill.input);
    expect(row!.errorCode).toBe("client_closed_tokens_estimated");
    expect(row!.completionTokens).toBeGreaterThanOrEqual(received);
    await Bun.sleep(100); // the mock notices the disconnect at its next write
    expect(row!.completionTokens).toBeGreaterThanOrEqual(bill.output);
  });

  test("CONTRACT §7: a translated stream (chat client, Anthropic lane) the client leaves pays the deltas it decoded", async () => {
    const k = await key("anthropic");
    M.enqueue({ eventDelayMs: 20 });
    const body = { model: "claude-haiku-4-5", max_tokens: 2000, stream: true, messages: [{ role: "user", content: words(300) }] };
    const { requestId, text } = await leaveStream("/v1/chat/completions", k, body, (t) => (t.match(/"content"/g) ?? []).length >= 15);
    const received = (text.match(/"content"/g) ?? []).length;
    const [row] = await rowOf(requestId);
    expect(row!.outcome).toBe("aborted");
    expect(row!.promptTokens).toBe(M.bills.at(-1)!.input);
    expect(row!.completionTokens).toBeGreaterThanOrEqual(received - 1);
    await Bun.sleep(100);
    expect(row!.completionTokens).toBeGreaterThanOrEqual(M.bills.at(-1)!.output);
  });

  test("CONTRACT §7: a plain (non-streamed) request the client abandons pays its estimated prompt, not $0", async () => {
    const k = await key();
    const a0 = A.aborted;
    const ac = new AbortController();
    const pending = fetch(gw.url + "/v1/chat/completions", {
      method: "POST", signal: ac.signal,
      headers: { authorization: `Bearer ${k.raw}`, "content-type": "application/json" },
      body: JSON.stringify(chatBody({ model: "gpt-4o", mock: { latency_ms: 5000 } })),
    }).catch((e) => e);
    const n0 = A.received.length;
    for (let i = 0; i < 100 && A.received.length === n0; i++) await Bun.sleep(10);
    ac.abort();
    await pending;
    await A.waitForAborts(a0 + 1);
    const rows = await waitRows(k.id);
    expect(rows[0]!.outcome).toBe("aborted");
    expect(rows[0]!.errorCode).toBe("client_closed_tokens_estimated");
    expect(rows[0]!.promptTokens).toBeGreaterThanOrEqual(A.bills.at(-1)!.prompt);
    expect(rows[0]!.costUsd).toBeGreaterThan(0);
  });

  test("CONTRACT §7: an upstream the gateway times out pays its estimated prompt and says timeout", async () => {
    const k = await key();
    const r = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody({ model: "gpt-4o", mock: { hang: true } }) });
    expect(r.status).toBeGreaterThanOrEqual(500);
    const rows = await waitRows(k.id);
    expect(rows[0]!.outcome).toBe("aborted");
    expect(rows[0]!.errorCode).toBe("timeout_tokens_estimated");
    expect(rows[0]!.promptTokens).toBeGreaterThanOrEqual(A.bills.at(-1)!.prompt);
    expect(rows[0]!.costUsd).toBeGreaterThan(0);
  });

  async function waitRows(keyId: string) {
    for (let i = 0; i < 100; i++) {
      const rows = await usageRows(gw, inArray(usageRecords.routingKeyId, [keyId]));
      if (rows.length) return rows;
      await Bun.sleep(20);
    }
    throw new Error("no usage record");
  }
});
