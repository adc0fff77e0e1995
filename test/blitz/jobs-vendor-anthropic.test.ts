// Batch work on Anthropic's Message Batches (CONTRACT §9 "Batch work"): a /blitz job with
// `completion_window: "24h"` on a key whose first lane is an anthropic lane is written as Messages
// params (the codec a live chat request on that lane goes through), sent as one message batch,
// polled until it ended, and its results read back as chat completions: one usage record per item
// at half the catalog price, the key's month counter equal to their sum; an errored line is
// retried live once; a cancelled job cancels the vendor batch. The OpenAI Batch API facade sends
// its chat lines the same way, and runs the lines Message Batches cannot answer live.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI, { toFile } from "openai";
import { like } from "drizzle-orm";
import { storesLabel } from "../helpers/gateway.ts";
import { jobResults, jobWhenEnded } from "../helpers/blitz-jobs.ts";
import { addRoutingKey, keyContextOf, lane, startRelayWorld, usageRows, type RelayWorld } from "../helpers/relay-world.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { monthSpendUsd } from "../../src/money/counters.ts";
import { relayDeps } from "../../src/relay/relay-deps.ts";
import { priceUsd } from "../../src/money/pricing.ts";

const MODEL = "claude-haiku-4-5";
const user = (content: string) => ({ messages: [{ role: "user", content }] });

