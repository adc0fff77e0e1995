// CONTRACT §8: when every lane refused the request for a reason the client must fix, the client
// gets that 4xx in its own protocol (never a 5xx its SDK retries); a vendor refusing the saved
// key is the operator's failure, 502 upstream_auth_failed naming the lane, not retried by SDKs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { storesLabel, type TestGateway } from "../helpers/gateway.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { addRoutingKey, chatBody, lane, startOpenAIGroqWorld } from "./fixtures.ts";

describe(`client-fix errors (${storesLabel})`, () => {
  let gw: TestGateway, A: MockUpstream, B: MockUpstream;
  let acct: { id: string; token: string };
  let credA: { id: string }, credB: { id: string };

  beforeAll(async () => {
    ({ gw, A, B, acct, credA, credB } = await startOpenAIGroqWorld());
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await Promise.all([A?.stop(), B?.stop()]);
  }, 60_000);

  const bothLanes = () => addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id), lane("groq", credB.id)] });

  test("CONTRACT §8: an unknown model on every lane is 404 model_not_found on chat, plain and streamed, and the openai SDK does not retry it", async () => {
    const key = await bothLanes();
    A.setDefault({ unknown_model: true });
    B.setDefault({ unknown_model: true });
    try {
      for (const stream of [false, true]) {
        const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ model: "gpt-4o-minii", stream }) });
        expect(r.status).toBe(404);
        expect(r.body.error).toMatchObject({ type: "invalid_request_error", code: "model_not_found", param: null });
        expect(r.body.error.message).toContain("gpt-4o-minii");
        expect(r.body.error.message).not.toContain("Retry later");
      }
      const a0 = A.received.length;
      const client = new OpenAI({ apiKey: key.raw, baseURL: `${gw.url}/v1` });
      const err = await client.chat.completions.create({ model: "gpt-4o-minii", messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect(err.code).toBe("model_not_found");
      expect(A.received.length).toBe(a0 + 1); // one client call, one upstream call: no SDK retry
    } finally {
      A.setDefault({});
      B.setDefault({});
    }
  });

  test("CONTRACT §8: the same unknown model is 404 on /v1/responses and Anthropic's not_found_error on /v1/messages", async () => {
    const key = await bothLanes();
    A.setDefault({ unknown_model: true });
    B.setDefault({ unknown_model: true });
    try {
      const resp = await gw.call("/v1/responses", { token: key.raw, body: { model: "gpt-4o-minii", input: "hi" } });
      expect(resp.status).toBe(404);
      expect(resp.body.error.code).toBe("model_not_found");
      const msg = await gw.call("/v1/messages", { token: key.raw, body: { model: "claude-nope", max_tokens: 16, messages: [{ role: "user", content: "hi" }] } });
      expect(msg.status).toBe(404);
      expect(msg.body.type).toBe("error");
      expect(msg.body.error.type).toBe("not_found_error");
      expect(msg.body.error.message).toContain("claude-nope");
      const client = new Anthropic({ apiKey: key.raw, baseURL: gw.url });
      const err = await client.messages.create({ model: "claude-nope", max_tokens: 16, messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
      expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    } finally {
      A.setDefault({});
      B.setDefault({});
    }
  });

  test("CONTRACT §8: an unknown model on one lane while the other serves is a 200 from the other", async () => {
    const key = await bothLanes();
    A.setDefault({ unknown_model: true });
    try {
      expect((await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ model: "llama-x" }) })).status).toBe(200);
    } finally {
      A.setDefault({});
    }
  });

  test("CONTRACT §8: the vendor refusing every saved key is 502 upstream_auth_failed naming the lanes and the fix, not retried by the SDK", async () => {
    const key = await bothLanes();
    const refused = { status: 401, error: { message: "Incorrect API key provided.", type: "invalid_request_error", param: null, code: "invalid_api_key" } };
    A.setDefault(refused);
    B.setDefault(refused);
    try {
      const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
      expect(r.status).toBe(502);
      expect(r.headers.get("x-should-retry")).toBe("false");
      expect(r.body.error.code).toBe("upstream_auth_failed");
      expect(r.body.error.message).toContain("lane 1 (openai, HTTP 401)");
      expect(r.body.error.message).toContain("lane 2 (groq, HTTP 401)");
      expect(r.body.error.message).toContain("POST /v1/organizations/credentials");
      const a0 = A.received.length;
      const client = new OpenAI({ apiKey: key.raw, baseURL: `${gw.url}/v1` });
      const err = await client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
      expect(err.status).toBe(502);
      expect(A.received.length).toBe(a0 + 1); // x-should-retry: false — the SDK's 5xx retries are off
      // A refused key and an unknown model: the operator has something to fix, so still 502.
      B.setDefault({ unknown_model: true });
      const mixed = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ model: "gpt-4o-minii" }) });
      expect(mixed.status).toBe(502);
      expect(mixed.body.error.code).toBe("upstream_auth_failed");
      // A refused key on lane 1 and a lane that serves: 200, the refusal is logged, not shown.
      B.setDefault({});
      expect((await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() })).status).toBe(200);
    } finally {
      A.setDefault({});
      B.setDefault({});
    }
  });

  test("CONTRACT §8: a refused key beside a lane that is down is the ordinary 502 upstream_error (a retry may help)", async () => {
    const key = await bothLanes();
    A.setDefault({ status: 401 });
    B.setDefault({ status: 503 });
    try {
      const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
      expect(r.status).toBe(502);
      expect(r.body.error.code).toBe("upstream_error");
    } finally {
      A.setDefault({});
      B.setDefault({});
    }
  });

  test("CONTRACT §8: a lane whose own default model is unknown after the retry is the operator's failure, not a client 404", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id, { model: "gpt-retired" })] });
    A.setDefault({ unknown_model: true });
    try {
      const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ model: "gpt-4o-minii" }) });
      expect(r.status).toBe(502);
      expect(r.body.error.code).toBe("upstream_error");
    } finally {
      A.setDefault({});
    }
  });
});
