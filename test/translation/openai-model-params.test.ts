// A body the gateway translates for an `openai` lane is one OpenAI accepts for the model asked
// for (CONTRACT §3: the gateway speaks each vendor's protocol): OpenAI refuses `max_tokens` on its
// reasoning models and `reasoning_effort` on models that do not reason (400 unsupported_parameter;
// the mock refuses both as OpenAI does). So a translated output limit goes out as
// `max_completion_tokens` (every chat model takes it), and an Anthropic `thinking` request keeps
// its effort only on a model that reasons. The client's own chat body passes through as sent, and
// an OpenAI-compatible vendor keeps `max_tokens`.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { storesLabel } from "../helpers/gateway.ts";
import { startWorld, type World } from "./world.ts";

let w: World;
beforeAll(async () => {
  w = await startWorld();
}, 60_000);
afterAll(async () => {
  await w.stop();
}, 60_000);

const messages = (key: string, body: Record<string, unknown>) =>
  fetch(`${w.gw.url}/v1/messages`, { method: "POST", headers: { "x-api-key": key, "content-type": "application/json", "anthropic-version": "2023-06-01" }, body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], ...body }) });
const lastChat = () => w.openai.served.filter((r) => r.path === "/v1/chat/completions").at(-1)!.body;

describe(`OpenAI chat parameters per model on translated requests (${storesLabel})`, () => {
  test("the mock refuses what OpenAI refuses (the test can fail)", async () => {
    const direct = (body: Record<string, unknown>) =>
      fetch(`${w.openai.url}/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${w.openai.apiKey}`, "content-type": "application/json" }, body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], ...body }) });
    const a = await direct({ model: "o4-mini", max_tokens: 100 });
    expect(a.status).toBe(400);
    expect(await a.json()).toEqual({ error: { message: "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", type: "invalid_request_error", param: "max_tokens", code: "unsupported_parameter" } });
    const b = await direct({ model: "gpt-4o", reasoning_effort: "low" });
    expect(b.status).toBe(400);
    expect(((await b.json()) as any).error.param).toBe("reasoning_effort");
  });

  test("Anthropic client, OpenAI reasoning model: max_tokens goes out as max_completion_tokens and the thinking effort is kept", async () => {
    const r = await messages(w.keys.openai!.rawKey, { model: "o4-mini", max_tokens: 512, thinking: { type: "enabled", budget_tokens: 2048 } });
    expect(r.status).toBe(200);
    expect(((await r.json()) as any).type).toBe("message");
    const sent = lastChat();
    expect(sent.model).toBe("o4-mini");
    expect(sent.max_completion_tokens).toBe(512);
    expect("max_tokens" in sent).toBe(false);
    expect(typeof sent.reasoning_effort).toBe("string");
  });

  test("Anthropic client with thinking, OpenAI model that does not reason: the effort is dropped, the answer comes", async () => {
    const r = await messages(w.keys.openai!.rawKey, { model: "gpt-4o", max_tokens: 300, thinking: { type: "enabled", budget_tokens: 1024 }, stream: true });
    expect(r.status).toBe(200);
    expect(await r.text()).toContain("message_stop");
    const sent = lastChat();
    expect("reasoning_effort" in sent).toBe(false);
    expect(sent.max_completion_tokens).toBe(300);
  });

  test("the client's own chat body passes through an OpenAI lane as sent (max_tokens kept)", async () => {
    const r = await fetch(`${w.gw.url}/v1/chat/completions`, {
      method: "POST", headers: { authorization: `Bearer ${w.keys.openai!.rawKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", max_tokens: 64, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(r.status).toBe(200);
    const sent = lastChat();
    expect(sent.max_tokens).toBe(64);
    expect("max_completion_tokens" in sent).toBe(false);
  });

  test("an OpenAI-compatible vendor keeps max_tokens on a translated request", async () => {
    const r = await messages(w.keys.mistral!.rawKey, { model: "mistral-small-latest", max_tokens: 128 });
    expect(r.status).toBe(200);
    const sent = lastChat();
    expect(sent.max_tokens).toBe(128);
    expect("max_completion_tokens" in sent).toBe(false);
  });
});
