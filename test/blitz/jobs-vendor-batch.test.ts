// Batch work on a vendor batch API (CONTRACT §9 "Batch work"): a /blitz job with
// `completion_window: "24h"` on an openai lane goes to the mock's OpenAI Batch API (one upload,
// one batch, polled), is charged at half the catalog price with one usage record per item, and
// the key's month counter equals the records' sum; a budget that cannot cover the job at batch
// prices is refused with 402 before anything is uploaded; a line the vendor failed or expired is
// retried live once through the key's lanes; a job without the field runs live as before.
import { afterEach, describe, expect, test } from "bun:test";
import { eq, like } from "drizzle-orm";
import { storesLabel } from "../helpers/gateway.ts";
import { jobResults, jobWhenEnded } from "../helpers/blitz-jobs.ts";
import { keyContextOf, useBlitzWorld } from "../helpers/relay-world.ts";
import { blitzJobs, blitzVendorBatches, usageRecords } from "../../src/store/db/schema/index.ts";
import { counterKey, monthSpendUsd } from "../../src/money/counters.ts";
import { monthKey } from "../../src/lib/time.ts";
import { relayDeps } from "../../src/relay/relay-deps.ts";
import { priceUsd } from "../../src/money/pricing.ts";

const user = (content: string, mock: object = {}) => ({ messages: [{ role: "user", content }], mock });

