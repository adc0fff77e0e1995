// /blitz jobs on a fleet (CONTRACT §8): three gateway processes share one job queue (BullMQ on the
// shared Redis) and one Postgres; one of them is SIGKILLed midway through a 1,000-prompt job. The
// job still finishes, every item exactly once: one final state, at most one upstream call and
// exactly one usage record per item (an item in flight on the dead instance is `interrupted` at
// its reserved cost by the in-flight ledger, or rerun once when it never reached the money path).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq, like } from "drizzle-orm";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { blitzJobItems, usageRecords } from "../../src/store/db/schema/index.ts";
import { spawnSibling, type ChildGateway } from "../relay/child-gateway.ts";
import { addCredential, addRoutingKey, lane } from "../relay/fixtures.ts";
import { until as waitUntil } from "../helpers/until.ts";

const name = REAL_STORES
  ? "/blitz jobs on three instances (child gateways, shared Redis queue)"
  : "/blitz jobs on three instances: skipped in embedded mode (needs Postgres and Redis shared by several processes; the embedded queue is one process's)";

const until = <T>(what: string, fn: () => Promise<T | null>, ms = 90_000) => waitUntil(what, fn, ms);

describe.if(REAL_STORES)(name, () => {
  let A: MockUpstream;
  let gw: TestGateway;
  const children: ChildGateway[] = [];

  beforeAll(async () => {
    A = await startMockOpenAI();
    // Provisions and reads the database, and reconciles the dead instance's ledger; runs no job items.
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: A.url, INSTANCE_DEAD_AFTER_SECONDS: "2" });
    await gw.ctx.services.blitzJobs.queue.close();
    const env = {
      PROVIDER_OPENAI_BASE_URL: A.url, ALLOW_PRIVATE_UPSTREAMS: "true",
      INSTANCE_DEAD_AFTER_SECONDS: "2", BLITZ_JOB_LOCK_MS: "1500", BLITZ_JOB_CONCURRENCY: "24",
    };
    children.push(...(await Promise.all([spawnSibling(gw, env), spawnSibling(gw, env), spawnSibling(gw, env)])));
  }, 60_000);
  afterAll(async () => {
    for (const c of children) await c.kill().catch(() => {});
    await gw?.stop();
    await A?.stop();
  }, 60_000);

  test("CONTRACT §8: a 1,000-prompt job with one of three instances SIGKILLed midway finishes with every item exactly once in usage", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    const n = 1000;
    const prompts = Array.from({ length: n }, (_, i) => ({ messages: [{ role: "user", content: `F p${i}.` }], mock: { latency_ms: 5 } }));
    const [c0, c1, c2] = children as [ChildGateway, ChildGateway, ChildGateway];
    const res = await fetch(`${c0.url}/blitz/jobs`, {
      method: "POST", headers: { authorization: `Bearer ${key.raw}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", max_tokens: 50, prompts }),
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    const progress = async (url: string) =>
      ((await (await fetch(`${url}/blitz/jobs/${id}?limit=1`, { headers: { authorization: `Bearer ${key.raw}` } })).json()) as any);

    // What a stuck job was waiting for: its unfinished items by state and owner, and the children's logs.
    const stuck = async () => {
      const open = (await gw.ctx.db.select().from(blitzJobItems).where(eq(blitzJobItems.jobId, id))).filter((i) => i.status === "queued" || i.status === "running");
      const by = new Map<string, number>();
      for (const i of open) by.set(`${i.status}@${i.owner ?? "-"}#${i.attempts}`, (by.get(`${i.status}@${i.owner ?? "-"}#${i.attempts}`) ?? 0) + 1);
      const tails = [c0, c1].map((c) => c.output().split("\n").filter((l) => /"level":(40|50)|error/i.test(l)).slice(-5).join("\n"));
      return `${JSON.stringify(Object.fromEntries(by))}\n${tails.join("\n---\n")}`;
    };
    await until("a third of the job", async () => ((await progress(c0.url)).progress.done >= n / 3 ? true : null));
    await c2.kill();
    // The end is waited for while the job moves: a loaded machine runs it slowly, a stuck job
    // stops moving (items of the dead instance come back after the lock and the ledger's claim).
    let last = -1;
    let movedAt = Date.now();
    const done = await until("the job's end", async () => {
      const p = await progress(c1.url);
      if (p.progress.done !== last) [last, movedAt] = [p.progress.done, Date.now()];
      else if (Date.now() - movedAt > 60_000) throw new Error(`the job stopped moving at ${last} of ${n} items: ${await stuck()}`);
      return p.progress.remaining === 0 ? p : null;
    }, 240_000);
    expect(done.status).toBe("completed");
    expect(done.progress.done).toBe(n);
    expect(done.progress.failed).toBe(0);
    expect(done.progress.not_run).toBe(0);
    expect(done.progress.succeeded + done.progress.interrupted).toBe(n);

    const items = await gw.ctx.db.select().from(blitzJobItems).where(eq(blitzJobItems.jobId, id));
    expect(items).toHaveLength(n);
    // All three instances ran items, and no other did.
    const owners = new Map<string | null, number>();
    for (const i of items) owners.set(i.owner, (owners.get(i.owner) ?? 0) + 1);
    expect(owners.size).toBe(3);

    // Upstream: every prompt was sent; a prompt sent twice is an item rerun after the crash, which
    // happens only when its first attempt left no trace in the money path (no ledger entry, no
    // record), so it is billed once, by the rerun.
    const sent = new Map<number, number>();
    for (const r of A.received) {
      const m = /F p(\d+)\./.exec(JSON.stringify(r.body.messages));
      if (m) sent.set(Number(m[1]), (sent.get(Number(m[1])) ?? 0) + 1);
    }
    expect(sent.size).toBeGreaterThanOrEqual(done.progress.succeeded);
    for (const [idx, count] of sent) {
      expect(count).toBeLessThanOrEqual(2);
      if (count === 2) expect(items.find((i) => i.idx === idx)!.attempts).toBe(2);
    }

    // Exactly one usage record per item, once the dead instance's in-flight entries are reconciled.
    const itemOf = (requestId: string | null) => Number((requestId ?? "").slice(id.length + 1).split(".")[0]);
    const rows = await until("one usage record per item", async () => {
      await gw.ctx.services.usage.flush();
      const rs = await gw.ctx.db.select().from(usageRecords).where(like(usageRecords.requestId, `${id}.%`));
      return new Set(rs.map((r) => itemOf(r.requestId))).size === n ? rs : null;
    }, 60_000);
    expect(rows).toHaveLength(n);
    const interrupted = items.filter((i) => i.status === "interrupted");
    // An interrupted item's one record: `interrupted` at its reserved cost (it was in flight), or
    // the finished attempt's own (it was answered, but the instance died before keeping the answer).
    for (const it of interrupted) {
      const rec = rows.find((r) => itemOf(r.requestId) === it.idx)!;
      expect(["interrupted", "ok"]).toContain(rec.outcome);
      expect(it.costUsd).toBeCloseTo(rec.costUsd, 9);
    }
    // The job's cost is what the records say.
    const recorded = rows.reduce((a, r) => a + r.costUsd, 0);
    const final = await progress(c0.url);
    expect(final.cost_usd).toBeCloseTo(recorded, 6);
  }, 360_000);
});
