// /blitz/jobs end to end over real HTTP on one instance, in both store modes (BullMQ on Redis, the
// in-process queue on the embedded defaults): submission, progress, paging, cancellation, the
// budget stopping admission, ownership, validation and the results' TTL (CONTRACT §8).
import { afterEach, describe, expect, test } from "bun:test";
import { eq, like, sql } from "drizzle-orm";
import { REAL_STORES, storesLabel } from "../helpers/gateway.ts";
import { useBlitzWorld } from "../helpers/relay-world.ts";
import { parseBlitzBody } from "../../src/blitz/validate.ts";
import { estimateCostUsd } from "../../src/relay/pipeline.ts";
import { estimateRequest } from "../../src/money/estimate.ts";
import { loadKeyContext } from "../../src/relay/key-context.ts";
import { blitzJobItems, blitzJobs, usageRecords } from "../../src/store/db/schema/index.ts";
import { deleteExpired } from "../../src/blitz/jobs/store.ts";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const user = (content: string) => ({ messages: [{ role: "user", content }] });

describe(`/blitz/jobs (${storesLabel})`, () => {
  const w = useBlitzWorld();
  afterEach(() => w.A.setDefault({}), 60_000);

  const recordsOf = (jobId: string) => w.records(like(usageRecords.requestId, `${jobId}.%`));
  async function waitEnded(token: string, id: string, ms = 30_000) {
    const until = Date.now() + ms;
    for (;;) {
      const r = await w.gw.call(`/blitz/jobs/${id}?limit=1`, { token });
      if (!["queued", "running"].includes(r.body.status) && r.body.progress.remaining === 0) return r.body;
      if (Date.now() > until) throw new Error(`job did not end: ${JSON.stringify(r.body)}`);
      await sleep(50);
    }
  }
  const receivedOf = (tag: string) => w.A.received.filter((x) => JSON.stringify(x.body.messages).includes(tag)).length;

  test("CONTRACT §8: POST /blitz/jobs → 202 {id, status} + Location; every prompt runs once; results paged by ?after=&limit=", async () => {
    const key = await w.oneLane();
    const n = 120;
    const prompts = Array.from({ length: n }, (_, i) => ({ ...user(`J1 p${i}`), mock: { content: `answer ${i}`, prompt_tokens: 10, completion_tokens: i % 7 } }));
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 20, prompts } });
    expect(r.status).toBe(202);
    const id = String(r.body.id);
    expect(id).toMatch(/^bjob_/);
    expect(r.headers.get("location")).toBe(`/blitz/jobs/${id}`);
    expect([r.body.object, r.body.total]).toEqual(["blitz.job", n]);
    expect(["queued", "running"]).toContain(r.body.status);
    const done = await waitEnded(key.raw, r.body.id);
    expect(done.status).toBe("completed");
    expect(done.progress).toEqual({ done: n, remaining: 0, succeeded: n, failed: 0, not_run: 0, interrupted: 0 });
    expect(done.finished_at).toEqual(expect.any(String));
    expect(Date.parse(done.expires_at) - Date.parse(done.finished_at)).toBe(w.gw.ctx.config.BLITZ_JOB_RESULT_TTL_HOURS * 3600_000);
    // Pages of 50: 0-49, 50-99, 100-119.
    const seen: any[] = [];
    let after: number | null = -1;
    let pages = 0;
    while (after !== null) {
      const p = await w.gw.call(`/blitz/jobs/${r.body.id}?after=${after}&limit=50`, { token: key.raw });
      expect(p.status).toBe(200);
      seen.push(...p.body.results);
      after = p.body.next_after;
      pages++;
    }
    expect(pages).toBe(3);
    expect(seen.map((s) => s.index)).toEqual(Array.from({ length: n }, (_, i) => i));
    for (const s of seen) {
      expect(s.state).toBe("succeeded");
      expect(s.status).toBe(200);
      expect(s.completion.choices[0].message.content).toBe(`answer ${s.index}`);
      expect(s.usage).toEqual({ prompt_tokens: 10, completion_tokens: s.index % 7, total_tokens: 10 + (s.index % 7) });
    }
    // Exactly once upstream and in usage; the job's cost is the records' sum.
    for (let i = 0; i < n; i += 17) expect(receivedOf(`J1 p${i}"`)).toBe(1);
    const rows = await recordsOf(r.body.id);
    expect(rows).toHaveLength(n);
    expect(new Set(rows.map((x) => x.requestId)).size).toBe(n);
    expect(rows.every((x) => x.endpoint === "blitz" && x.outcome === "ok")).toBe(true);
    expect(done.cost_usd).toBeCloseTo(rows.reduce((a, x) => a + x.costUsd, 0), 9);
  }, 60_000);

  // Needs a second connection to hold the lock: the embedded database has one.
  test.skipIf(!REAL_STORES)("CONTRACT §8: items finish and progress counts them while the job row is locked; only the job's end waits for it", async () => {
    const key = await w.oneLane();
    const n = 6;
    const prompts = Array.from({ length: n }, (_, i) => ({ ...user(`JL p${i}`), mock: { content: `a${i}`, prompt_tokens: 3, completion_tokens: 2, latency_ms: i === n - 1 ? 4000 : 1000 } }));
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 5, prompts } });
    expect(r.status).toBe(202);
    const id = String(r.body.id);
    // Once the job runs (its queued → running update needs the row), hold its row lock while every item but the slow last one finishes.
    for (let until = Date.now() + 30_000; (await w.gw.call(`/blitz/jobs/${id}?limit=1`, { token: key.raw })).body.status !== "running";) {
      if (Date.now() > until) throw new Error("job never started");
      await sleep(20);
    }
    let held: any;
    await w.gw.ctx.db.transaction(async (tx) => {
      await tx.execute(sql`select id from blitz_jobs where id = ${id} for update`);
      for (let until = Date.now() + 30_000; ;) {
        held = (await w.gw.call(`/blitz/jobs/${id}?limit=1`, { token: key.raw })).body;
        if (held.progress.done === n - 1 || Date.now() > until) break;
        await sleep(50);
      }
    });
    expect(held.status).toBe("running");
    expect(held.progress).toEqual({ done: n - 1, remaining: 1, succeeded: n - 1, failed: 0, not_run: 0, interrupted: 0 });
    expect(held.cost_usd).toBeGreaterThan(0);
    const done = await waitEnded(key.raw, id);
    expect(done.status).toBe("completed");
    expect(done.progress).toEqual({ done: n, remaining: 0, succeeded: n, failed: 0, not_run: 0, interrupted: 0 });
    expect(done.cost_usd).toBeCloseTo((held.cost_usd * n) / (n - 1), 12);
    // The ending write stored the final counts in the row.
    const [row] = await w.gw.ctx.db.select().from(blitzJobs).where(eq(blitzJobs.id, id));
    expect([row!.remaining, row!.succeeded, row!.costUsd]).toEqual([0, n, done.cost_usd]);
  }, 90_000);

  test("CONTRACT §8: DELETE cancels the prompts not started (never sent); running ones finish and are charged", async () => {
    const key = await w.oneLane();
    const n = 60;
    const prompts = Array.from({ length: n }, (_, i) => ({ ...user(`J2 p${i}`), mock: { latency_ms: 200 } }));
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts } });
    expect(r.status).toBe(202);
    const del = await w.gw.call(`/blitz/jobs/${r.body.id}`, { token: key.raw, method: "DELETE" });
    expect(del.status).toBe(200);
    expect(del.body.status).toBe("cancelled");
    const done = await waitEnded(key.raw, r.body.id);
    expect(done.status).toBe("cancelled");
    expect(done.progress.not_run).toBeGreaterThan(0);
    expect(done.progress.succeeded + done.progress.not_run).toBe(n);
    const all = (await w.gw.call(`/blitz/jobs/${r.body.id}?limit=1000`, { token: key.raw })).body.results;
    const cancelled = all.filter((x: any) => x.state === "cancelled");
    expect(cancelled).toHaveLength(done.progress.not_run);
    expect(cancelled[0].error.code).toBe("cancelled");
    // Cancelled prompts never reached the upstream; the ones that ran have one record each.
    await sleep(100);
    const sent = w.A.received.filter((x) => JSON.stringify(x.body.messages).includes("J2 p")).length;
    expect(sent).toBe(done.progress.succeeded);
    expect(await recordsOf(r.body.id)).toHaveLength(done.progress.succeeded);
    // A second DELETE changes nothing.
    const again = await w.gw.call(`/blitz/jobs/${r.body.id}`, { token: key.raw, method: "DELETE" });
    expect(again.body.progress).toEqual(done.progress);
  }, 60_000);

  test("CONTRACT §8: each item is admitted like a request; when the budget runs out the job stops admitting and reports the items that did not run", async () => {
    const probe = (await loadKeyContext(w.gw.ctx, (await w.oneLane()).hash))!;
    // Answers as long as allowed: the budget is spent, not only held by reservations.
    const body = { model: "gpt-4o-mini", max_tokens: 2000, prompts: Array.from({ length: 24 }, (_, i) => ({ ...user(`J3 p${i}`), mock: { latency_ms: 50, completion_tokens: 2000 } })) };
    const one = estimateCostUsd(w.gw.ctx, probe, parseBlitzBody(body, { max: 10_000, path: "/blitz/jobs" }).requests[0]!, 200)!;
    const key = await w.oneLane({ monthlyBudgetUsd: one * 3.5 });
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body });
    const done = await waitEnded(key.raw, r.body.id);
    expect(done.stop_reason).toBe("budget_exceeded");
    expect(done.progress.succeeded).toBeGreaterThanOrEqual(1);
    expect(done.progress.not_run).toBeGreaterThanOrEqual(1);
    expect(done.progress.succeeded + done.progress.not_run).toBe(24);
    const all = (await w.gw.call(`/blitz/jobs/${r.body.id}?limit=1000`, { token: key.raw })).body.results;
    const notRun = all.filter((x: any) => x.state === "not_run");
    expect(notRun).toHaveLength(done.progress.not_run);
    expect(notRun.every((x: any) => x.status === 402 && x.error.code === "budget_exceeded")).toBe(true);
    const sent = w.A.received.filter((x) => JSON.stringify(x.body.messages).includes("J3 p")).length;
    expect(sent).toBe(done.progress.succeeded);
    // Never over the budget.
    const info = await w.gw.call("/v1/key", { token: key.raw });
    expect(info.body.budget.current_month_spend_usd).toBeLessThanOrEqual(one * 3.5);
  }, 60_000);

  test("CONTRACT §8: a prompt refused for budget while the job's other prompts are in flight waits for their settlements: the job stops only once the budget is really spent", async () => {
    const probe = (await loadKeyContext(w.gw.ctx, (await w.oneLane()).hash))!;
    // Each answer costs about half its reserved worst case: with three in flight the budget looks
    // spent while settled spend is half of it.
    const body = { model: "gpt-4o-mini", max_tokens: 2000, prompts: Array.from({ length: 40 }, (_, i) => ({ ...user(`J6 p${i}`), mock: { latency_ms: 100, completion_tokens: 1000 } })) };
    const first = parseBlitzBody(body, { max: 10_000, path: "/blitz/jobs" }).requests[0]!;
    const est = estimateRequest(w.gw.ctx, probe, first, 200)!;
    const budget = est.usd * 3.5;
    const key = await w.oneLane({ monthlyBudgetUsd: budget });
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body });
    const done = await waitEnded(key.raw, r.body.id, 60_000);
    expect(done.stop_reason).toBe("budget_exceeded");
    expect(done.progress.not_run).toBeGreaterThanOrEqual(1);
    // More prompts ran than fit as worst cases at once, and what is left no longer holds one.
    expect(done.progress.succeeded).toBeGreaterThanOrEqual(5);
    const info = await w.gw.call("/v1/key", { token: key.raw });
    const spent = info.body.budget.current_month_spend_usd as number;
    expect(spent).toBeLessThanOrEqual(budget + 1e-9);
    expect(budget - spent).toBeLessThan(est.usd);
  }, 90_000);

  test("CONTRACT §8: a key's concurrency cap holds for job items (429s wait and retry, none fails)", async () => {
    const key = await w.oneLane({ maxConcurrentRequests: 2 });
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts: Array.from({ length: 8 }, (_, i) => ({ ...user(`J4 p${i}`), mock: { latency_ms: 100 } })) } });
    const done = await waitEnded(key.raw, r.body.id, 60_000);
    expect(done.progress.succeeded).toBe(8);
    expect(await recordsOf(r.body.id)).toHaveLength(8);
  }, 60_000);

  test("CONTRACT §8: only the key that created a job sees it (404 otherwise); bad or out-of-range paging is 400", async () => {
    const key = await w.oneLane();
    const other = await w.oneLane();
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts: ["x"] } });
    for (const method of ["GET", "DELETE"]) {
      const g = await w.gw.call(`/blitz/jobs/${r.body.id}`, { token: other.raw, method });
      expect(g.status).toBe(404);
      expect(g.body).toEqual({ error: expect.any(String), code: "not_found" });
    }
    expect((await w.gw.call("/blitz/jobs/bjob_nope", { token: key.raw })).status).toBe(404);
    expect((await w.gw.call(`/blitz/jobs/${r.body.id}`)).status).toBe(401);
    // Out of range is 400 too, never a 500 from the database (an index past the column's range).
    for (const q of ["after=x", "limit=0", "limit=1001", "after=-2", "page=2", "after=2147483648", "after=10000", "after=99999999999999999999", "limit=99999999999999999999"]) {
      const b = await w.gw.call(`/blitz/jobs/${r.body.id}?${q}`, { token: key.raw });
      expect(b.status).toBe(400);
      expect(b.body.code).toBe("bad_request");
    }
    await waitEnded(key.raw, r.body.id);
  }, 60_000);

  test("CONTRACT §8: validation — over 10,000 prompts, stream, a bad webhook_url are 400 naming the field; 405 is flat", async () => {
    const key = await w.oneLane();
    const a0 = w.A.received.length;
    const cases: Array<[unknown, string]> = [
      [{ model: "gpt-4o-mini", prompts: Array.from({ length: 10_001 }, () => "x") }, "at most 10000"],
      [{ model: "gpt-4o-mini", prompts: ["x"], stream: true }, "stream is not a /blitz/jobs field"],
      [{ model: "gpt-4o-mini", prompts: ["x"], webhook_url: "ftp://example.com/h" }, "webhook_url must use http or https"],
      [{ model: "gpt-4o-mini", prompts: ["x"], webhook_url: "https://u:p@example.com/h" }, "webhook_url must not carry credentials"],
      [{ model: "gpt-4o-mini", prompts: [] }, "prompts is empty"],
      [{ model: "gpt-4o-mini", prompts: ["x"], webhook_url: 42 }, "webhook_url must be an http or https URL"],
    ];
    for (const [body, words] of cases) {
      const r = await w.gw.call("/blitz/jobs", { token: key.raw, body });
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("bad_request");
      expect(r.body.error).toContain(words);
    }
    // Private addresses are refused like bridge URLs unless the operator allows them.
    (w.gw.ctx.config as { ALLOW_PRIVATE_UPSTREAMS: boolean }).ALLOW_PRIVATE_UPSTREAMS = false;
    try {
      const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts: ["x"], webhook_url: "http://127.0.0.1:9/h" } });
      expect(r.status).toBe(400);
      expect(r.body.error).toContain("webhook_url");
      expect(r.body.error).toContain("loopback");
    } finally {
      (w.gw.ctx.config as { ALLOW_PRIVATE_UPSTREAMS: boolean }).ALLOW_PRIVATE_UPSTREAMS = true;
    }
    expect(w.A.received.length).toBe(a0);
    const put = await w.gw.call("/blitz/jobs", { token: key.raw, method: "PUT" });
    expect(put.status).toBe(405);
    expect(put.body).toEqual({ error: expect.any(String) });
  }, 60_000);

  test("CONTRACT §8: a job's body obeys MAX_REQUEST_BYTES like any request's (413 request_too_large, nothing queued)", async () => {
    const key = await w.oneLane();
    const cfg = w.gw.ctx.config as { MAX_REQUEST_BYTES: number };
    const was = cfg.MAX_REQUEST_BYTES;
    cfg.MAX_REQUEST_BYTES = 1024 * 1024;
    try {
      // 1,200 prompts of 1 kB: about 1.2 MB, past the 1 MiB cap (and far below the jobs' own ceiling).
      const prompts = Array.from({ length: 1200 }, (_, i) => `J5 p${i} ${"x".repeat(1000)}`);
      const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts } });
      expect(r.status).toBe(413);
      expect(r.body.code).toBe("request_too_large");
      expect(w.A.received.filter((x) => JSON.stringify(x.body.messages).includes("J5 p")).length).toBe(0);
      // Under the cap it is taken.
      const ok = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts: prompts.slice(0, 2) } });
      expect(ok.status).toBe(202);
      await waitEnded(key.raw, ok.body.id);
    } finally {
      cfg.MAX_REQUEST_BYTES = was;
    }
  }, 60_000);

  test("CONTRACT §8: results are kept for BLITZ_JOB_RESULT_TTL_HOURS after the job ends, then gone (404, rows deleted)", async () => {
    const key = await w.oneLane();
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts: ["a", "b"] } });
    await waitEnded(key.raw, r.body.id);
    await w.gw.ctx.db.update(blitzJobs).set({ expiresAt: new Date(Date.now() - 1000) }).where(eq(blitzJobs.id, r.body.id));
    expect((await w.gw.call(`/blitz/jobs/${r.body.id}`, { token: key.raw })).status).toBe(404);
    expect(await deleteExpired(w.gw.ctx)).toBeGreaterThanOrEqual(1);
    expect(await w.gw.ctx.db.select().from(blitzJobItems).where(eq(blitzJobItems.jobId, r.body.id))).toHaveLength(0);
  }, 60_000);
});
