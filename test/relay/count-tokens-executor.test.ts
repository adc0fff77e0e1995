// POST /v1/messages/count_tokens runs on the one upstream executor (attempt.ts, lane-runner.ts)
// with a count as its operation (docs/api.md): exact from a counting lane, the marked estimate
// from the first lane that serves but cannot count, the upstream timeout and fallback of every
// other call, and free: no usage record, no budget reserved.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { monthSpendUsd } from "../../src/money/counters.ts";
import { estimateInputTokens } from "../../src/relay/count-tokens.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { keyContextOf } from "../helpers/relay-world.ts";
import { startMockAnthropic, type MockAnthropic } from "../mocks/anthropic-upstream.ts";
import { addCredential, addRoutingKey, lane } from "./fixtures.ts";

const body = { model: "claude-haiku-4-5", messages: [{ role: "user", content: "count these words" }] };

describe(`count_tokens on the upstream executor (${storesLabel})`, () => {
  let gw: TestGateway;
  let slow: TestGateway;
  let M: MockAnthropic;
  let silent: ReturnType<typeof Bun.serve>;
  beforeAll(async () => {
    M = await startMockAnthropic();
    // An Anthropic upstream that accepts the connection and never answers.
    silent = Bun.serve({ port: 0, hostname: "127.0.0.1", idleTimeout: 30, fetch: () => new Promise<Response>(() => {}) });
    gw = await startTestGateway({ PROVIDER_ANTHROPIC_BASE_URL: M.url });
    slow = await startTestGateway({ PROVIDER_ANTHROPIC_BASE_URL: `http://127.0.0.1:${silent.port}`, UPSTREAM_TIMEOUT_SECONDS: "1" });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await slow?.stop();
    await M?.stop();
    silent?.stop(true);
  }, 60_000);

  test("docs/api.md count_tokens, CONTRACT §7: an exact count on a budgeted key writes no usage record and leaves the month's spend at 0", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "anthropic", M.apiKey);
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("anthropic", cred.id)], monthlyBudgetUsd: 5 });
    const r = await gw.call("/v1/messages/count_tokens", { token: k.raw, headers: { "anthropic-version": "2023-06-01" }, body });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-token-count")).toBe("exact");
    expect(r.body.input_tokens).toBeGreaterThan(0);
    expect(M.served.at(-1)!.path).toBe("/v1/messages/count_tokens");
    await gw.ctx.services.usage.flush();
    await gw.ctx.services.settleBatcher.flush();
    expect(await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, k.id))).toEqual([]);
    const key = await keyContextOf(gw, k.raw);
    expect((await monthSpendUsd(gw.ctx, key)).usd).toBe(0);
  });

  test("docs/api.md count_tokens: an Anthropic lane past the upstream timeout fails over; the next lane, which cannot count, answers the marked estimate", async () => {
    const acct = await createAccount(slow);
    const ant = await addCredential(slow, acct.id, "anthropic", "sk-ant-test-000000000000");
    const oai = await addCredential(slow, acct.id, "openai", "sk-test-000000000000");
    const k = await addRoutingKey(slow, acct.id, { lanes: [lane("anthropic", ant.id), lane("openai", oai.id)] });
    const r = await slow.call("/v1/messages/count_tokens", { token: k.raw, body });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-token-count")).toBe("estimated");
    expect(r.body).toEqual({ input_tokens: estimateInputTokens(body) });
  });

  test("docs/api.md count_tokens: a key whose only lane times out answers 502 upstream_error naming the timeout", async () => {
    const acct = await createAccount(slow);
    const ant = await addCredential(slow, acct.id, "anthropic", "sk-ant-test-000000000000");
    const k = await addRoutingKey(slow, acct.id, { lanes: [lane("anthropic", ant.id)] });
    const r = await slow.call("/v1/messages/count_tokens", { token: k.raw, body });
    expect(r.status).toBe(502);
    expect(r.body.type).toBe("error");
    expect(r.body.error.message).toContain("did not answer within 1 s");
  });
});