describe(`/blitz/jobs on a vendor batch API (${storesLabel})`, () => {
  const w = useBlitzWorld();
  afterEach(() => { w.A.setDefault({}); w.A.batch.setOptions({}); }, 10_000);

  const recordsOf = (jobId: string) => w.records(like(usageRecords.requestId, `${jobId}.%`));
  const allResults = (token: string, id: string) => jobResults(w.gw, token, id);
  const waitEnded = (token: string, id: string) => jobWhenEnded(w.gw, token, id);

  const liveChats = (tag: string) => w.A.received.filter((x) => x.path === "/v1/chat/completions" && JSON.stringify(x.body).includes(tag)).length;

  test("CONTRACT §9 batch work: an openai-lane job goes through the vendor Batch API at half the live price, one record per item, the key's spend equal to their sum", async () => {
    const key = await w.oneLane({ monthlyBudgetUsd: 100 });
    const n = 400;
    const uploads = w.A.batch.uploads;
    const prompts = Array.from({ length: n }, (_, i) => user(`VB1 p${i}`, { prompt_tokens: 100, completion_tokens: 50 }));
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 60, completion_window: "24h", prompts } });
    expect(r.status).toBe(202);
    const done = await waitEnded(key.raw, r.body.id);
    expect(done.status).toBe("completed");
    expect(done.progress.succeeded).toBe(n);
    expect(w.A.batch.uploads).toBe(uploads + 1);
    expect(liveChats("VB1 p")).toBe(0);
    const results = await allResults(key.raw, r.body.id);
    expect(results).toHaveLength(n);
    expect(results.every((x) => x.mode === "batch" && x.state === "succeeded")).toBe(true);
    const rows = await recordsOf(r.body.id);
    expect(rows).toHaveLength(n);
    expect(new Set(rows.map((x) => x.requestId)).size).toBe(n);
    const live = priceUsd("openai", "gpt-4o-mini", { prompt_tokens: 100, completion_tokens: 50, cached_tokens: 0, cache_write_tokens: 0 }, null).usd;
    expect(live).toBeGreaterThan(0);
    for (const x of rows) expect(x.costUsd).toBeCloseTo(live / 2, 12);
    const sum = rows.reduce((a, x) => a + x.costUsd, 0);
    expect(done.cost_usd).toBeCloseTo(sum, 9);
    const spent = await monthSpendUsd(relayDeps(w.gw.ctx), (await keyContextOf(w.gw, key.raw))!);
    expect(spent.usd).toBeCloseTo(sum, 6);
  }, 90_000);

  test("CONTRACT §9 batch work: a budget that covers only part of the job at batch prices is refused with 402 before anything is uploaded", async () => {
    const key = await w.oneLane({ monthlyBudgetUsd: 0.0005 });
    const uploads = w.A.batch.uploads;
    const prompts = Array.from({ length: 300 }, (_, i) => user(`VB2 p${i}`));
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 1000, completion_window: "24h", prompts } });
    expect(r.status).toBe(402);
    expect(JSON.stringify(r.body)).toContain("budget_exceeded");
    expect(w.A.batch.uploads).toBe(uploads);
    expect(await w.gw.ctx.db.select().from(blitzJobs).where(eq(blitzJobs.routingKeyId, key.id))).toHaveLength(0);
  }, 30_000);

  test("CONTRACT §9 batch work: a vendor batch job holds its worst case at batch prices on the budget until its batch ends; two jobs submitted at once cannot both take what fits one", async () => {
    // Each job's worst case at batch prices: 200 prompts × max_tokens 1000 on gpt-4o-mini, halved.
    const prompts = (tag: string) => Array.from({ length: 200 }, (_, i) => user(`${tag} p${i}`, { prompt_tokens: 10, completion_tokens: 5 }));
    const body = (tag: string) => ({ model: "gpt-4o-mini", max_tokens: 1000, completion_window: "24h", prompts: prompts(tag) });
    const probe = await w.oneLane({ monthlyBudgetUsd: 1000 });
    w.A.batch.setOptions({ hold: true });
    const first = await w.gw.call("/blitz/jobs", { token: probe.raw, body: body("VH0") });
    expect(first.status).toBe(202);
    const [row] = await w.gw.ctx.db.select().from(blitzVendorBatches).where(eq(blitzVendorBatches.jobId, first.body.id));
    const held = row!.heldUsd;
    expect(held).toBeGreaterThan(0);
    const probeKey = (await keyContextOf(w.gw, probe.raw))!;
    expect((await monthSpendUsd(relayDeps(w.gw.ctx), probeKey)).usd).toBeCloseTo(held, 9);
    // The hold survives the counter's loss (Redis restarted empty): the rebuild reads it from Postgres.
    await w.gw.ctx.kv.del(counterKey(probe.id, monthKey()));
    const rebuilt = await w.gw.call("/blitz/jobs", { token: probe.raw, body: { ...body("VH1"), prompts: prompts("VH1").slice(0, 1) } });
    expect(rebuilt.status).toBe(202);
    const [row1] = await w.gw.ctx.db.select().from(blitzVendorBatches).where(eq(blitzVendorBatches.jobId, rebuilt.body.id));
    expect((await monthSpendUsd(relayDeps(w.gw.ctx), probeKey)).usd).toBeCloseTo(held + row1!.heldUsd, 9);

    // A budget that fits one such job and not two: submitted at once, exactly one is accepted.
    const key = await w.oneLane({ monthlyBudgetUsd: held * 1.5 });
    const both = await Promise.all([w.gw.call("/blitz/jobs", { token: key.raw, body: body("VH2") }), w.gw.call("/blitz/jobs", { token: key.raw, body: body("VH3") })]);
    expect(both.map((x) => x.status).sort()).toEqual([202, 402]);
    expect(JSON.stringify(both.find((x) => x.status === 402)!.body)).toContain("budget_exceeded");
    const accepted = both.find((x) => x.status === 202)!.body.id as string;

    // Once the vendor batch ends the hold is released: the spend is the records' sum, nothing more.
    w.A.batch.setOptions({});
    for (const [token, id] of [[probe.raw, first.body.id], [probe.raw, rebuilt.body.id], [key.raw, accepted]] as const) {
      const done = await waitEnded(token, id);
      expect(done.status).toBe("completed");
    }
    for (const [k, jobs] of [[probe, [first.body.id, rebuilt.body.id]], [key, [accepted]]] as const) {
      let sum = 0;
      for (const id of jobs) sum += (await recordsOf(id)).reduce((a, x) => a + x.costUsd, 0);
      expect(sum).toBeGreaterThan(0);
      expect((await monthSpendUsd(relayDeps(w.gw.ctx), (await keyContextOf(w.gw, k.raw))!)).usd).toBeCloseTo(sum, 9);
    }
    const rows = await w.gw.ctx.db.select().from(blitzVendorBatches).where(eq(blitzVendorBatches.routingKeyId, key.id));
    expect(rows.map((x) => [x.status, x.heldUsd])).toEqual([["ended", 0]]);
  }, 90_000);

  test("CONTRACT §9 batch work: lines the vendor expired are retried live once, charged at the live price; each item has one ok record", async () => {
    w.A.batch.setOptions({ expire: true, answerBeforeExpiry: 60 });
    const key = await w.oneLane({ monthlyBudgetUsd: 100 });
    const n = 200;
    const prompts = Array.from({ length: n }, (_, i) => user(`VB3 p${i}`, { prompt_tokens: 100, completion_tokens: 50 }));
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 60, mode: "batch", prompts } });
    expect(r.status).toBe(202);
    const done = await waitEnded(key.raw, r.body.id);
    expect(done.progress.succeeded).toBe(n);
    const results = await allResults(key.raw, r.body.id);
    expect(results.filter((x) => x.mode === "batch")).toHaveLength(60);
    expect(results.filter((x) => x.mode === "live")).toHaveLength(n - 60);
    expect(liveChats("VB3 p")).toBe(n - 60);
    const rows = await recordsOf(r.body.id);
    const ok = rows.filter((x) => x.outcome === "ok");
    expect(ok).toHaveLength(n);
    expect(new Set(ok.map((x) => x.requestId)).size).toBe(n);
    // The expired lines' own records: one each, at $0.
    const expired = rows.filter((x) => x.errorCode === "batch_expired");
    expect(expired).toHaveLength(n - 60);
    expect(expired.every((x) => x.costUsd === 0)).toBe(true);
    const sum = rows.reduce((a, x) => a + x.costUsd, 0);
    const spent = await monthSpendUsd(relayDeps(w.gw.ctx), (await keyContextOf(w.gw, key.raw))!);
    expect(spent.usd).toBeCloseTo(sum, 6);
  }, 90_000);

  test("CONTRACT §9 batch work: a line the vendor failed is retried live once, through the next lane too, then reported failed; never lost, never charged twice", async () => {
    const key = await w.twoLanes({ monthlyBudgetUsd: 100 });
    const prompts = Array.from({ length: 50 }, (_, i) => user(`VB4 p${i}`, i === 7 ? { status: 500 } : {}));
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 20, completion_window: "24h", prompts } });
    expect(r.status).toBe(202);
    const done = await waitEnded(key.raw, r.body.id);
    expect([done.progress.succeeded, done.progress.failed]).toEqual([49, 1]);
    const results = await allResults(key.raw, r.body.id);
    expect([results[7].mode, results[7].state]).toEqual(["live", "failed"]);
    expect(results.filter((x) => x.mode === "batch")).toHaveLength(49);
    const rows = (await recordsOf(r.body.id)).filter((x) => x.requestId === `${r.body.id}.7`);
    // Its vendor line's record, then the live try: the first lane's failure and the next lane's.
    expect(rows.map((x) => `${x.provider}:${x.outcome}`).sort()).toEqual(["groq:error", "openai:error", "openai:error"]);
    expect(rows.every((x) => x.costUsd === 0)).toBe(true);
  }, 90_000);

  test("CONTRACT §9 batch work: cancelling a job on a vendor batch cancels the vendor batch; its unanswered items end cancelled at $0, nothing runs live", async () => {
    w.A.batch.setOptions({ hold: true });
    const key = await w.oneLane({ monthlyBudgetUsd: 100 });
    const prompts = Array.from({ length: 30 }, (_, i) => user(`VB6 p${i}`));
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 20, completion_window: "24h", prompts } });
    expect(r.status).toBe(202);
    let vendorId: string | null = null;
    for (const until = Date.now() + 30_000; !vendorId && Date.now() < until; await Bun.sleep(50)) {
      const [row] = await w.gw.ctx.db.select().from(blitzVendorBatches).where(eq(blitzVendorBatches.jobId, r.body.id));
      vendorId = row?.vendorBatchId ?? null;
    }
    expect(vendorId).not.toBeNull();
    const c = await w.gw.call(`/blitz/jobs/${r.body.id}`, { method: "DELETE", token: key.raw });
    expect(c.body.status).toBe("cancelled");
    w.A.batch.setOptions({});
    let results: any[] = [];
    for (const until = Date.now() + 30_000; Date.now() < until; await Bun.sleep(100)) {
      const j = await w.gw.call(`/blitz/jobs/${r.body.id}?limit=1000`, { token: key.raw });
      results = j.body.results;
      if (j.body.progress.remaining === 0) break;
    }
    expect(w.A.batch.batches.get(vendorId!)!.status).toBe("cancelled");
    expect(results.every((x) => x.state === "cancelled")).toBe(true);
    expect(liveChats("VB6 p")).toBe(0);
    const rows = await recordsOf(r.body.id);
    expect(rows).toHaveLength(30);
    expect(rows.every((x) => x.costUsd === 0 && x.errorCode === "batch_cancelled")).toBe(true);
  }, 60_000);

  test("CONTRACT §9 batch work: a results file with lines that are not JSON loses nothing: the item it garbled runs live, the others are read", async () => {
    w.A.batch.setOptions({ garble: true });
    const key = await w.oneLane({ monthlyBudgetUsd: 100 });
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 20, completion_window: "24h", prompts: Array.from({ length: 6 }, (_, i) => user(`VB7 p${i}`)) } });
    expect(r.status).toBe(202);
    const done = await waitEnded(key.raw, r.body.id);
    w.A.batch.setOptions({});
    expect(done.status).toBe("completed");
    expect(done.progress.succeeded).toBe(6);
    const results = await allResults(key.raw, r.body.id);
    expect(results.map((x) => x.mode)).toEqual(["live", "batch", "batch", "batch", "batch", "batch"]);
    expect(liveChats("VB7 p0")).toBe(1);
    const rows = await recordsOf(r.body.id);
    expect(rows).toHaveLength(6);
    expect(new Set(rows.map((x) => x.requestId)).size).toBe(6);
  }, 60_000);

  test("CONTRACT §9 batch work: a line the vendor reports twice (twice in the output file, again in the error file) is written and charged once", async () => {
    w.A.batch.setOptions({ duplicate: true });
    const key = await w.oneLane({ monthlyBudgetUsd: 100 });
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 20, completion_window: "24h", prompts: Array.from({ length: 5 }, (_, i) => user(`VB8 p${i}`, { prompt_tokens: 100, completion_tokens: 50 })) } });
    expect(r.status).toBe(202);
    const done = await waitEnded(key.raw, r.body.id);
    w.A.batch.setOptions({});
    expect(done.progress.succeeded).toBe(5);
    expect(liveChats("VB8 p")).toBe(0);
    const rows = await recordsOf(r.body.id);
    expect(rows).toHaveLength(5);
    expect(new Set(rows.map((x) => x.requestId)).size).toBe(5);
    const sum = rows.reduce((a, x) => a + x.costUsd, 0);
    const spent = await monthSpendUsd(relayDeps(w.gw.ctx), (await keyContextOf(w.gw, key.raw))!);
    expect(spent.usd).toBeCloseTo(sum, 9);
  }, 60_000);

  test("CONTRACT §9 batch work: without completion_window or mode the job runs live as before", async () => {
    const key = await w.oneLane();
    const uploads = w.A.batch.uploads;
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts: [user("VB5 a"), user("VB5 b")] } });
    const done = await waitEnded(key.raw, r.body.id);
    expect(done.progress.succeeded).toBe(2);
    expect(w.A.batch.uploads).toBe(uploads);
    expect((await allResults(key.raw, r.body.id)).every((x) => x.mode === "live")).toBe(true);
    expect(await w.gw.ctx.db.select().from(blitzVendorBatches).where(eq(blitzVendorBatches.jobId, r.body.id))).toHaveLength(0);
  }, 30_000);
});
