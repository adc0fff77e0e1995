// Batch work on Gemini batch mode (CONTRACT §9 "Batch work"): a /blitz job with
// `completion_window: "24h"` on a key whose first lane is a google lane is written as
// GenerateContentRequests (the codec a live chat request on that lane goes through), sent inline
// as one batch of the lane's model, polled until it succeeded, and its inlined responses read back
// as chat completions: one usage record per item at half the catalog price, the key's month counter
// equal to their sum; a request the batch failed is retried live once; a cancel cancels the batch.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { like } from "drizzle-orm";
import { storesLabel } from "../helpers/gateway.ts";
import { addRoutingKey, keyContextOf, lane, startRelayWorld, usageRows, type RelayWorld } from "../helpers/relay-world.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { monthSpendUsd } from "../../src/money/counters.ts";
import { relayDeps } from "../../src/relay/relay-deps.ts";
import { priceUsd } from "../../src/money/pricing.ts";

const MODEL = "gemini-2.5-flash";
const user = (content: string) => ({ messages: [{ role: "user", content }] });

describe(`/blitz/jobs on Gemini batch mode (${storesLabel})`, () => {
  let w: RelayWorld<"google">;
  beforeAll(async () => { w = await startRelayWorld({ providers: ["google"] }); }, 60_000);
  afterAll(async () => { await w?.stop(); }, 60_000);

  const googleKey = () => addRoutingKey(w.gw, w.acct.id, { lanes: [lane("google", w.cred.google.id, { model: MODEL })], monthlyBudgetUsd: 100 });
  const recordsOf = (jobId: string) => usageRows(w.gw, like(usageRecords.requestId, `${jobId}.%`));
  async function waitEnded(token: string, id: string, ms = 60_000) {
    for (const until = Date.now() + ms; ; await Bun.sleep(100)) {
      const r = await w.gw.call(`/blitz/jobs/${id}?limit=1000`, { token });
      if (!["queued", "running"].includes(r.body.status) && r.body.progress.remaining === 0) return r.body;
      if (Date.now() > until) throw new Error(`job did not end: ${JSON.stringify(r.body).slice(0, 500)}`);
    }
  }
  const batchesWith = (tag: string) => [...w.up.google.batch.batches.values()].filter((b) => JSON.stringify(b.requests).includes(tag));
  const live = (tag: string) => w.up.google.received.filter((x) => x.path.endsWith(":generateContent") && JSON.stringify(x.body).includes(tag)).length;
  const livePrice = (x: { promptTokens: number; completionTokens: number }) =>
    priceUsd("google", MODEL, { prompt_tokens: x.promptTokens, completion_tokens: x.completionTokens, cached_tokens: 0, cache_write_tokens: 0 }, null).usd;

  test("CONTRACT §9 batch work: a google-lane job goes through Gemini batch mode at half the live price, answered as chat completions; a failed request is retried live once; the key's spend is the records' sum", async () => {
    w.up.google.batch.setOptions({});
    const key = await googleKey();
    const n = 40;
    const prompts = Array.from({ length: n }, (_, i) => user(i === 9 ? `GB1 p${i} [batch-error]` : `GB1 p${i}`));
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: MODEL, max_tokens: 60, completion_window: "24h", prompts } });
    expect(r.status).toBe(202);
    const done = await waitEnded(key.raw, r.body.id);
    expect(done.status).toBe("completed");
    expect(done.progress.succeeded).toBe(n);
    // One batch of the lane's model, every request inline with its item's key; only the failed one ran live.
    const [batch, ...more] = batchesWith("GB1 p");
    expect(more).toHaveLength(0);
    expect(batch.model).toBe(`models/${MODEL}`);
    expect(batch.requests).toHaveLength(n);
    expect(batch.requests[3]).toMatchObject({ metadata: { key: "3" }, request: { contents: [{ role: "user", parts: [{ text: "GB1 p3" }] }], generationConfig: { maxOutputTokens: 60 } } });
    expect(live("GB1 p")).toBe(1);
    const results = done.results as any[];
    expect(results.filter((x) => x.mode === "live").map((x) => x.index)).toEqual([9]);
    expect(results[3].completion.object).toBe("chat.completion");
    expect(results[3].completion.choices[0].message.content).toBe("gemini answer to: GB1 p3");
    const rows = await recordsOf(r.body.id);
    const ok = rows.filter((x) => x.outcome === "ok");
    expect(ok).toHaveLength(n);
    expect(new Set(ok.map((x) => x.requestId)).size).toBe(n);
    for (const x of ok) {
      expect(livePrice(x)).toBeGreaterThan(0);
      expect(x.costUsd).toBeCloseTo(livePrice(x) * (x.requestId === `${r.body.id}.9` ? 1 : 0.5), 12);
    }
    expect(rows.filter((x) => x.outcome !== "ok").map((x) => [x.requestId, x.costUsd])).toEqual([[`${r.body.id}.9`, 0]]);
    const spent = await monthSpendUsd(relayDeps(w.gw.ctx), (await keyContextOf(w.gw, key.raw))!);
    expect(spent.usd).toBeCloseTo(rows.reduce((a, x) => a + x.costUsd, 0), 6);
  }, 90_000);

  test("CONTRACT §9 batch work: cancelling a job on Gemini batch mode cancels the batch; nothing runs live, nothing is charged", async () => {
    w.up.google.batch.setOptions({ hold: true });
    const key = await googleKey();
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: MODEL, max_tokens: 60, mode: "batch", prompts: Array.from({ length: 6 }, (_, i) => user(`GB2 p${i}`)) } });
    expect(r.status).toBe(202);
    for (const until = Date.now() + 30_000; !batchesWith("GB2 p").length; await Bun.sleep(50)) if (Date.now() > until) throw new Error("no vendor batch");
    const c = await w.gw.call(`/blitz/jobs/${r.body.id}`, { method: "DELETE", token: key.raw });
    expect(c.body.status).toBe("cancelled");
    const done = await waitEnded(key.raw, r.body.id);
    expect(done.status).toBe("cancelled");
    expect(batchesWith("GB2 p")[0].state).toBe("BATCH_STATE_CANCELLED");
    expect((done.results as any[]).every((x) => x.state === "cancelled" && x.cost_usd === 0)).toBe(true);
    expect(live("GB2 p")).toBe(0);
    expect((await recordsOf(r.body.id)).every((x) => x.costUsd === 0)).toBe(true);
    w.up.google.batch.setOptions({});
  }, 60_000);
});
