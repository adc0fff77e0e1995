// POST /v1/responses: passed through untouched to a lane that speaks Responses natively
// (`openai`), translated through the chat pivot on a chat-only lane; usage read either way.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { type RelayWorld, startRelayWorld, usageRows } from "../helpers/relay-world.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { addRoutingKey, expectPassThroughJson, expectPassThroughStream, lane } from "./fixtures.ts";

describe(`responses endpoint (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream, B: MockUpstream;
  let openaiKey: { raw: string }, groqKey: { raw: string };

  let w: RelayWorld<"openai" | "groq">;
  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["openai", "groq"] });
    ({ gw, up: { openai: A, groq: B } } = w);
    openaiKey = await addRoutingKey(gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id)] });
    groqKey = await addRoutingKey(gw, w.acct.id, { lanes: [lane("groq", w.cred.groq.id, { model: "llama-3.3-70b-versatile" })] });
  }, 60_000);
  afterAll(() => w?.stop(), 60_000);

  const direct = (body: unknown) =>
    fetch(`${A.url}/responses`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  async function rowFor(res: Response) {
    const rows = await usageRows(gw, eq(usageRecords.requestId, res.headers.get("x-request-id")!));
    expect(rows).toHaveLength(1);
    return rows[0]!;
  }

  test("responses pass-through: an openai lane gets the body untouched at /v1/responses and the client gets its answer, with the gateway's cost in its usage (CONTRACT §9)", async () => {
    const body = { model: "gpt-4o-mini", input: "Hi", instructions: "Be brief.", store: false, text: { verbosity: "low" }, extra_vendor_field: { a: 1 }, mock: { id: "resp_fixed", created: 1700000000, prompt_tokens: 77, completion_tokens: 5 } };
    const expected = await (await direct(body)).text();
    const res = await gw.req("/v1/responses", { token: openaiKey.raw, body });
    expect(res.status).toBe(200);
    expect(expectPassThroughJson(await res.text(), expected)).toBe((await rowFor(res)).costUsd);
    expect(A.received.at(-1)!.path).toBe("/v1/responses");
    expect(A.received.at(-1)!.body).toEqual(body);
    expect(await rowFor(res)).toMatchObject({ endpoint: "responses", promptTokens: 77, completionTokens: 5, outcome: "ok" });
  });

  test("responses pass-through: streamed events reach the client byte for byte, usage read from response.completed (which alone gets the gateway's cost, CONTRACT §9)", async () => {
    const body = { model: "gpt-4o-mini", input: "Hi", stream: true, mock: { id: "resp_fixed2", created: 1700000000, chunks: 8, prompt_tokens: 12, completion_tokens: 8 } };
    const expected = await (await direct(body)).text();
    const res = await gw.req("/v1/responses", { token: openaiKey.raw, body });
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    expect(expectPassThroughStream(await res.text(), expected)).toBe((await rowFor(res)).costUsd);
    expect(A.received.at(-1)!.body.stream_options).toBeUndefined();
    expect(await rowFor(res)).toMatchObject({ promptTokens: 12, completionTokens: 8, outcome: "ok" });
  });

  test("responses on a chat-only lane: translated to chat completions and back", async () => {
    // Translation builds a new chat body, so the mock's behaviour is set on the server here.
    B.setDefault({ content: "Hello there", prompt_tokens: 9, completion_tokens: 2 });
    const res = await gw.req("/v1/responses", { token: groqKey.raw, body: { model: "gpt-4o-mini", input: "Hi" } });
    expect(res.status).toBe(200);
    const out = await res.json() as any;
    expect(out.object).toBe("response");
    expect(JSON.stringify(out.output)).toContain("Hello there");
    expect(B.received.at(-1)!.path).toBe("/v1/chat/completions");
    expect(B.received.at(-1)!.body.model).toBe("gpt-4o-mini"); // the request's model first (CONTRACT §8)
    expect(B.received.at(-1)!.body.messages.at(-1)).toMatchObject({ role: "user" });
    expect(await rowFor(res)).toMatchObject({ provider: "groq", promptTokens: 9, completionTokens: 2 });

    B.setDefault({ content: "Streamed answer", chunks: 4 });
    const s = await gw.req("/v1/responses", { token: groqKey.raw, body: { model: "gpt-4o-mini", input: "Hi", stream: true } });
    const text = await s.text();
    B.setDefault({});
    expect(text).toContain("Streamed answer".slice(0, 4));
    expect(text).toContain("event: response.completed");
    expect(text).toContain("response.output_text.delta");
    expect(B.received.at(-1)!.body.stream_options).toEqual({ include_usage: true });
    // The chat usage chunk the relay asked for is read by the decoder and recorded.
    const row = await rowFor(s);
    expect(row.outcome).toBe("ok");
    expect(row.completionTokens).toBe(4);
  });
});
