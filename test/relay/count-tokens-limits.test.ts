// count_tokens goes through rate-limit admission as a request without tokens (CONTRACT §8 rate
// limits): a key already over its rpm_limit answers 429 and makes no upstream call.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockAnthropic, type MockAnthropic } from "../mocks/anthropic-upstream.ts";
import { addCredential, addRoutingKey, lane } from "./fixtures.ts";

describe(`count_tokens and rate limits (${storesLabel})`, () => {
  let gw: TestGateway;
  let M: MockAnthropic;
  beforeAll(async () => {
    M = await startMockAnthropic();
    gw = await startTestGateway({ PROVIDER_ANTHROPIC_BASE_URL: M.url });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await M?.stop();
  }, 60_000);

  test("CONTRACT §8: count_tokens counts as a request against rpm_limit; over it, 429 and no upstream call", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "anthropic", M.apiKey);
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("anthropic", cred.id)], rpmLimit: 2 });
    const count = () => gw.call("/v1/messages/count_tokens", { token: k.raw, headers: { "anthropic-version": "2023-06-01" }, body: { model: "claude-haiku-4-5", messages: [{ role: "user", content: "hi" }] } });
    const before = M.received.length;
    expect((await count()).status).toBe(200);
    expect((await count()).status).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await count()).status);
    expect(statuses.every((s) => s === 429)).toBe(true);
    expect(M.received.length - before).toBe(2);
  });
});
