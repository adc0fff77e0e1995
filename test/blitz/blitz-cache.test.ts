// /blitz prompts go through the response cache like any request on a key with one (docs/caching.md
// "/blitz", CONTRACT §8 "Response cache", CONTRACT §7 "A cache hit costs nothing and reserves
// nothing"): a prompt answered before (by /v1/chat/completions or an earlier batch) is a hit that
// is never admitted and costs $0 with a cache_hit record; identical prompts of one batch go
// upstream once; /blitz jobs' items hit the same entries.
import { describe, expect, test } from "bun:test";
import { like } from "drizzle-orm";
import { storesLabel } from "../helpers/gateway.ts";
import { useBlitzWorld } from "../helpers/relay-world.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const MODEL = "gpt-4o-mini";

describe(`/blitz through the response cache (${storesLabel})`, () => {
  const w = useBlitzWorld();

  const tag = () => `${Date.now()}-${Math.random()}`;
  const sent = (text: string) => w.A.received.filter((x) => JSON.stringify(x.body?.messages ?? "").includes(text)).length;
  const records = (requestIdPrefix: string) => w.records(like(usageRecords.requestId, `${requestIdPrefix}%`));

  test("CONTRACT §8: a prompt answered before is a $0 hit with a cache_hit record; identical prompts of a batch go upstream once; the misses are kept", async () => {
    const key = await w.oneLane({ cache: { ttl_seconds: 300, shared: false } });
    const [a, b] = [`cached A ${tag()}`, `cached B ${tag()}`];
    // A is answered once through /v1/chat/completions: the same body is the same entry.
    const first = await w.gw.call("/v1/chat/completions", { token: key.raw, body: { model: MODEL, messages: [{ role: "user", content: a }] } });
    expect(first.status).toBe(200);

    const r = await w.gw.req("/blitz", { method: "POST", token: key.raw, body: { model: MODEL, prompts: [a, b, b] } });
    expect(r.status).toBe(200);
    const batch: any = await r.json();
    const texts = batch.results.map((x: any) => x.completion?.choices[0].message.content);
    expect(texts[0]).toBe(first.body.choices[0].message.content);
    expect(texts[2]).toBe(texts[1]);
    expect(batch.results[0].completion.id).not.toBe(first.body.id);
    expect([sent(a), sent(b)]).toEqual([1, 1]);

    const rows = await records(r.headers.get("x-request-id")!);
    const byPrompt = (i: number) => rows.filter((x) => x.requestId === `${r.headers.get("x-request-id")}.${i}`);
    for (const i of [0, 2]) {
      expect(byPrompt(i).map((x) => [x.outcome, x.costUsd, x.endpoint])).toEqual([["cache_hit", 0, "blitz"]]);
      expect(byPrompt(i)[0]!.savedUsd).toBeGreaterThan(0);
    }
    expect(byPrompt(1).map((x) => x.outcome)).toEqual(["ok"]);

    // The next batch of the same prompts answers from the cache alone.
    const again: any = (await w.gw.call("/blitz", { token: key.raw, body: { model: MODEL, prompts: [a, b] } })).body;
    expect(again.results.map((x: any) => x.completion.choices[0].message.content)).toEqual([texts[0], texts[1]]);
    expect([sent(a), sent(b)]).toEqual([1, 1]);
    // Cache-Control: no-store on the batch: every prompt goes upstream.
    const bypass = await w.gw.req("/blitz", { method: "POST", token: key.raw, body: { model: MODEL, prompts: [a] }, headers: { "cache-control": "no-store" } });
    expect(bypass.status).toBe(200);
    await bypass.arrayBuffer();
    expect(sent(a)).toBe(2);
  });

  test("CONTRACT §7: a batch of hits reserves nothing: it is answered on a key whose budget cannot cover one prompt", async () => {
    const shared = { ttl_seconds: 300, shared: true };
    const filler = await w.oneLane({ cache: shared });
    const poor = await w.oneLane({ cache: shared, monthlyBudgetUsd: 0.000001 });
    const p = `budget ${tag()}`;
    expect((await w.gw.call("/blitz", { token: filler.raw, body: { model: MODEL, prompts: [p] } })).status).toBe(200);
    // A prompt the cache has not seen needs a reservation the budget cannot give.
    expect((await w.gw.call("/blitz", { token: poor.raw, body: { model: MODEL, prompts: [`unseen ${tag()}`] } })).status).toBe(402);
    const hit = await w.gw.call("/blitz", { token: poor.raw, body: { model: MODEL, prompts: [p, p] } });
    expect(hit.status).toBe(200);
    expect(hit.body.results.map((x: any) => x.status)).toEqual([200, 200]);
    expect(sent(p)).toBe(1);
  });

  test("CONTRACT §8: /blitz job items hit the same entries: no upstream call, the job's cost $0 for them", async () => {
    const key = await w.oneLane({ cache: { ttl_seconds: 300, shared: false } });
    const prompts = [`job A ${tag()}`, `job B ${tag()}`];
    expect((await w.gw.call("/blitz", { token: key.raw, body: { model: MODEL, prompts } })).status).toBe(200);
    const posted = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: MODEL, prompts } });
    expect(posted.status).toBe(202);
    const until = Date.now() + 30_000;
    let job: any;
    for (;;) {
      job = (await w.gw.call(`/blitz/jobs/${posted.body.id}?limit=10`, { token: key.raw })).body;
      if (!["queued", "running"].includes(job.status) && job.progress.remaining === 0) break;
      if (Date.now() > until) throw new Error(`job did not end: ${JSON.stringify(job)}`);
      await sleep(50);
    }
    expect(job.progress.succeeded).toBe(2);
    expect(job.cost_usd).toBe(0);
    expect(prompts.map(sent)).toEqual([1, 1]);
    const rows = await records(`${posted.body.id}.`);
    expect(rows.map((x) => [x.outcome, x.costUsd])).toEqual([["cache_hit", 0], ["cache_hit", 0]]);
  });
});
