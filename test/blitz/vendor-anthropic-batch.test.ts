// The Anthropic Message Batches client (src/blitz/vendor/anthropic-batch.ts) against the mock
// upstream's Message Batches: create, the polled processing_status in_progress → ended with
// request_counts and results_url, results JSONL (succeeded, errored alone), expiry and cancel.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startMockAnthropic, type MockAnthropic } from "../mocks/anthropic-upstream.ts";
import { cancelAnthropicBatch, pollAnthropicBatch, readAnthropicResults, submitAnthropicBatch } from "../../src/blitz/vendor/anthropic-batch.ts";

let mock: MockAnthropic;
beforeAll(async () => { mock = await startMockAnthropic(); }, 10_000);
afterAll(async () => { await mock.stop(); }, 10_000);

const reqs = (n: number, failAt: number[] = []) => Array.from({ length: n }, (_, i) => ({
  customId: `i${i}`,
  params: { model: "claude-3-5-haiku-latest", max_tokens: 10, messages: [{ role: "user", content: `q${i}` }], ...(failAt.includes(i) ? { mock: { status: 500 } } : {}) },
}));

async function untilEnded(id: string) {
  for (let i = 0; i < 20; i++) {
    const s = await pollAnthropicBatch(mock.url, mock.apiKey, id);
    if (s.ended) return s;
  }
  throw new Error("batch did not end");
}

describe("Anthropic Message Batches client on the mock", () => {
  test("a batch ends with a results_url; every request comes back once, an errored one alone", async () => {
    mock.batch.setOptions({});
    const id = await submitAnthropicBatch(mock.url, mock.apiKey, reqs(200, [3]));
    expect(id).toMatch(/^msgbatch_/);
    const s = await untilEnded(id);
    expect(s.outputFileId).toContain(`/v1/messages/batches/${id}/results`);
    const lines = await Array.fromAsync(readAnthropicResults(mock.url, mock.apiKey, s));
    expect(lines).toHaveLength(200);
    expect(lines.filter((l) => l.outcome === "errored").map((l) => l.customId)).toEqual(["i3"]);
    expect((lines[0]!.body as any).usage.input_tokens).toBeGreaterThan(0);
    expect(mock.batch.batches.get(id).request_counts).toEqual({ processing: 0, succeeded: 199, errored: 1, canceled: 0, expired: 0 });
  });

  test("an expired batch reports its requests expired; a cancelled one canceled", async () => {
    mock.batch.setOptions({ expire: true });
    const s = await untilEnded(await submitAnthropicBatch(mock.url, mock.apiKey, reqs(5)));
    expect((await Array.fromAsync(readAnthropicResults(mock.url, mock.apiKey, s))).map((l) => l.outcome)).toEqual(Array(5).fill("expired"));
    mock.batch.setOptions({ hold: true });
    const id = await submitAnthropicBatch(mock.url, mock.apiKey, reqs(4));
    await cancelAnthropicBatch(mock.url, mock.apiKey, id);
    const c = await untilEnded(id);
    expect((await Array.fromAsync(readAnthropicResults(mock.url, mock.apiKey, c))).map((l) => l.outcome)).toEqual(Array(4).fill("canceled"));
    mock.batch.setOptions({});
  });

  test("a wrong key is a 401 without the key in the error; a bad request is a 400", async () => {
    const e = await submitAnthropicBatch(mock.url, "sk-ant-wrong-secret", reqs(1)).catch((x) => x);
    expect(e.status).toBe(401);
    expect(String(e.message)).not.toContain("sk-ant-wrong-secret");
    const bad = await submitAnthropicBatch(mock.url, mock.apiKey, [{ customId: "has space", params: { model: "m", max_tokens: 1, messages: [] } }]).catch((x) => x);
    expect(bad.status).toBe(400);
  });
});
