// Classifier mode end to end (CONTRACT §8): the key's classifier model (here an OpenAI-protocol
// mock) picks a lane by category_key; that lane goes first, the chain follows; failures and
// nonsense keep chain order; the classifier call is metered and counted against the budget.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { classifierMessages, matchCategory } from "../../src/relay/routing/classifier.ts";
import { storesLabel } from "../helpers/gateway.ts";
import { startMockBridge, type MockBridge } from "../mocks/bridge.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { chat, connectSub, createKey, eventually, registerBridge, saveCredential, startSubWorld, usageOf, type SubWorld } from "./helpers.ts";

describe("classifier answer matching", () => {
  const keys = ["code", "chat", "long-docs"];
  test("an answer naming one category_key picks it, ignoring case, quotes and punctuation", () => {
    expect(matchCategory("code", keys)).toBe("code");
    expect(matchCategory(" \"Chat\".\n", keys)).toBe("chat");
    expect(matchCategory("`long-docs`", keys)).toBe("long-docs");
    expect(matchCategory("Category: code", keys)).toBe("code");
  });
  test("nonsense, several keys, or none picks nothing", () => {
    expect(matchCategory("banana", keys)).toBeNull();
    expect(matchCategory("code or chat", keys)).toBeNull();
    expect(matchCategory("", keys)).toBeNull();
    expect(matchCategory("docs", keys)).toBeNull();
  });
  test("prompt: instructions, the category list, and the last user message", () => {
    const m = classifierMessages("Route coding work to code.", [{ key: "code", description: "Coding tasks" }, { key: "chat", description: null }], "fix my loop");
    expect(m).toEqual([
      { role: "system", content: "Route coding work to code.\n\nCategories (category_key: category_description):\n- code: Coding tasks\n- chat:\n\nAnswer with exactly one category_key from the list above and nothing else." },
      { role: "user", content: "fix my loop" },
    ]);
  });
});

let w: SubWorld;
let bridge: MockBridge;
let classifier: MockUpstream;
let bridgeId: string;
let sessionId: string;
let oldestCred: string;
let newerCred: string;

beforeAll(async () => {
  classifier = await startMockOpenAI();
  bridge = await startMockBridge();
  w = await startSubWorld({ PROVIDER_OPENAI_BASE_URL: classifier.url });
  oldestCred = await saveCredential(w.gw, w.account.token, "openai", "sk-classifier-oldest-000000");
  await new Promise((r) => setTimeout(r, 10));
  newerCred = await saveCredential(w.gw, w.account.token, "openai", "sk-classifier-newer-111111");
  bridgeId = await registerBridge(w.gw, w.account.token, bridge.url, bridge.token);
  sessionId = (await connectSub(w)).sessionId;
}, 60_000);
afterAll(async () => {
  await w.stop();
  await bridge.stop();
  await classifier.stop();
}, 60_000);

const classifierKey = (extra: Record<string, unknown> = {}) => createKey(w.gw, w.account.token, {
  mode: "classifier",
  classifier_provider: "openai",
  classifier_model: "gpt-4o-mini",
  classifier_instructions: "Send programming work to code and everything else to chat.",
  providers: [
    { provider: "sub", sub_session_id: sessionId, category_key: "code", category_description: "Programming and debugging" },
    { provider: "bridge", bridge_instance_id: bridgeId, category_key: "chat", category_description: "General conversation" },
  ],
  ...extra,
});

const subHits = () => w.backend.received.filter((r) => r.path === "/responses").length;