describe(`/blitz/jobs on Anthropic Message Batches (${storesLabel})`, () => {
  let w: RelayWorld<"anthropic" | "openai">;
  beforeAll(async () => { w = await startRelayWorld({ providers: ["anthropic", "openai"] }); }, 60_000);
  afterAll(async () => { await w?.stop(); }, 60_000);

  const anthropicFirst = (extra = {}) =>
    addRoutingKey(w.gw, w.acct.id, { lanes: [lane("anthropic", w.cred.anthropic.id, { model: MODEL }), lane("openai", w.cred.openai.id, { model: "gpt-4o-mini" })], ...extra });
  const recordsOf = (jobId: string) => usageRows(w.gw, like(usageRecords.requestId, `${jobId}.%`));
  const allResults = (token: string, id: string) => jobResults(w.gw, token, id);
  const waitEnded = (token: string, id: string) => jobWhenEnded(w.gw, token, id);

  const liveMessages = (tag: string) => w.up.anthropic.received.filter((x) => x.path === "/v1/messages" && JSON.stringify(x.body).includes(tag)).length;
  const batchesWith = (tag: string) => [...w.up.anthropic.batch.batches.values()].filter((b) => JSON.stringify(b.requests).includes(tag));

  test("CONTRACT §9 batch work: an anthropic-lane job goes through Message Batches at half the live price, its answers in the chat shape, one record per item, the key's spend equal to their sum", async () => {
    w.up.anthropic.batch.setOptions({});
    const key = await anthropicFirst({ monthlyBudgetUsd: 100 });
    const n = 300;
    const prompts = Array.from({ length: n }, (_, i) => user(`AB1 p${i}`));
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: MODEL, max_tokens: 60, completion_window: "24h", prompts } });
    expect(r.status).toBe(202);
    const done = await waitEnded(key.raw, r.body.id);
    expect(done.status).toBe("completed");
    expect(done.progress.succeeded).toBe(n);
    // One message batch, written as Messages params with the lane's model and max_tokens; nothing live.
    const [batch, ...more] = batchesWith("AB1 p");
    expect(more).toHaveLength(0);
    expect(batch.requests).toHaveLength(n);
    expect(batch.requests[0].params).toMatchObject({ model: MODEL, max_tokens: 60, messages: [{ role: "user" }] });
    expect(liveMessages("AB1 p")).toBe(0);
    const results = await allResults(key.raw, r.body.id);
    expect(results).toHaveLength(n);
    expect(results.every((x) => x.mode === "batch" && x.state === "succeeded")).toBe(true);
    const first = results.find((x) => x.index === 7)!;
    expect(first.completion.object).toBe("chat.completion");
    expect(first.completion.choices[0].message.content).toBe("anthropic answer to: AB1 p7");
    const rows = await recordsOf(r.body.id);
    expect(rows).toHaveLength(n);
    expect(new Set(rows.map((x) => x.requestId)).size).toBe(n);
    for (const x of rows) {
      expect(x.provider).toBe("anthropic");
      const live = priceUsd("anthropic", MODEL, { prompt_tokens: x.promptTokens, completion_tokens: x.completionTokens, cached_tokens: 0, cache_write_tokens: 0 }, null).usd;
      expect(live).toBeGreaterThan(0);
      expect(x.costUsd).toBeCloseTo(live / 2, 12);
    }
    const sum = rows.reduce((a, x) => a + x.costUsd, 0);
    expect(done.cost_usd).toBeCloseTo(sum, 9);
    const spent = await monthSpendUsd(relayDeps(w.gw.ctx), (await keyContextOf(w.gw, key.raw))!);
    expect(spent.usd).toBeCloseTo(sum, 6);
  }, 90_000);

  test("CONTRACT §9 batch work: a line Message Batches errored is retried live once (there on the anthropic lane), charged at the live price; the others stay at the batch price", async () => {
    w.up.anthropic.batch.setOptions({});
    const key = await anthropicFirst({ monthlyBudgetUsd: 100 });
    const prompts = Array.from({ length: 20 }, (_, i) => user(i === 4 ? `AB2 p${i} [batch-error]` : `AB2 p${i}`));
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: MODEL, max_tokens: 60, mode: "batch", prompts } });
    expect(r.status).toBe(202);
    const done = await waitEnded(key.raw, r.body.id);
    expect(done.progress.succeeded).toBe(20);
    const results = await allResults(key.raw, r.body.id);
    expect(results.filter((x) => x.mode === "live").map((x) => x.index)).toEqual([4]);
    expect(liveMessages("AB2 p4")).toBe(1);
    const rows = await recordsOf(r.body.id);
    // The errored line's $0 record, and its live retry's record; one ok record per item.
    const ok = rows.filter((x) => x.outcome === "ok");
    expect(ok).toHaveLength(20);
    expect(new Set(ok.map((x) => x.requestId)).size).toBe(20);
    const livePrice = (x: (typeof rows)[number]) => priceUsd("anthropic", MODEL, { prompt_tokens: x.promptTokens, completion_tokens: x.completionTokens, cached_tokens: 0, cache_write_tokens: 0 }, null).usd;
    for (const x of ok) expect(x.costUsd).toBeCloseTo(livePrice(x) * (x.requestId === `${r.body.id}.4` ? 1 : 0.5), 12);
    const failedLine = rows.filter((x) => x.requestId === `${r.body.id}.4` && x.outcome !== "ok");
    expect(failedLine).toHaveLength(1);
    expect(failedLine[0]!.costUsd).toBe(0);
    const spent = await monthSpendUsd(relayDeps(w.gw.ctx), (await keyContextOf(w.gw, key.raw))!);
    expect(spent.usd).toBeCloseTo(rows.reduce((a, x) => a + x.costUsd, 0), 6);
  }, 90_000);

  test("CONTRACT §9 batch work: a results_url off the lane's origin is never followed; the items run live instead of waiting forever", async () => {
    w.up.anthropic.batch.setOptions({ foreignResults: true });
    const key = await anthropicFirst({ monthlyBudgetUsd: 100 });
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: MODEL, max_tokens: 60, completion_window: "24h", prompts: Array.from({ length: 4 }, (_, i) => user(`AB6 p${i}`)) } });
    expect(r.status).toBe(202);
    const done = await waitEnded(key.raw, r.body.id);
    w.up.anthropic.batch.setOptions({});
    expect(done.status).toBe("completed");
    expect(done.progress.succeeded).toBe(4);
    expect((await allResults(key.raw, r.body.id)).every((x) => x.mode === "live")).toBe(true);
    expect(liveMessages("AB6 p")).toBe(4);
    expect(await recordsOf(r.body.id)).toHaveLength(4);
  }, 60_000);

  test("CONTRACT §9 batch work: cancelling a job on Message Batches cancels the vendor batch; its unanswered items end cancelled at $0", async () => {
    w.up.anthropic.batch.setOptions({ hold: true });
    const key = await anthropicFirst({ monthlyBudgetUsd: 100 });
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: MODEL, max_tokens: 60, completion_window: "24h", prompts: Array.from({ length: 10 }, (_, i) => user(`AB3 p${i}`)) } });
    expect(r.status).toBe(202);
    for (const until = Date.now() + 30_000; !batchesWith("AB3 p").length; await Bun.sleep(50)) if (Date.now() > until) throw new Error("no vendor batch");
    const c = await w.gw.call(`/blitz/jobs/${r.body.id}`, { method: "DELETE", token: key.raw });
    expect(c.body.status).toBe("cancelled");
    const done = await waitEnded(key.raw, r.body.id);
    expect(done.status).toBe("cancelled");
    expect(batchesWith("AB3 p")[0].cancel_initiated_at).not.toBeNull();
    const results = await allResults(key.raw, r.body.id);
    expect(results.every((x) => x.state === "cancelled" && x.cost_usd === 0)).toBe(true);
    expect(liveMessages("AB3 p")).toBe(0);
    w.up.anthropic.batch.setOptions({});
  }, 60_000);

  test("CONTRACT §9 batch work: /v1/batches on an anthropic first lane sends chat lines to Message Batches and answers them as chat completions; /v1/responses lines run live", async () => {
    w.up.anthropic.batch.setOptions({});
    const key = await anthropicFirst({ monthlyBudgetUsd: 100 });
    const c = new OpenAI({ apiKey: key.raw, baseURL: `${w.gw.url}/v1`, maxRetries: 0 });
    const ended = async (id: string) => {
      for (const until = Date.now() + 60_000; ; await Bun.sleep(100)) {
        const b = await c.batches.retrieve(id);
        if (["completed", "cancelled", "failed", "expired"].includes(b.status)) return b;
        if (Date.now() > until) throw new Error(`batch did not end: ${JSON.stringify(b)}`);
      }
    };
    const chat = Array.from({ length: 12 }, (_, i) => JSON.stringify({ custom_id: `c-${i}`, method: "POST", url: "/v1/chat/completions", body: { model: MODEL, max_tokens: 30, messages: [{ role: "user", content: `AB4 p${i}` }] } }));
    const f = await c.files.create({ file: await toFile(Buffer.from(chat.join("\n")), "c.jsonl"), purpose: "batch" });
    const done = await ended((await c.batches.create({ input_file_id: f.id, endpoint: "/v1/chat/completions", completion_window: "24h" })).id);
    expect(done.request_counts).toEqual({ total: 12, completed: 12, failed: 0 });
    const out = (await (await c.files.content(done.output_file_id!)).text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
    expect(out.map((l) => l.custom_id)).toEqual(Array.from({ length: 12 }, (_, i) => `c-${i}`));
    expect(out.every((l) => l.mode === "batch" && l.response.body.object === "chat.completion")).toBe(true);
    expect(out[3].response.body.choices[0].message.content).toBe("anthropic answer to: AB4 p3");
    expect(batchesWith("AB4 p")).toHaveLength(1);
    expect(liveMessages("AB4 p")).toBe(0);
    const rows = await recordsOf(done.id);
    expect(rows).toHaveLength(12);
    expect(rows.every((r) => r.endpoint === "batch" && r.provider === "anthropic")).toBe(true);

    const resp = [JSON.stringify({ custom_id: "r-0", method: "POST", url: "/v1/responses", body: { model: MODEL, input: "AB5 q", max_output_tokens: 30 } })];
    const rf = await c.files.create({ file: await toFile(Buffer.from(resp.join("\n")), "r.jsonl"), purpose: "batch" });
    const rdone = await ended((await c.batches.create({ input_file_id: rf.id, endpoint: "/v1/responses", completion_window: "24h" })).id);
    expect(rdone.request_counts).toEqual({ total: 1, completed: 1, failed: 0 });
    const [line] = (await (await c.files.content(rdone.output_file_id!)).text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
    expect(line.mode).toBe("live");
    expect(line.response.body.object).toBe("response");
    expect(batchesWith("AB5 q")).toHaveLength(0);
    expect(liveMessages("AB5 q")).toBe(1);
  }, 90_000);
});
