// Prompt-cache writes are priced by their TTL (CONTRACT §7): Anthropic reports 5-minute and
// 1-hour writes apart (`cache_creation.ephemeral_5m_input_tokens` / `ephemeral_1h_input_tokens`),
// and a 1-hour write costs the catalog's 1-hour price (2× input where the catalog has none), on
// every lane: pass-through and translated, plain and streamed; cache reads and 5-minute writes
// keep their own prices.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { inArray } from "drizzle-orm";
import { storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { type RelayWorld, startRelayWorld, usageRows } from "../helpers/relay-world.ts";
import type { MockAnthropic } from "../mocks/anthropic-upstream.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { addRoutingKey, lane } from "./fixtures.ts";

// claude-haiku-4-5 in the catalog: $1/M input, $1.25/M 5-minute write, $2/M 1-hour write, $0.10/M read, $5/M output.
const USAGE = {
  input_tokens: 100,
  cache_creation_input_tokens: 9000,
  cache_creation: { ephemeral_5m_input_tokens: 1000, ephemeral_1h_input_tokens: 8000 },
  cache_read_input_tokens: 500,
  output_tokens: 10,
};
const EXPECTED = (100 * 1 + 1000 * 1.25 + 8000 * 2 + 500 * 0.1 + 10 * 5) / 1e6;

describe(`cache writes priced by TTL through the gateway (${storesLabel})`, () => {
  let gw: TestGateway;
  let M: MockAnthropic;
  let raw: string;
  let keyId: string;

  let w: RelayWorld<"anthropic">;
  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["anthropic"] });
    ({ gw, up: { anthropic: M } } = w);
    const k = await addRoutingKey(gw, w.acct.id, { lanes: [lane("anthropic", w.cred.anthropic.id)], monthlyBudgetUsd: 10 });
    raw = k.raw;
    keyId = k.id;
  }, 60_000);
  afterAll(() => w?.stop(), 60_000);

  const message = (id: string) => ({
    id, type: "message", role: "assistant", model: "claude-haiku-4-5",
    content: [{ type: "text", text: "cached answer" }], stop_reason: "end_turn", stop_sequence: null, usage: USAGE,
  });
  const events = (id: string) => [
    { type: "message_start", message: { ...message(id), content: [], stop_reason: null, usage: { ...USAGE, output_tokens: 1 } } },
    { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "cached answer" } },
    { type: "content_block_stop", index: 0 },
    { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 10 } },
    { type: "message_stop" },
  ];
  const ask = { model: "claude-haiku-4-5", max_tokens: 100, messages: [{ role: "user", content: [{ type: "text", text: "long context", cache_control: { type: "ephemeral", ttl: "1h" } }] }] };

  async function costOf(res: Response) {
    expect(res.status).toBe(200);
    const body = await res.text();
    const id = res.headers.get("x-request-id")!;
    for (let i = 0; i < 100; i++) {
      const rows = await usageRows(gw, inArray(usageRecords.requestId, [id]));
      if (rows.length) return { row: rows[0]!, body };
      await Bun.sleep(20);
    }
    throw new Error(`no record for ${keyId}`);
  }
  const post = (path: string, body: unknown) =>
    fetch(gw.url + path, { method: "POST", headers: { authorization: `Bearer ${raw}`, "content-type": "application/json", "anthropic-version": "2023-06-01" }, body: JSON.stringify(body) });

  test("CONTRACT §7: a Messages client on an Anthropic lane (pass-through) pays 1-hour writes at the 1-hour price, plain and streamed", async () => {
    M.enqueue({ json: message("msg_c1") });
    const plain = await costOf(await post("/v1/messages", ask));
    expect(plain.row.costUsd).toBeCloseTo(EXPECTED, 12);
    expect(plain.row.cacheWriteTokens).toBe(9000);
    M.enqueue({ stream: events("msg_c2") });
    const streamed = await costOf(await post("/v1/messages", { ...ask, stream: true }));
    expect(streamed.row.costUsd).toBeCloseTo(EXPECTED, 12);
  });

  test("CONTRACT §7: a chat client on an Anthropic lane (translated) pays the same, and sees the 1-hour writes in its usage", async () => {
    const chat = { model: "claude-haiku-4-5", max_tokens: 100, messages: [{ role: "user", content: "long context" }] };
    M.enqueue({ json: message("msg_c3") });
    const plain = await costOf(await post("/v1/chat/completions", chat));
    expect(plain.row.costUsd).toBeCloseTo(EXPECTED, 12);
    expect(JSON.parse(plain.body).usage.prompt_tokens_details.cache_write_1h_tokens).toBe(8000);
    M.enqueue({ stream: events("msg_c4") });
    const streamed = await costOf(await post("/v1/chat/completions", { ...chat, stream: true, stream_options: { include_usage: true } }));
    expect(streamed.row.costUsd).toBeCloseTo(EXPECTED, 12);
    expect(streamed.body).toContain('"cache_write_1h_tokens":8000');
  });

  test("CONTRACT §7: a Responses client on an Anthropic lane (translated) pays 1-hour writes at the 1-hour price", async () => {
    M.enqueue({ json: message("msg_c5") });
    const r = await costOf(await post("/v1/responses", { model: "claude-haiku-4-5", max_output_tokens: 100, input: "long context" }));
    expect(r.row.costUsd).toBeCloseTo(EXPECTED, 12);
  });
});

