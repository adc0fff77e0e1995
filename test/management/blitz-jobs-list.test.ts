// GET /v1/organizations/blitz-jobs: the account's /blitz jobs across all its routing keys (the
// dashboard's jobs view reads it), newest first, with status, progress and cost as
// GET /blitz/jobs/{id} reports them; never another account's, never a job whose results expired.
import { describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { addToken, createAccount, storesLabel } from "../helpers/gateway.ts";
import { useBlitzWorld } from "../helpers/relay-world.ts";
import { addCredential, addRoutingKey, lane } from "../relay/fixtures.ts";
import { blitzJobs } from "../../src/store/db/schema/index.ts";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const prompts = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ messages: [{ role: "user", content: `${tag} ${i}` }], mock: { prompt_tokens: 10, completion_tokens: 3 } }));

describe(`GET /v1/organizations/blitz-jobs (${storesLabel})`, () => {
  const w = useBlitzWorld();

  async function submit(raw: string, n: number, tag: string): Promise<string> {
    const r = await w.gw.call("/blitz/jobs", { token: raw, body: { model: "gpt-4o-mini", max_tokens: 10, prompts: prompts(n, tag) } });
    expect(r.status).toBe(202);
    return String(r.body.id);
  }
  async function ended(raw: string, id: string) {
    const until = Date.now() + 60_000;
    for (;;) {
      const r = await w.gw.call(`/blitz/jobs/${id}?limit=1`, { token: raw });
      if (!["queued", "running"].includes(r.body.status) && r.body.progress.remaining === 0) return r.body;
      if (Date.now() > until) throw new Error(`job did not end: ${JSON.stringify(r.body)}`);
      await sleep(50);
    }
  }

  test("lists the account's jobs from every one of its keys, newest first, each as GET /blitz/jobs/{id} shows it plus its key; an rk_ token reads it", async () => {
    const k1 = await w.oneLane({ label: "evals" });
    const k2 = await w.oneLane({ label: "backfill" });
    const first = await submit(k1.raw, 3, "first");
    const a = await ended(k1.raw, first);
    await sleep(5); // distinct creation times
    const second = await submit(k2.raw, 2, "second");
    const b = await ended(k2.raw, second);
    const rk = await addToken(w.gw, w.acct.id, "read_only");
    const r = await w.gw.call("/v1/organizations/blitz-jobs", { token: rk });
    expect(r.status).toBe(200);
    expect(r.body.jobs.map((j: any) => j.id)).toEqual([second, first]);
    const { results: _ra, next_after: _na, ...jobA } = a;
    const { results: _rb, next_after: _nb, ...jobB } = b;
    expect(r.body.jobs[1]).toEqual({ ...jobA, routing_key_id: k1.id, routing_key_label: "evals" });
    expect(r.body.jobs[0]).toEqual({ ...jobB, routing_key_id: k2.id, routing_key_label: "backfill" });
    expect(r.body.jobs[1]).toMatchObject({ status: "completed", total: 3, progress: { done: 3, remaining: 0, succeeded: 3 } });
    expect(r.body.jobs[1].cost_usd).toBeGreaterThan(0);
    // One key's jobs, and the newest only.
    expect((await w.gw.call(`/v1/organizations/blitz-jobs?key=${k1.id}`, { token: rk })).body.jobs.map((j: any) => j.id)).toEqual([first]);
    expect((await w.gw.call("/v1/organizations/blitz-jobs?limit=1", { token: rk })).body.jobs.map((j: any) => j.id)).toEqual([second]);
  }, 120_000);

  test("never another account's jobs (nor through its key id), never a job whose results expired", async () => {
    const other = await createAccount(w.gw);
    const otherCred = await addCredential(w.gw, other.id, "openai");
    const theirs = await addRoutingKey(w.gw, other.id, { label: "theirs", lanes: [lane("openai", otherCred.id)] });
    const job = await submit(theirs.raw, 1, "other");
    await ended(theirs.raw, job);
    const mine = (await w.gw.call("/v1/organizations/blitz-jobs", { token: w.acct.token })).body.jobs.map((j: any) => j.id);
    expect(mine).not.toContain(job);
    expect((await w.gw.call(`/v1/organizations/blitz-jobs?key=${theirs.id}`, { token: w.acct.token })).body.jobs).toEqual([]);
    expect((await w.gw.call("/v1/organizations/blitz-jobs", { token: other.token })).body.jobs.map((j: any) => j.id)).toEqual([job]);
    await w.gw.ctx.db.update(blitzJobs).set({ expiresAt: new Date(Date.now() - 1000) }).where(eq(blitzJobs.id, job));
    expect((await w.gw.call("/v1/organizations/blitz-jobs", { token: other.token })).body.jobs).toEqual([]);
  }, 120_000);

  test("bad input is a 400 naming the parameter; no token is a 401", async () => {
    for (const q of ["limit=0", "limit=201", "limit=abc", "colour=red"]) {
      const r = await w.gw.call(`/v1/organizations/blitz-jobs?${q}`, { token: w.acct.token });
      expect([q, r.status]).toEqual([q, 400]);
      expect(r.body.error).toMatch(q.startsWith("limit") ? /limit/ : /colour/);
    }
    expect((await w.gw.call("/v1/organizations/blitz-jobs")).status).toBe(401);
  });
});
