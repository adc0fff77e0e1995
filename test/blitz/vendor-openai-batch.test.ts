// The OpenAI Batch API client (src/blitz/vendor/openai-batch.ts) against the mock upstream's
// Batch API, which the official `openai` SDK also drives: upload, create, the polled status walk
// validating → in_progress → finalizing → completed, output and error files, a line that fails
// alone, expiry (unanswered lines as batch_expired) and cancel.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI, { toFile } from "openai";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { cancelOpenAIBatch, pollOpenAIBatch, readOpenAIResults, submitOpenAIBatch } from "../../src/blitz/vendor/openai-batch.ts";

let mock: MockUpstream;
beforeAll(async () => { mock = await startMockOpenAI(); }, 10_000);
afterAll(async () => { await mock.stop(); }, 10_000);

const lines = (n: number, failAt: number[] = []) =>
  Array.from({ length: n }, (_, i) => ({
    customId: String(i),
    body: { model: "gpt-4o-mini", max_tokens: 10, messages: [{ role: "user", content: `q${i}` }], ...(failAt.includes(i) ? { mock: { status: 500 } } : {}) },
  }));

async function untilEnded(id: string) {
  const seen: string[] = [];
  for (let i = 0; i < 20; i++) {
    const s = await pollOpenAIBatch(mock.url, "sk-test", id);
    seen.push(s.status);
    if (s.ended) return { s, seen };
  }
  throw new Error(`batch ${id} did not end: ${seen.join(",")}`);
}

describe("OpenAI Batch API client on the mock", () => {
  test("a batch walks validating → in_progress → finalizing → completed; every line comes back once, a failed line in the error file", async () => {
    mock.batch.setOptions({});
    const uploads = mock.batch.uploads;
    const id = await submitOpenAIBatch(mock.url, "sk-test", "/v1/chat/completions", lines(300, [7, 150]));
    expect(mock.batch.uploads).toBe(uploads + 1);
    const { s, seen } = await untilEnded(id);
    expect(seen).toEqual(["in_progress", "finalizing", "completed"]);
    const results = await Array.fromAsync(readOpenAIResults(mock.url, "sk-test", s));
    expect(results.length).toBe(300);
    expect(new Set(results.map((r) => r.customId)).size).toBe(300);
    const failed = results.filter((r) => r.outcome !== "succeeded").map((r) => r.customId).sort();
    expect(failed).toEqual(["150", "7"]);
    const ok = results.find((r) => r.customId === "0")!;
    expect((ok.body as any).usage.prompt_tokens).toBeGreaterThan(0);
    expect(results.find((r) => r.customId === "7")!.status).toBe(500);
  });

  test("an expired batch returns its unanswered lines as expired", async () => {
    mock.batch.setOptions({ expire: true, answerBeforeExpiry: 40 });
    const id = await submitOpenAIBatch(mock.url, "sk-test", "/v1/chat/completions", lines(100));
    const { s } = await untilEnded(id);
    expect(s.status).toBe("expired");
    const results = await Array.fromAsync(readOpenAIResults(mock.url, "sk-test", s));
    expect(results.filter((r) => r.outcome === "succeeded").length).toBe(40);
    expect(results.filter((r) => r.outcome === "expired").length).toBe(60);
    mock.batch.setOptions({});
  });

  test("cancel ends the batch as cancelled, its lines as canceled", async () => {
    const id = await submitOpenAIBatch(mock.url, "sk-test", "/v1/chat/completions", lines(5));
    await cancelOpenAIBatch(mock.url, "sk-test", id);
    const { s } = await untilEnded(id);
    expect(s.status).toBe("cancelled");
    const results = await Array.fromAsync(readOpenAIResults(mock.url, "sk-test", s));
    expect(results.map((r) => r.outcome)).toEqual(Array(5).fill("canceled"));
  });

  test("the official SDK drives the mock's Batch API", async () => {
    const client = new OpenAI({ apiKey: "sk-test", baseURL: mock.url });
    const body = lines(3).map((l) => JSON.stringify({ custom_id: l.customId, method: "POST", url: "/v1/chat/completions", body: l.body })).join("\n");
    const file = await client.files.create({ file: await toFile(Buffer.from(body), "in.jsonl"), purpose: "batch" });
    const b = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    expect(b.status).toBe("validating");
    let cur = b;
    while (!["completed", "failed", "expired", "cancelled"].includes(cur.status)) cur = await client.batches.retrieve(b.id);
    const text = await (await client.files.content(cur.output_file_id!)).text();
    expect(text.trim().split("\n").length).toBe(3);
  });

  test("an unknown batch is a 404 error, without the key in it", async () => {
    const e = await pollOpenAIBatch(mock.url, "sk-secret-value", "batch_nope").catch((x) => x);
    expect(e.status).toBe(404);
    expect(String(e.message)).not.toContain("sk-secret-value");
  });
});