describe(`classifier routing through the gateway (${storesLabel})`, () => {
  test("the classifier's choice changes which upstream is hit", async () => {
    const { rawKey } = await classifierKey();
    classifier.setDefault({ content: "chat" });
    let sub = subHits(), br = bridge.completions.length;
    const a = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "how are you?" }] });
    expect(a.status).toBe(200);
    expect(a.body.choices[0].message.content).toBe("bridge answer to: how are you?");
    expect([subHits() - sub, bridge.completions.length - br]).toEqual([0, 1]);

    classifier.setDefault({ content: "code" });
    sub = subHits(); br = bridge.completions.length;
    const b = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "fix this loop" }] });
    expect(b.status).toBe(200);
    expect(b.body.choices[0].message.content).toBe("sub answer to: fix this loop");
    expect([subHits() - sub, bridge.completions.length - br]).toEqual([1, 0]);
  });

  test("CONTRACT §9: a session is classified once: its next requests go to the lane the classifier picked, without asking it again", async () => {
    const { rawKey } = await classifierKey();
    const send = (content: string) => w.gw.call("/v1/chat/completions", { token: rawKey, headers: { "x-session-id": "classified-once" }, body: { model: "gpt-5", messages: [{ role: "user", content }] } });
    classifier.setDefault({ content: "chat" });
    const asked = classifier.received.length;
    expect((await send("how are you?")).body.choices[0].message.content).toBe("bridge answer to: how are you?");
    expect(classifier.received.length).toBe(asked + 1);
    // The classifier would now say "code"; the session stays where it was served.
    classifier.setDefault({ content: "code" });
    const sub = subHits(), br = bridge.completions.length;
    for (const q of ["fix this loop", "and this one"]) expect((await send(q)).status).toBe(200);
    expect([subHits() - sub, bridge.completions.length - br]).toEqual([0, 2]);
    expect(classifier.received.length).toBe(asked + 1);
  });

  test("the classifier gets the instructions, the category list and the last user message, with the oldest saved key", async () => {
    const { rawKey } = await classifierKey();
    classifier.setDefault({ content: "chat" });
    const n = classifier.received.length;
    await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "first" }, { role: "assistant", content: "ok" }, { role: "user", content: "the last one" }] });
    expect(classifier.received.length).toBe(n + 1);
    const got = classifier.received.at(-1)!;
    expect(got.path).toBe("/v1/chat/completions");
    expect(got.headers.authorization).toBe("Bearer sk-classifier-oldest-000000");
    expect(got.body.model).toBe("gpt-4o-mini");
    expect(got.body.messages).toEqual(classifierMessages(
      "Send programming work to code and everything else to chat.",
      [{ key: "code", description: "Programming and debugging" }, { key: "chat", description: "General conversation" }],
      "the last one",
    ));
  });

  test("classifier_credential_id picks which saved key the classifier uses", async () => {
    const { rawKey } = await classifierKey({ classifier_credential_id: newerCred });
    classifier.setDefault({ content: "chat" });
    await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "x" }] });
    expect(classifier.received.at(-1)!.headers.authorization).toBe("Bearer sk-classifier-newer-111111");
    void oldestCred;
  });

  test("the chosen lane is tried first and the rest of the chain is the fallback", async () => {
    const { rawKey } = await classifierKey();
    classifier.setDefault({ content: "chat" });
    bridge.setFail(503);
    try {
      const br = bridge.completions.length;
      const r = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "fallback please" }] });
      expect(r.status).toBe(200);
      expect(r.body.choices[0].message.content).toBe("sub answer to: fallback please");
      expect(bridge.completions.length).toBe(br + 1);
    } finally {
      bridge.setFail(null);
    }
  });

  test("a classifier answering nonsense keeps chain order", async () => {
    const { rawKey } = await classifierKey();
    classifier.setDefault({ content: "I think this is about cooking" });
    const sub = subHits(), br = bridge.completions.length;
    const r = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "hm" }] });
    expect(r.status).toBe(200);
    expect([subHits() - sub, bridge.completions.length - br]).toEqual([1, 0]);
  });

  test("a failing classifier keeps chain order", async () => {
    const { rawKey } = await classifierKey({
      providers: [
        { provider: "bridge", bridge_instance_id: bridgeId, category_key: "chat", category_description: "General conversation" },
        { provider: "sub", sub_session_id: sessionId, category_key: "code", category_description: "Programming and debugging" },
      ],
    });
    classifier.setDefault({ status: 500 });
    const sub = subHits(), br = bridge.completions.length;
    const r = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "code please" }] });
    expect(r.status).toBe(200);
    expect([subHits() - sub, bridge.completions.length - br]).toEqual([0, 1]);
    classifier.setDefault({});
  });

  test("CONTRACT §9: a tagged request's classifier call carries the request's tags, as its own records do", async () => {
    const { rawKey, key } = await classifierKey();
    classifier.setDefault({ content: "chat" });
    const r = await w.gw.call("/v1/chat/completions", { token: rawKey, body: { model: "gpt-5", messages: [{ role: "user", content: "tag me" }] }, headers: { "x-gateway-tags": "routed" } });
    expect(r.status).toBe(200);
    const rows = await usageOf(w.gw, key.id);
    expect(rows.map((x) => x.endpoint).sort()).toEqual(["chat", "classifier"]);
    for (const row of rows) expect(row.tags).toEqual(["routed"]);
    classifier.setDefault({});
  });

  test("the classifier call is metered: a usage record with endpoint classifier, its cost counted against the key's budget", async () => {
    const { rawKey, key } = await classifierKey({ monthly_budget_usd: 100 });
    classifier.setDefault({ content: "chat", prompt_tokens: 1000, completion_tokens: 10 });
    const r = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "meter me" }] });
    expect(r.status).toBe(200);
    const rows = await usageOf(w.gw, key.id);
    const cls = rows.filter((x) => x.endpoint === "classifier");
    expect(cls.length).toBe(1);
    expect(cls[0]!.provider).toBe("openai");
    expect(cls[0]!.model).toBe("gpt-4o-mini");
    expect(cls[0]!.promptTokens).toBe(1000);
    expect(cls[0]!.outcome).toBe("ok");
    expect(cls[0]!.costUsd).toBeGreaterThan(0);
    // The key's spend is every record's cost: the classifier call's, and the request's own.
    const total = rows.filter((x) => !x.seat).reduce((a, x) => a + x.costUsd, 0);
    const spend = await eventually(async () => {
      const info = await w.gw.call("/v1/key", { token: rawKey });
      const s = info.body.budget.current_month_spend_usd as number;
      return Math.abs(s - total) < 1e-9 ? s : null;
    }, 3000, "the classifier cost in the key's spend");
    expect(spend).toBeGreaterThanOrEqual(cls[0]!.costUsd);
    classifier.setDefault({});
  });

  test("CONTRACT §7 budget as a ceiling: the classifier's call is reserved before it is sent; when the request's own reservation took what remained, classification is skipped, never paid past the budget", async () => {
    // Both lanes are priced OpenAI lanes on the same mock. The request's worst case (1,000 output
    // tokens of gpt-4o) is more than the budget, so its admission grants the whole remainder and
    // lowers its output limit; nothing is left for even the classifier's prompt.
    const { rawKey, key } = await createKey(w.gw, w.account.token, {
      mode: "classifier",
      classifier_provider: "openai",
      classifier_model: "gpt-4o-mini",
      classifier_instructions: "Send programming work to code and everything else to chat.",
      monthly_budget_usd: 0.005,
      providers: [
        { provider: "openai", credential_id: oldestCred, model: "gpt-4o-mini", category_key: "code", category_description: "Programming" },
        { provider: "openai", credential_id: newerCred, model: "gpt-4o", category_key: "chat", category_description: "Conversation" },
      ],
    });
    classifier.setDefault({ content: "chat" });
    const before = classifier.received.length;
    const r = await chat(w.gw, rawKey, { model: "gpt-4o", max_tokens: 1000, messages: [{ role: "user", content: "x".repeat(100) }] });
    expect(r.status).toBe(200);
    // One upstream call, the request's own, on the first lane (its saved key; chain order kept,
    // though the classifier would have answered "chat"): no classifier call.
    const sent = classifier.received.slice(before).filter((x) => x.path.endsWith("/chat/completions"));
    expect(sent.length).toBe(1);
    expect(sent[0]!.headers.authorization).toBe("Bearer sk-classifier-oldest-000000");
    expect(sent[0]!.body.max_tokens).toBeLessThan(1000);
    const rows = await usageOf(w.gw, key.id);
    expect(rows.filter((x) => x.endpoint === "classifier")).toEqual([]);
    const info = await w.gw.call("/v1/key", { token: rawKey });
    expect(info.body.budget.current_month_spend_usd).toBeLessThanOrEqual(0.005);
    classifier.setDefault({});
  });
});
